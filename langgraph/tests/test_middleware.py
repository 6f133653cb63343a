"""Where other tool middleware runs around `DexToolGate`, which the docs' Limits page warns about."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import ToolCallStatus
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, wrap_tool_call
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call


def counting(entries: list[str], label: str) -> AgentMiddleware:
    # The runner drives the graph asynchronously, so tool middleware needs its async hook.
    @wrap_tool_call(name=f"count_{label}")
    async def count(
        request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        entries.append(f"{label} {request.tool_call['id']}")
        return await handler(request)

    return count


async def test_middleware_before_the_gate_reruns_on_resume_and_after_it_runs_only_in_the_tool_step() -> None:
    runs: list[str] = []
    outer: list[str] = []
    inner: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        runs.append(city)
        return f"sunny in {city}"

    model = ScriptedChatModel(
        responses=[respond("", tool_call("get_weather", {"city": "Oslo"}, "call-1")), respond("ok")]
    )

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model,
            tools=[get_weather],
            middleware=[counting(outer, "outer"), DexToolGate(), counting(inner, "inner")],
            checkpointer=checkpointer,
        )

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    assert (outer, inner, runs) == (["outer call-1"], [], [])

    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-1"))
    assert (outer, inner, runs) == (["outer call-1"] * 2, ["inner call-1"], ["Oslo"])

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    # LangGraph re-runs the tools node from its start on resume: code before the gate runs again.
    assert (outer, inner, runs) == (["outer call-1"] * 3, ["inner call-1"], ["Oslo"])
