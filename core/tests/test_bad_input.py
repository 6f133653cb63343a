"""Bad input is refused clearly and loses nothing: each test ends with a normal turn in the same session."""

import pytest
from dex import FlowAlreadyStartedError, FlowNotFoundError, StartFlowOptions

from dex_agents import MAX_USER_MESSAGE_BYTES, AgentSessionStartInput, AgentUserMessage
from dex_agents.limits import MAX_STORED_VALUE_BYTES
from dex_agents.testing import ScriptedResponse, wait_for_agent_snapshot, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _finish_with_a_normal_turn(harness: MatrixHarness, session: str, turn_count: int) -> None:
    assert await harness.sessions.send_user_message(session, "Still there?")
    snapshot = await wait_for_turn_end(harness.sessions, session, turn_count)
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert [message.text for message in snapshot.messages[-2:]] == ["Still there?", "Yes, still here."]


def _normal_turn() -> list[ScriptedResponse]:
    return [ScriptedResponse(text="Yes, still here.")]


async def test_blank_messages_are_refused(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("blank")
    harness.script(session, _normal_turn())
    await harness.sessions.start_session(session, "   ")  # a blank initial message starts no turn
    await wait_for_turn_end(harness.sessions, session, 0)
    for text in ("", "   ", "\n\t "):
        assert not await harness.sessions.send_user_message(session, text)
    snapshot = await harness.sessions.get_agent_snapshot(session)
    assert snapshot.messages == () and snapshot.queued_message_count == 0
    assert snapshot.state is not None and snapshot.state.turn_count == 0
    await _finish_with_a_normal_turn(harness, session, 1)


async def test_oversized_user_message_is_refused_by_client_and_rpc(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("oversized")
    harness.script(session, [ScriptedResponse(text="Hello.")], _normal_turn())
    await harness.sessions.start_session(session, "Hi")
    before = await wait_for_turn_end(harness.sessions, session, 1)
    oversized = "x" * (MAX_USER_MESSAGE_BYTES + 1)
    with pytest.raises(ValueError, match="MAX_USER_MESSAGE_BYTES"):
        await harness.sessions.send_user_message(session, oversized)
    # A client that skips the check meets the same limit in the RPC.
    assert not await harness.stack.client.invoke_rpc(
        harness.flows.main.send_user_message, session, AgentUserMessage(text=oversized)
    )
    after = await harness.sessions.get_agent_snapshot(session)
    assert after.messages == before.messages and after.queued_message_count == 0
    assert after.state == before.state
    await _finish_with_a_normal_turn(harness, session, 2)


async def test_unknown_and_resolved_interrupts_return_false(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("interrupts")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session, [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Refunded.")], _normal_turn()
    )
    await harness.sessions.start_session(session, "Refund A-1")
    assert not await harness.sessions.resolve_interrupt(session, "no-such-interrupt", approved=True)
    await _wait_for_pending_approval(harness, session)
    assert not await harness.sessions.resolve_interrupt(session, "no-such-interrupt", approved=True)
    assert await harness.sessions.resolve_interrupt(session, "refund-1", approved=True)
    assert not await harness.sessions.resolve_interrupt(session, "refund-1", approved=False)
    await wait_for_turn_end(harness.sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
    await _finish_with_a_normal_turn(harness, session, 2)


async def _wait_for_pending_approval(harness: MatrixHarness, session: str) -> None:
    await wait_for_agent_snapshot(
        harness.sessions,
        session,
        lambda snapshot: bool(snapshot.pending_interrupts),
        description="an approval",
    )


async def test_oversized_run_state_fails_the_turn_clearly(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("big-run-state")
    read = harness.call(harness.tools.read, "read-1")
    harness.script(
        session,
        [ScriptedResponse(tool_calls=(read,), run_state_padding=MAX_STORED_VALUE_BYTES + 1024)],
        _normal_turn(),
    )
    await harness.sessions.start_session(session, "Look up A-1")
    failed = await wait_for_turn_end(harness.sessions, session, 1)
    assert failed.state is not None and failed.state.last_turn_error is not None
    error = failed.state.last_turn_error
    assert "run state" in error and str(MAX_STORED_VALUE_BYTES) in error, error
    assert not harness.tool_runs(session, harness.tools.read)
    await _finish_with_a_normal_turn(harness, session, 2)


async def test_oversized_tool_output_fails_the_call_clearly(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("big-output")
    read = harness.call(harness.tools.read, "read-1", output_size=MAX_STORED_VALUE_BYTES + 1024)
    harness.script(
        session, [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Too big.")], _normal_turn()
    )
    await harness.sessions.start_session(session, "Look up A-1")
    done = await wait_for_turn_end(harness.sessions, session, 1)
    assert done.state is not None and done.state.last_turn_error is None
    seen = harness.model_calls(session)[-1].model_input_text
    assert "The tool call failed:" in seen and str(MAX_STORED_VALUE_BYTES) in seen, seen[:500]
    assert len(harness.tool_runs(session, harness.tools.read)) == 1  # a size failure is not retried
    await _finish_with_a_normal_turn(harness, session, 2)


async def test_starting_a_session_twice_or_with_an_oversized_message_is_refused(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("restart")
    harness.script(session, [ScriptedResponse(text="Hello.")], _normal_turn())
    await harness.sessions.start_session(session, "Hi")
    before = await wait_for_turn_end(harness.sessions, session, 1)
    with pytest.raises(FlowAlreadyStartedError):
        await harness.sessions.start_session(session, "Hi again")
    unstarted = harness.stack.new_session_id("never-started")
    with pytest.raises(ValueError, match="MAX_USER_MESSAGE_BYTES"):
        await harness.sessions.start_session(unstarted, "x" * (MAX_USER_MESSAGE_BYTES + 1))
    with pytest.raises(FlowNotFoundError):
        await harness.stack.client.describe_flow(unstarted)
    after = await harness.sessions.get_agent_snapshot(session)
    assert after.messages == before.messages and after.state == before.state
    await _finish_with_a_normal_turn(harness, session, 2)


async def test_empty_session_settings_mean_none(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("no-settings")
    harness.script(session, [ScriptedResponse(text="Hello.")])
    start = AgentSessionStartInput(initial_message="Hi", session_settings={})
    await harness.stack.client.start_flow(harness.flows.main, session, start, StartFlowOptions())
    snapshot = await wait_for_turn_end(harness.sessions, session, 1)
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert [message.text for message in snapshot.messages] == ["Hi", "Hello."]
