"""Agents for the session-level tests of LangChain specifics; the test and its Worker build them here."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dex_agents import WRITE_TODOS, AgentSessionFlow, CompactionPolicy
from dex_agents.testing import MATRIX_TOOLS, STATE_DIR_ENV, matrix_session_options, with_model_call_scope
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, AgentState, HumanInTheLoopMiddleware, before_model
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import HumanMessage
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from pydantic import BaseModel

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel


class Forecast(BaseModel):
    """The structured output of the forecast agent."""

    city: str
    temperature_c: int


def _runner(
    tools: list[Any],
    middleware: Sequence[AgentMiddleware] = (),
    *,
    summary_model: ScriptedChatModel | None = None,
    **agent_options: Any,
) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            ScriptedChatModel(),
            tools=tools,
            middleware=[*middleware, DexToolGate()],
            checkpointer=checkpointer,
            **agent_options,
        )

    return LangGraphRunner(
        build, allowed_msgpack_modules=[(__name__, "Forecast")], summary_model=summary_model
    )


def node_answers_path(state_dir: Path) -> Path:
    """One line per answer a graph node's interrupt() returned."""
    return state_dir / "node-answers.log"


@before_model
def confirm_first(state: AgentState[Any], runtime: Runtime[Any]) -> None:
    """Ask the user before the model call when their message starts with "Confirm first"."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage) and last.text.startswith("Confirm first"):
        answer = interrupt({"question": "Go ahead with the order?", "choices": ["yes", "no"]})
        with node_answers_path(Path(os.environ[STATE_DIR_ENV])).open("a", encoding="utf-8") as log:
            log.write(f"{answer}\n")


COMPACTION_WINDOW_TOKENS = 200
"""The compacting agent's context window: a 700-character message fills most of it."""


def build_flows() -> tuple[AgentSessionFlow, ...]:
    """A plain agent with the matrix tools, the same agent with structured output, and one whose
    `HumanInTheLoopMiddleware` reviews the single-attempt write (which the session's policy runs without
    approval) and the idempotent write, and whose node asks before the model call when told to; and the
    plain agent with plan mode, and with compaction."""
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
                    [
                        confirm_first,
                        HumanInTheLoopMiddleware(interrupt_on={"cancel_order": True, "send_receipt": True}),
                    ],
                )
            ),
            flow_type="LangGraphReviewed",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(_runner(list(MATRIX_TOOLS))),
            flow_type="LangGraphPlanning",
            options=dataclasses.replace(
                matrix_session_options(built_in_tools=[WRITE_TODOS]), plan_mode_enabled=True
            ),
        ),
        AgentSessionFlow(
            with_model_call_scope(_runner(list(MATRIX_TOOLS), summary_model=ScriptedChatModel())),
            flow_type="LangGraphCompacting",
            options=dataclasses.replace(
                matrix_session_options(),
                compaction=CompactionPolicy(context_window_tokens=COMPACTION_WINDOW_TOKENS),
            ),
        ),
    )
