"""The server restarts (SIGKILL, same SQLite file) while an approval or a durable wait waits: nothing is lost
or repeated."""

import pytest

from dex_agents import DURABLE_WAIT
from dex_agents.testing import (
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_approval_survives_a_server_restart(harness: MatrixHarness) -> None:
    if harness.stack.uses_external_server:
        pytest.skip("DEX_SERVER_ADDRESS names a server this test cannot restart")
    session = harness.stack.new_session_id("server-restart")
    read = harness.call(harness.tools.read, "read-1")
    write = harness.call(harness.tools.approval_write, "refund-1", output="refund R-1 issued")
    harness.script(session, [ScriptedResponse(tool_calls=(read, write)), ScriptedResponse(text="Refunded.")])
    await harness.sessions.start_session(session, "Refund A-1")
    await wait_for_agent_snapshot(
        harness.sessions,
        session,
        lambda snapshot: snapshot.pending_interrupts
        and any(call.tool_call_id == "read-1" and call.status == "succeeded" for call in snapshot.tool_calls),
        description="the read done and the approval pending",
    )
    await harness.stack.restart_server()
    # The Worker reconnects by itself; the approval is still pending on the restarted server.
    restored = await wait_for_agent_snapshot(
        harness.sessions, session, lambda snapshot: snapshot, description="the restarted server to answer"
    )
    assert [interrupt.interrupt_id for interrupt in restored.pending_interrupts] == ["refund-1"]
    assert await harness.sessions.resolve_interrupt(session, "refund-1", approved=True)
    await wait_for_turn_end(harness.sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.read)) == 1
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
    assert "refund R-1 issued" in harness.model_calls(session)[-1].model_input_text
    steps = executed_step_types(await harness.stack.read_step_history(session))
    assert steps.count("CallTool") == 1 and steps.count("CallSingleAttemptTool") == 1


async def test_a_durable_wait_survives_a_server_restart_and_ends_with_its_timer(
    harness: MatrixHarness,
) -> None:
    if harness.stack.uses_external_server:
        pytest.skip("DEX_SERVER_ADDRESS names a server this test cannot restart")
    sessions = harness.built_in_sessions
    assert sessions is not None
    session = harness.stack.new_session_id("wait-restart")
    wait = ScriptedToolCall(DURABLE_WAIT, {"seconds": 3, "reason": "the courier comes back"}, "wait-1")
    harness.script(session, [ScriptedResponse(tool_calls=(wait,)), ScriptedResponse(text="Checked again.")])
    await sessions.start_session(session, "Check A-1 again in a moment")
    await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: any(call.status == "waiting_for_timer" for call in snapshot.tool_calls),
        description="the durable wait to start",
    )
    await harness.stack.restart_server()
    # The restarted server still holds the Timer, and fires it without any help.
    done = await wait_for_turn_end(sessions, session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert '"status":"completed"' in harness.model_calls(session)[-1].model_input_text
    steps = executed_step_types(await harness.stack.read_step_history(session))
    assert steps == ["StartAgentSession", "RunModel", "AwaitTimer", "ResumeTurn", "RunModel"], steps
