"""A turn that steering, `cancel_turn` or a failure ends early, in process: what it keeps, and that a
cancelled model Step cancels the graph's own model call. `test_session_specifics.py` and the matrix's items
14 and 15 run the same through whole sessions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from dex_agents import (
    STEERED_REJECTION_MESSAGE,
    CancellationReason,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
)
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    ScriptedResponse,
    ScriptStore,
    SessionSide,
    wait_until,
    with_model_call_scope,
)
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph._messages import history_from_stored_messages
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call


@tool
async def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def weather_runner(
    model: ScriptedChatModel, savers: list[DexCheckpointSaver] | None = None
) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        if savers is not None:
            savers.append(checkpointer)
        return create_agent(model, tools=[get_weather], middleware=[DexToolGate()], checkpointer=checkpointer)

    return LangGraphRunner(build)


async def test_a_turn_ended_in_its_second_tool_round_keeps_both_rounds_and_a_result_per_call() -> None:
    model = ScriptedChatModel(
        responses=[
            respond("First Paris.", tool_call("get_weather", {"city": "Paris"}, "call-1")),
            respond(
                "Now Rome and Oslo.",
                tool_call("get_weather", {"city": "Rome"}, "call-2"),
                tool_call("get_weather", {"city": "Oslo"}, "call-3"),
            ),
            respond("Understood, I stop."),
        ]
    )
    runner = weather_runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Paris, then Rome and Oslo?"))
    # Before the turn's first tool call nothing of it is unstored but the model call, which is dropped.
    assert await runner.build_unfinished_turn_messages(session.context()) == []
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny in Paris")
    second = await runner.run_model_step(session.context())
    assert isinstance(second, ToolCallsRequested)
    assert second.new_messages == (), "the turn's messages stay in the run state until the turn ends"
    session.defer(second)
    session.finish("call-2", ToolCallStatus.SUCCEEDED, output="sunny in Rome")
    session.abandon("call-3", CancellationReason.STEERED)

    await session.end_turn_early(runner)

    assert len(model.inputs) == 2, "ending the turn made no model call"
    replayed = history_from_stored_messages(session.messages)
    assert [type(message) for message in replayed] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
        ToolMessage,
        ToolMessage,
    ]
    rounds = [message for message in replayed if isinstance(message, AIMessage)]
    assert [(answer.text, [call["id"] for call in answer.tool_calls]) for answer in rounds] == [
        ("First Paris.", ["call-1"]),
        ("Now Rome and Oslo.", ["call-2", "call-3"]),
    ]
    assert [answer.usage_metadata for answer in rounds] == [
        {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    ] * 2
    results = [message for message in replayed if isinstance(message, ToolMessage)]
    assert [(result.tool_call_id, result.status, result.text) for result in results] == [
        ("call-1", "success", "sunny in Paris"),
        ("call-2", "success", "sunny in Rome"),
        ("call-3", "error", STEERED_REJECTION_MESSAGE),
    ]

    session.start_turn(runner.build_user_message("Stop there."))
    answer = await runner.run_model_step(session.context())

    assert isinstance(answer, TurnCompleted) and answer.turn_error is None
    assert model.input_texts(3)[-5:] == [
        'assistant calls get_weather {"city": "Rome"} [call-2]',
        'assistant calls get_weather {"city": "Oslo"} [call-3]',
        "tool get_weather [call-2] success: sunny in Rome",
        f"tool get_weather [call-3] error: {STEERED_REJECTION_MESSAGE}",
        "user: Stop there.",
    ]


async def test_cancelling_the_model_step_cancels_the_graphs_model_call_and_keeps_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    store = ScriptStore(tmp_path)
    savers: list[DexCheckpointSaver] = []

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        savers.append(checkpointer)
        return create_agent(
            ScriptedChatModel(),
            tools=list(MATRIX_TOOLS),
            middleware=[DexToolGate()],
            checkpointer=checkpointer,
        )

    runner = with_model_call_scope(LangGraphRunner(build))
    session = SessionSide()
    store.set_turns(session.flow_id, [[ScriptedResponse(text="Never said.", block_until_cancelled=True)]])
    session.start_turn(runner.build_user_message("Where is A-1?"))
    step = asyncio.create_task(runner.run_model_step(session.context()))
    await wait_until("the model call to start", lambda: store.invocations.model_calls(session.flow_id))

    step.cancel()

    with pytest.raises(asyncio.CancelledError):
        await step
    # The scripted model logs the CancelledError it got inside LangGraph's own model task.
    assert len(store.invocations.cancelled_model_calls(session.flow_id)) == 1
    [saver] = savers
    assert not saver.storage and not saver.writes and not saver.blobs, "the run's thread is deleted"
    assert session.text_deltas() == []
