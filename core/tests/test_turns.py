"""Turns: invalid tool call IDs and turn_error fail a turn without a retry; events by attempt; pagination."""

import json
from datetime import timedelta

import pytest
from dex import LongPollTimeoutError

from dex_agents import AgentEvent, AgentEventType
from dex_agents.testing import ScriptedResponse, ScriptedToolCall, executed_step_types, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _assert_next_turn_works(harness: MatrixHarness, session: str, turn_count: int) -> None:
    assert await harness.sessions.send_user_message(session, "Are you there?")
    snapshot = await wait_for_turn_end(harness.sessions, session, turn_count)
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert snapshot.messages[-1].text == "Yes."


@pytest.mark.parametrize(
    ("ids", "named"),
    [(("bad/id",), "bad/id"), (("",), "empty"), (("same", "same"), "same")],
    ids=["slash", "empty", "duplicate"],
)
async def test_invalid_tool_call_ids_fail_the_turn_without_a_retry(
    harness: MatrixHarness, ids: tuple[str, ...], named: str
) -> None:
    session = harness.stack.new_session_id("bad-ids")
    calls = tuple(ScriptedToolCall(harness.tools.read, {"order_id": "A-1"}, call_id) for call_id in ids)
    harness.script(session, [ScriptedResponse(tool_calls=calls)], [ScriptedResponse(text="Yes.")])
    await harness.sessions.start_session(session, "Look it up")
    failed = await wait_for_turn_end(harness.sessions, session, 1)
    assert failed.state is not None and failed.state.last_turn_error is not None
    error = failed.state.last_turn_error
    assert "tool call ID" in error and named in error, error
    assert len(harness.model_calls(session)) == 1  # no retry of a deterministic failure
    assert not harness.tool_runs(session, harness.tools.read)
    await _assert_next_turn_works(harness, session, 2)


async def test_turn_error_fails_the_turn_without_a_retry(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("turn-error")
    harness.script(
        session,
        [ScriptedResponse(text="I cannot help with that.", turn_error="guardrail tripped: refund policy")],
        [ScriptedResponse(text="Yes.")],
    )
    await harness.sessions.start_session(session, "Refund everything")
    failed = await wait_for_turn_end(harness.sessions, session, 1)
    assert failed.state is not None
    assert failed.state.last_turn_error == "guardrail tripped: refund policy"
    assert len(harness.model_calls(session)) == 1
    history = await harness.stack.read_step_history(session)
    assert [entry.final_attempt for entry in history if entry.step_type == "RunModel"] == [1]
    await _assert_next_turn_works(harness, session, 2)


async def _read_turn_events(harness: MatrixHarness, session: str) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    token = ""
    while True:
        try:
            message = await harness.sessions.read_agent_event(session, token, timedelta(seconds=5))
        except LongPollTimeoutError:
            raise AssertionError(f"no turn_completed event; events so far: {events}") from None
        token = message.resume_token
        events.append(message.value)
        if message.value.type in (AgentEventType.TURN_COMPLETED, AgentEventType.TURN_FAILED):
            return events


async def test_events_of_a_retried_model_call_are_grouped_by_attempt(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("events")
    harness.script(
        session, [ScriptedResponse(text="Final answer.", partial_text="Draft: ", fail_attempts=(1,))]
    )
    await harness.sessions.start_session(session, "Write something")
    await wait_for_turn_end(harness.sessions, session, 1)
    events = await _read_turn_events(harness, session)
    assert {event.turn_id for event in events} == {"turn-1"}
    assert events[0].type == AgentEventType.TURN_STARTED
    deltas = [event for event in events if event.type == AgentEventType.TEXT_DELTA]
    assert len({event.step_execution_id for event in deltas}) == 1
    assert deltas[0].step_execution_id.startswith("RunModel-")
    by_attempt: dict[int, str] = {}
    for event in deltas:
        by_attempt[event.attempt] = by_attempt.get(event.attempt, "") + json.loads(event.payload)["text"]
    # A UI keeps only the highest attempt of a Step execution; the failed attempt's partial text is dropped.
    assert by_attempt == {1: "Draft: ", 2: "Draft: Final answer."}
    snapshot = await harness.sessions.get_agent_snapshot(session)
    assert snapshot.messages[-1].text == "Final answer."


async def test_list_agent_messages_pages_oldest_first(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("pages")
    harness.script(session, *([ScriptedResponse(text=f"Answer {n}.")] for n in range(1, 4)))
    await harness.sessions.start_session(session, "Question 1")
    for turn in (2, 3):
        await wait_for_turn_end(harness.sessions, session, turn - 1)
        assert await harness.sessions.send_user_message(session, f"Question {turn}")
    await wait_for_turn_end(harness.sessions, session, 3)

    newest = await harness.sessions.list_agent_messages(session, limit=4)
    assert [message.sequence for message in newest.messages] == [3, 4, 5, 6]
    assert [message.text for message in newest.messages] == [
        "Question 2",
        "Answer 2.",
        "Question 3",
        "Answer 3.",
    ]
    assert newest.next_before_sequence == 3
    oldest = await harness.sessions.list_agent_messages(session, before_sequence=3, limit=4)
    assert [message.sequence for message in oldest.messages] == [1, 2]
    assert oldest.next_before_sequence is None
    clamped_low = await harness.sessions.list_agent_messages(session, limit=0)
    assert [message.sequence for message in clamped_low.messages] == [6]
    clamped_high = await harness.sessions.list_agent_messages(session, limit=10_000)
    assert [message.sequence for message in clamped_high.messages] == [1, 2, 3, 4, 5, 6]


async def test_turn_shape_is_the_same_on_every_turn(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("shape")
    read = harness.call(harness.tools.read, "read-1")
    harness.script(
        session,
        [ScriptedResponse(text="Hi.")],
        [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Shipped.")],
    )
    await harness.sessions.start_session(session, "Hello")
    await wait_for_turn_end(harness.sessions, session, 1)
    assert await harness.sessions.send_user_message(session, "Where is A-1?")
    await wait_for_turn_end(harness.sessions, session, 2)
    steps = executed_step_types(await harness.stack.read_step_history(session))
    assert steps == [
        "StartAgentSession",
        "RunModel",
        "AwaitUserMessage",
        "RunModel",
        "CallTool",
        "RunModel",
    ]
