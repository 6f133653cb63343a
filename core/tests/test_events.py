"""The AgentEvents Stream of a tool turn, and snapshots of sessions that were stopped."""

import json
from datetime import timedelta

import pytest
from dex import LongPollTimeoutError, StopFlowOptions, StopType

from dex_agents import AgentEvent, AgentEventType, MessageRole
from dex_agents.testing import ScriptedResponse, wait_for_agent_snapshot, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _events_until_turn_end(harness: MatrixHarness, session: str) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    token = ""
    while True:
        try:
            message = await harness.sessions.read_agent_event(session, token, timedelta(seconds=5))
        except LongPollTimeoutError:
            raise AssertionError(f"the turn never ended on the Stream; events: {events}") from None
        token = message.resume_token
        events.append(message.value)
        if message.value.type in (AgentEventType.TURN_COMPLETED, AgentEventType.TURN_FAILED):
            return events


def _payload(event: AgentEvent) -> dict[str, object]:
    payload: dict[str, object] = json.loads(event.payload)
    return payload


async def test_a_tool_turn_writes_every_event_once_with_its_step(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("events-tools")
    read = harness.call(harness.tools.read, "read-1")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(session, [ScriptedResponse(tool_calls=(read, write)), ScriptedResponse(text="Refunded.")])
    await harness.sessions.start_session(session, "Refund A-1")
    await wait_for_agent_snapshot(
        harness.sessions,
        session,
        lambda snapshot: bool(snapshot.pending_interrupts),
        description="the approval",
    )
    assert await harness.sessions.resolve_interrupt(session, "refund-1", approved=True)
    await wait_for_turn_end(harness.sessions, session, 1)
    events = await _events_until_turn_end(harness, session)
    types = [event.type for event in events]

    assert types[0] == AgentEventType.TURN_STARTED and types[-1] == AgentEventType.TURN_COMPLETED
    assert all(event.turn_id == "turn-1" and event.attempt >= 1 for event in events), events
    assert all(event.step_execution_id for event in events), events
    deferred = {
        str(_payload(event)["tool_call_id"]): _payload(event)
        for event in events
        if event.type == "tool_call_deferred"
    }
    assert deferred["read-1"]["effect"] == "read" and deferred["read-1"]["requires_approval"] is False
    assert (
        deferred["refund-1"]["effect"] == "non_idempotent_write"
        and deferred["refund-1"]["requires_approval"] is True
    )
    raised = [_payload(event) for event in events if event.type == AgentEventType.INTERRUPT_RAISED]
    assert [(item["interrupt_id"], item["tool_name"]) for item in raised] == [
        ("refund-1", harness.tools.approval_write)
    ]
    resolved = [_payload(event) for event in events if event.type == AgentEventType.INTERRUPT_RESOLVED]
    assert [(item["interrupt_id"], item["approved"]) for item in resolved] == [("refund-1", True)]
    started = {
        str(_payload(event)["tool_call_id"]): event for event in events if event.type == "tool_call_started"
    }
    finished = {
        str(_payload(event)["tool_call_id"]): event for event in events if event.type == "tool_call_finished"
    }
    assert sorted(started) == sorted(finished) == ["read-1", "refund-1"]
    assert {call_id: _payload(event)["status"] for call_id, event in finished.items()} == {
        "read-1": "succeeded",
        "refund-1": "succeeded",
    }
    # Each tool's events carry its own tool Step, not the model Step's.
    assert started["read-1"].step_execution_id.startswith("CallTool-")
    assert started["refund-1"].step_execution_id.startswith("CallSingleAttemptTool-")
    usage = [_payload(event) for event in events if event.type == AgentEventType.USAGE_RECORDED]
    assert len(usage) == 2  # one per model call
    # The turn appended two tool requests, two tool results and the answer.
    assert _payload(events[-1])["message_count"] == 5


async def test_snapshot_serves_a_stopped_session(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("stopped")
    harness.script(session, [ScriptedResponse(text="Goodbye.")])
    await harness.sessions.start_session(session, "Bye")
    before = await wait_for_turn_end(harness.sessions, session, 1)
    await harness.stack.client.stop_flow(
        session, StopFlowOptions(type=StopType.CANCEL, reason="user closed it")
    )
    after = await harness.sessions.get_agent_snapshot(session)
    assert [(message.role, message.text) for message in after.messages] == [
        (MessageRole.USER, "Bye"),
        (MessageRole.ASSISTANT, "Goodbye."),
    ]
    assert after.messages == before.messages and after.usage == before.usage


async def test_writes_from_threads_arrive_and_writes_after_the_call_are_dropped(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("events-threads")
    harness.script(
        session,
        [ScriptedResponse(text="main text", thread_text="from a thread ", late_text="too late")],
        [ScriptedResponse(text="second turn")],
    )
    await harness.sessions.start_session(session, "Hi")
    await wait_for_turn_end(harness.sessions, session, 1)
    first = await _events_until_turn_end(harness, session)
    deltas = [str(_payload(event)["text"]) for event in first if event.type == AgentEventType.TEXT_DELTA]
    assert deltas == ["from a thread ", "main text"]  # in call order, the thread's write first
    # A second turn gives the dropped write time to have arrived, had it not been dropped.
    assert await harness.sessions.send_user_message(session, "Again")
    await wait_for_turn_end(harness.sessions, session, 2)
    everything: list[AgentEvent] = []
    token = ""
    while True:
        try:
            message = await harness.sessions.read_agent_event(session, token, timedelta(seconds=1))
        except LongPollTimeoutError:
            break
        token = message.resume_token
        everything.append(message.value)
    texts = [str(_payload(event)["text"]) for event in everything if event.type == AgentEventType.TEXT_DELTA]
    assert texts == ["from a thread ", "main text", "second turn"]
