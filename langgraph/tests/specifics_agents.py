"""Agents for the session-level tests of LangChain specifics; the test and its Worker build them here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dex_agents import AgentSessionFlow
from dex_agents.testing import MATRIX_TOOLS, matrix_session_options, with_model_call_scope
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, HumanInTheLoopMiddleware
from langchain.agents.structured_output import ToolStrategy
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel


class Forecast(BaseModel):
    """The structured output of the forecast agent."""

    city: str
    temperature_c: int


def _runner(
    tools: list[Any], middleware: Sequence[AgentMiddleware] = (), **agent_options: Any
) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            ScriptedChatModel(),
            tools=tools,
            middleware=[*middleware, DexToolGate()],
            checkpointer=checkpointer,
            **agent_options,
        )

    return LangGraphRunner(build, allowed_msgpack_modules=[(__name__, "Forecast")])


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """A plain agent with the matrix tools, the same agent with structured output, and one whose
    `HumanInTheLoopMiddleware` reviews the single-attempt write (which the session's policy runs without
    approval) and the idempotent write."""
    return (
        AgentSessionFlow(
            with_model_call_scope(_runner(list(MATRIX_TOOLS))),
            flow_type="LangGraphSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(_runner(list(MATRIX_TOOLS), response_format=ToolStrategy(Forecast))),
            flow_type="LangGraphForecast",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(
                _runner(
                    list(MATRIX_TOOLS),
                    [HumanInTheLoopMiddleware(interrupt_on={"cancel_order": True, "send_receipt": True})],
                )
            ),
            flow_type="LangGraphReviewed",
            options=matrix_session_options(),
        ),
    )
