"""In process: a LangChain tool asks the user from inside the framework's own tool run (a synchronous tool
on LangChain's thread included), and the runner polls tasks only with someone to ask."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from dex_agents import (
    QuestionAnswer,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCanceller,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
    ask_user_input,
)
from dex_agents.runner import ToolCallsRequested
from dex_agents.testing import SessionSide
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call

threads: list[str] = []


@tool
def refund_order(order_id: str) -> str:
    """Refund an order to the warehouse the user picks."""
    threads.append(threading.current_thread().name)
    warehouse = ask_user_input("Which warehouse?", choices=["Berlin", "Lyon"])
    return f"refunded {order_id} via {warehouse}"


@tool
def render_report(name: str) -> str:
    """Render a report."""
    return f"rendered {name}"


def _runner(*calls: Any, tasks: ToolTaskHandlers | None = None) -> LangGraphRunner:
    model = ScriptedChatModel(responses=[respond("", *calls)])

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model, tools=[refund_order, render_report], middleware=[DexToolGate()], checkpointer=checkpointer
        )

    return LangGraphRunner(build, tool_tasks=tasks)


async def _deferred(runner: LangGraphRunner) -> SessionSide:
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    return session


async def test_a_synchronous_tool_on_langchains_thread_asks_and_then_runs_with_the_answer() -> None:
    runner = _runner(tool_call("refund_order", {"order_id": "7"}, "refund-1"))
    session = await _deferred(runner)
    threads.clear()

    asked = await session.execute_outcome(runner, "refund-1")

    assert asked == ToolInputRequested("Which warehouse?", ("Berlin", "Lyon"))
    assert threads and threads[0] != threading.main_thread().name, "LangChain ran the sync tool on a thread"
    answer = QuestionAnswer("refund-1-input-1", "Which warehouse?", "Lyon")
    session.records["refund-1"] = dataclasses.replace(session.records["refund-1"], input_answers=(answer,))
    assert await session.execute(runner, "refund-1") == "refunded 7 via Lyon"


async def test_only_a_runner_with_task_handlers_polls_tasks_and_it_delegates_by_tool_name() -> None:
    polled: list[str] = []

    async def poll(request: ToolTaskPoll) -> ToolTaskPollOutcome:
        polled.append(str(request.tool_call.task_id))
        return ToolExecutionResult("rendered")

    call = tool_call("render_report", {"name": "q3"}, "render-1")
    polling = _runner(call, tasks=ToolTaskHandlers({"render_report": ToolTaskHandler(poll=poll)}))
    session = await _deferred(polling)
    record = dataclasses.replace(session.records["render-1"], task_id="job-q3")
    execution = session.execution("render-1")
    request = ToolTaskPoll(session.flow_id, record, execution.idempotency_key, 1, (), execution.events, _beat)

    assert isinstance(polling, ToolTaskPoller) and isinstance(polling, ToolTaskCanceller)
    assert await polling.poll_tool_task(request) == ToolExecutionResult("rendered")
    assert polled == ["job-q3"]
    # Without tool_tasks (or an MCP source) the runner polls nothing, so the session tells tools
    # (supports_tool_tasks) to finish their work inside the call.
    assert not isinstance(_runner(call), ToolTaskPoller)


async def _beat() -> None:
    return None
