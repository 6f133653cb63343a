"""`AgentSessionClient`'s waits, event following, and a client process without the runner."""

from datetime import timedelta

import pytest

from dex_agents import (
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    ClientOnlyFlowError,
    MessageRole,
    SessionWaitTimeoutError,
    TurnOutcome,
)
from dex_agents.testing import ScriptedResponse
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_an_application_waits_for_the_approval_then_for_the_turn(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("waits-approval")
    read = harness.call(harness.tools.read, "read-1")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(session, [ScriptedResponse(tool_calls=(read, write)), ScriptedResponse(text="Refunded.")])
    sessions = harness.sessions

    await sessions.start_session(session, "Refund A-1")
    interrupt = await sessions.wait_for_interrupt(session)
    assert interrupt is not None and interrupt.tool_call_id == "refund-1"
    assert await sessions.resolve_interrupt(session, interrupt.interrupt_id, approved=True)
    # No other approval comes: the wait ends once the session is idle.
    assert await sessions.wait_for_interrupt(session) is None
    ended = await sessions.wait_for_turn_end(session)

    assert (ended.turn_id, ended.outcome, ended.error) == ("turn-1", TurnOutcome.COMPLETED, None)
    assert ended.snapshot.messages[-1].role == MessageRole.ASSISTANT
    assert ended.snapshot.messages[-1].text == "Refunded."
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
    # The turn has ended: a later wait for the current turn answers at once with the same turn.
    again = await sessions.wait_for_turn_end(session, timeout=timedelta(seconds=5))
    assert (again.turn_id, again.outcome) == ("turn-1", TurnOutcome.COMPLETED)


async def test_a_failed_turn_says_why_and_the_session_goes_on(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("waits-failed")
    harness.script(
        session,
        [ScriptedResponse(text="No.", turn_error="the guardrail tripped")],
        [ScriptedResponse(text="Hello again.")],
    )
    sessions = harness.sessions
    await sessions.start_session(session, "Do something forbidden")
    assert await sessions.wait_for_interrupt(session) is None

    failed = await sessions.wait_for_turn_end(session, turn_id="turn-1")
    assert failed.outcome is TurnOutcome.FAILED
    assert failed.error is not None and "the guardrail tripped" in failed.error

    assert await sessions.send_user_message(session, "Hello?")
    completed = await sessions.wait_for_turn_end(session)
    assert (completed.turn_id, completed.outcome) == ("turn-2", TurnOutcome.COMPLETED)
    assert completed.snapshot.messages[-1].text == "Hello again."


async def test_cancelled_and_steered_turns_end_with_their_outcome(harness: MatrixHarness) -> None:
    sessions = harness.sessions
    cancelled = harness.stack.new_session_id("waits-cancelled")
    harness.script(
        cancelled, [ScriptedResponse(tool_calls=(harness.call(harness.tools.approval_write, "refund-1"),))]
    )
    await sessions.start_session(cancelled, "Refund A-1")
    assert await sessions.wait_for_interrupt(cancelled) is not None
    assert await sessions.cancel_turn(cancelled)
    ended = await sessions.wait_for_turn_end(cancelled)
    assert (ended.turn_id, ended.outcome, ended.error) == ("turn-1", TurnOutcome.CANCELLED, None)

    steered = harness.stack.new_session_id("waits-steered")
    harness.script(
        steered,
        [ScriptedResponse(tool_calls=(harness.call(harness.tools.approval_write, "refund-2"),))],
        [ScriptedResponse(text="Only B-2, then.")],
    )
    await sessions.start_session(steered, "Refund A-1")
    assert await sessions.wait_for_interrupt(steered) is not None
    assert await sessions.steer_user_message(steered, "Refund B-2 instead")
    first = await sessions.wait_for_turn_end(steered, turn_id="turn-1")
    assert first.outcome is TurnOutcome.STEERED
    # The steered message runs as the next turn, which the wait for the current turn follows.
    second = await sessions.wait_for_turn_end(steered)
    assert (second.turn_id, second.outcome) == ("turn-2", TurnOutcome.COMPLETED)
    assert second.snapshot.messages[-1].text == "Only B-2, then."


async def test_a_wait_that_runs_out_names_what_the_session_was_doing(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("waits-timeout")
    harness.script(session, [ScriptedResponse(text="Finally.", gate="hold")])
    sessions = harness.sessions
    await sessions.start_session(session, "Take your time")
    gate = harness.stack.gate(session, "hold")
    await gate.wait_until_reached()

    with pytest.raises(SessionWaitTimeoutError) as raised:
        await sessions.wait_for_turn_end(session, timeout=timedelta(seconds=1))
    message = str(raised.value)
    assert f"session {session!r}" in message and "running_model" in message and "turn-1" in message
    assert raised.value.last_snapshot is not None and raised.value.session_id == session
    assert isinstance(raised.value, TimeoutError)

    gate.release()
    ended = await sessions.wait_for_turn_end(session)
    assert ended.outcome is TurnOutcome.COMPLETED


async def test_bad_turn_ids_and_a_session_without_turns_are_refused(harness: MatrixHarness) -> None:
    sessions = harness.sessions
    session = harness.stack.new_session_id("waits-idle")
    await sessions.start_session(session)
    for bad in ("turn-0", "turn-x", "1"):
        with pytest.raises(ValueError, match="turn-<n>"):
            await sessions.wait_for_turn_end(session, turn_id=bad)
    with pytest.raises(ValueError, match="has run no turn"):
        await sessions.wait_for_turn_end(session)
    assert await sessions.wait_for_interrupt(session) is None
    # The session is still usable.
    harness.script(session, [ScriptedResponse(text="Hi.")])
    assert await sessions.send_user_message(session, "Hello")
    assert (await sessions.wait_for_turn_end(session)).outcome is TurnOutcome.COMPLETED


async def test_following_events_resumes_exactly_after_a_token(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("waits-follow")
    harness.script(
        session,
        [
            ScriptedResponse(tool_calls=(harness.call(harness.tools.read, "read-1"),)),
            ScriptedResponse(text="Shipped."),
        ],
    )
    sessions = harness.sessions
    await sessions.start_session(session, "Where is A-1?")
    await sessions.wait_for_turn_end(session)

    seen: list[tuple[str, str]] = []
    async for item in sessions.follow_agent_events(session):
        seen.append((item.resume_token, item.value.type))
        if item.value.type == AgentEventType.TURN_COMPLETED:
            break
    assert seen[0][1] == AgentEventType.TURN_STARTED and len(seen) > 4
    # Resuming from the third event's token yields the fourth event first, in another iterator.
    resumed: list[str] = []
    async for item in sessions.follow_agent_events(session, seen[2][0]):
        resumed.append(item.value.type)
        if item.value.type == AgentEventType.TURN_COMPLETED:
            break
    assert resumed == [event_type for _, event_type in seen[3:]]


async def test_a_client_process_needs_only_the_flow_type(harness: MatrixHarness) -> None:
    main = harness.flows.main
    client_flow = AgentSessionFlow.for_client(flow_type=main.flow_type, options=main.options)
    assert client_flow.is_client_only and not main.is_client_only
    session = harness.stack.new_session_id("waits-client")
    harness.script(session, [ScriptedResponse(text="Hello from the Worker.")])

    async with AgentSessionClient.connect(harness.stack.server_address, client_flow) as sessions:
        await sessions.start_session(session, "Hello")
        ended = await sessions.wait_for_turn_end(session)
        assert ended.snapshot.messages[-1].text == "Hello from the Worker."
        first = None
        async for item in sessions.follow_agent_events(session):
            first = item.value.type
            break
        assert first == AgentEventType.TURN_STARTED
    # Leaving the block closed the connection it opened; a second close is harmless.
    await sessions.close()

    with pytest.raises(ClientOnlyFlowError, match="for_client"):
        client_flow.runner.build_user_message("hi")
