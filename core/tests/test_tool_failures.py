"""Tool failures: ToolExecutionError, a read failing by crash and exception, an idempotent write killed."""

import pytest

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    ScriptedResponse,
    wait_for_turn_end,
)
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_tool_execution_error_is_recorded_failed_without_retry(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("tool-error")
    read = harness.call(harness.tools.read, "read-1", error="order A-9 does not exist")
    harness.script(session, [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="No such order.")])
    await harness.sessions.start_session(session, "Where is A-9?")
    await wait_for_turn_end(harness.sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.read)) == 1
    assert (
        "The tool call failed: order A-9 does not exist" in harness.model_calls(session)[-1].model_input_text
    )
    history = await harness.stack.read_step_history(session)
    tool_steps = [entry for entry in history if entry.step_type == "CallTool"]
    assert [(entry.event_type, entry.final_attempt) for entry in tool_steps] == [(EXECUTE_COMPLETED_EVENT, 1)]


async def test_read_failing_three_times_once_by_a_worker_kill_is_recorded_failed(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("read-fails")
    read = harness.call(harness.tools.read, "read-1", gate="first", fail_attempts=(2, 3))
    harness.script(session, [ScriptedResponse(tool_calls=(read,)), ScriptedResponse(text="Lookup is down.")])
    await harness.sessions.start_session(session, "Where is A-1?")
    await harness.stack.gate(session, "first").wait_until_reached()
    await harness.replace_worker()  # attempt 1 dies inside the tool
    await wait_for_turn_end(harness.sessions, session, 1)
    runs = harness.tool_runs(session, harness.tools.read)
    assert [run.attempt for run in runs] == [1, 2, 3]
    assert len({run.pid for run in runs}) == 2  # the killed Worker and its replacement
    final_input = harness.model_calls(session)[-1].model_input_text
    assert "The tool call failed:" in final_input and OUTCOME_UNKNOWN_TOOL_RESULT not in final_input
    history = await harness.stack.read_step_history(session)
    failed = [
        entry
        for entry in history
        if entry.step_type == "CallTool" and entry.event_type == EXECUTE_FAILED_EVENT
    ]
    assert [entry.final_attempt for entry in failed] == [3]
    assert "RecordToolFailure" in [
        entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT
    ]


async def test_idempotent_write_killed_mid_call_keeps_its_key_and_ends_outcome_unknown(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("receipt")
    write = harness.call(harness.tools.idempotent_write, "receipt-1", gate="first", fail_attempts=(2, 3))
    harness.script(session, [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Maybe sent.")])
    await harness.sessions.start_session(session, "Send the receipt")
    await harness.stack.gate(session, "first").wait_until_reached()
    await harness.replace_worker()
    await wait_for_turn_end(harness.sessions, session, 1)
    runs = harness.tool_runs(session, harness.tools.idempotent_write)
    assert [run.attempt for run in runs] == [1, 2, 3]
    assert {run.idempotency_key for run in runs} == {f"{session}/turn-1/receipt-1"}
    assert OUTCOME_UNKNOWN_TOOL_RESULT in harness.model_calls(session)[-1].model_input_text
    snapshot = await harness.sessions.get_agent_snapshot(session)
    tool_messages = [message for message in snapshot.messages if message.tool_call_id == "receipt-1"]
    assert tool_messages, snapshot.messages
