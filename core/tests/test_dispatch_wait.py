"""A tool Step that no Worker takes within the dispatch wait never ran: it is recorded as safe to retry."""

import asyncio

import pytest

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT, TOOL_CALL_NOT_RUN_ERROR_PREFIX
from dex_agents.testing import EXECUTE_FAILED_EVENT, ScriptedResponse, wait_for_turn_end, wait_until
from dex_agents.testing.matrix import MatrixHarness

pytestmark = pytest.mark.asyncio(loop_scope="module")

SERVER_ARGS = ("--dispatch-wait", "1")


async def test_tool_step_without_a_worker_is_recorded_as_not_run(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("no-worker")
    write = harness.call(harness.tools.single_attempt_write, "cancel-1")
    harness.script(
        session,
        [ScriptedResponse(tool_calls=(write,), gate="model"), ScriptedResponse(text="Try again later.")],
    )
    await harness.sessions.start_session(session, "Cancel A-1")
    await harness.stack.gate(session, "model").wait_until_reached()
    # The only Worker drains: it finishes the model call but takes no new task, so the write that the model
    # call asks for finds no Worker for the whole dispatch wait.
    (worker,) = harness.stack.workers
    worker.begin_stop()
    harness.stack.gate(session, "model").release()
    await asyncio.to_thread(worker.wait, 30)

    async def dispatch_failed() -> bool:
        history = await harness.stack.read_step_history(session)
        return any(
            entry.step_type == "CallSingleAttemptTool" and entry.event_type == EXECUTE_FAILED_EVENT
            for entry in history
        )

    await wait_until("the write's dispatch to fail", dispatch_failed)
    await harness.stack.start_worker()
    await wait_for_turn_end(harness.sessions, session, 1)

    assert not harness.tool_runs(session, harness.tools.single_attempt_write)
    history = await harness.stack.read_step_history(session)
    failed = [entry for entry in history if entry.step_type == "CallSingleAttemptTool"]
    assert [(entry.event_type, entry.error_type) for entry in failed] == [
        (EXECUTE_FAILED_EVENT, "NO_WORKER_AVAILABLE")
    ]
    seen = harness.model_calls(session)[-1].model_input_text
    assert TOOL_CALL_NOT_RUN_ERROR_PREFIX in seen and OUTCOME_UNKNOWN_TOOL_RESULT not in seen, seen


async def test_a_turn_whose_model_step_found_no_worker_says_which_flow_type_lacks_one(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("no-model-worker")
    harness.script(
        session,
        [ScriptedResponse(text="Never said.", gate="model")],
        [ScriptedResponse(text="Back again.")],
    )
    await harness.sessions.start_session(session, "Hello")
    await harness.stack.gate(session, "model").wait_until_reached()
    # The only Worker dies inside the model call and nobody restarts it: RunModel's later attempts find
    # no Worker within the dispatch wait.
    harness.stack.kill_workers()

    async def run_model_failed() -> bool:
        history = await harness.stack.read_step_history(session)
        return any(
            entry.step_type == "RunModel" and entry.event_type == EXECUTE_FAILED_EVENT for entry in history
        )

    await wait_until("RunModel's attempts to run out", run_model_failed)
    await harness.stack.start_worker()
    failed = await wait_for_turn_end(harness.sessions, session, 1)

    history = await harness.stack.read_step_history(session)
    assert [
        (entry.error_type, entry.final_attempt)
        for entry in history
        if entry.step_type == "RunModel" and entry.event_type == EXECUTE_FAILED_EVENT
    ] == [("NO_WORKER_AVAILABLE", 3)]
    assert failed.state is not None and failed.state.last_turn_error is not None
    error = failed.state.last_turn_error
    flow_type = harness.flows.main.flow_type
    assert error.startswith(f"no Worker served Flow type {flow_type!r}"), error
    assert "start a Worker that registers it" in error, error
    # The session stays usable once a Worker serves it again.
    assert await harness.sessions.send_user_message(session, "Are you there?")
    done = await wait_for_turn_end(harness.sessions, session, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "Back again."
