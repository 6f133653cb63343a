"""A turn that ends without an answer (failed, steered, cancelled), in process: what it keeps, and how a
cancelled model call stops inside ADK.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from dex_agents import CancellationReason, RunStateFormatError, cancellation_rejection_message
from dex_agents.runner import ToolCallsRequested
from dex_agents.testing import (
    STATE_DIR_ENV,
    ScriptedResponse,
    ScriptStore,
    SessionSide,
    stored_calls_without_result,
    wait_until,
    with_model_call_scope,
)
from dex_agents.values import MessageRole, ToolCallStatus
from google.adk.agents import LlmAgent

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk._gate import DEFERRED_PLACEHOLDER
from dex_agents_google_adk.testing import ScriptedLlm
from tests.support import CannedLlm, call, respond


async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


async def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def orders_runner(model: ScriptedLlm) -> GoogleAdkRunner:
    return GoogleAdkRunner(LlmAgent(name="orders", model=model, tools=[lookup_order, refund_order]))


async def test_a_turn_ended_after_two_model_calls_keeps_both_and_a_recorded_result_for_every_call() -> None:
    model = CannedLlm(
        responses=[
            respond(call("lookup_order", {"order_id": "A-1"}, "read-1")),
            respond(
                "A-1 shipped. Refunding it, and teleporting.",
                call("refund_order", {"order_id": "A-1"}, "refund-1"),
                call("teleport", {"to": "moon"}, "teleport-1"),
            ),
            respond("Understood, nothing more."),
        ]
    )
    runner = orders_runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Where is A-1? Refund it."))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("read-1", ToolCallStatus.SUCCEEDED, output="A-1 shipped on Monday")
    second = await runner.run_model_step(session.context())
    assert isinstance(second, ToolCallsRequested)
    session.defer(second)
    # The unknown tool's recorded failure replaces ADK's own "not found" answer of the model Step.
    session.finish("teleport-1", ToolCallStatus.FAILED, error="no teleport here")
    session.abandon("refund-1", CancellationReason.STEERED)

    stored = await session.end_turn_early(runner)

    assert model.calls == 2, "building the turn's items made no model call"
    assert [(m.role, m.text or None, m.tool_call_id) for m in stored] == [
        (MessageRole.ASSISTANT, None, "read-1"),
        (MessageRole.TOOL, None, "read-1"),
        (MessageRole.ASSISTANT, "A-1 shipped. Refunding it, and teleporting.", None),
        (MessageRole.ASSISTANT, None, "refund-1"),
        (MessageRole.ASSISTANT, None, "teleport-1"),
        (MessageRole.TOOL, None, "refund-1"),
        (MessageRole.TOOL, None, "teleport-1"),
    ]
    assert stored_calls_without_result(session.messages) == []
    # The abandoned call stores the session's compact rejection text as it is, not ADK's envelope.
    assert {m.tool_call_id: m.tool_output for m in stored if m.role is MessageRole.TOOL} == {
        "read-1": "A-1 shipped on Monday",
        "refund-1": cancellation_rejection_message(CancellationReason.STEERED),
        "teleport-1": "The tool call failed: no teleport here",
    }
    for message in stored:
        assert "adk_request_confirmation" not in message.framework_item
        assert DEFERRED_PLACEHOLDER["status"] not in message.framework_item
        assert "not found" not in message.framework_item
    session.start_turn(runner.build_user_message("Stop. Do nothing more."))
    await runner.run_model_step(session.context())
    assert model.responses_seen(3) == [
        {"result": "A-1 shipped on Monday"},
        {"error": cancellation_rejection_message(CancellationReason.STEERED)},
        {"error": "The tool call failed: no teleport here"},
    ]


async def test_a_turn_ended_before_it_asked_for_tools_has_nothing_left_to_store() -> None:
    runner = orders_runner(CannedLlm())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    assert await session.end_turn_early(runner) == []


async def test_another_runners_run_state_is_refused_so_the_session_stores_its_note() -> None:
    runner = orders_runner(CannedLlm())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))
    session.framework_run_state = '{"format": "dex-agents-someone-else/run-state", "version": 1}'

    with pytest.raises(RunStateFormatError, match="not written by GoogleAdkRunner"):
        await runner.build_unfinished_turn_messages(session.context())


async def test_cancelling_a_model_step_cancels_adks_model_call_and_leaves_no_task_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    store = ScriptStore(tmp_path)
    session = SessionSide()
    store.set_turns(session.flow_id, [[ScriptedResponse(text="Never said.", block_until_cancelled=True)]])
    runner = with_model_call_scope(orders_runner(ScriptedLlm()))
    session.start_turn(runner.build_user_message("Where is A-1?"))

    step = asyncio.create_task(runner.run_model_step(session.context()))
    await wait_until("the model call to start", lambda: store.invocations.model_calls(session.flow_id))
    step.cancel()

    with pytest.raises(asyncio.CancelledError):
        await step
    assert store.invocations.cancelled_model_calls(session.flow_id), "the model call saw the cancellation"
    assert asyncio.all_tasks() == {asyncio.current_task()}, "ADK's agent task was cancelled with the Step"
    assert session.text_deltas() == []
