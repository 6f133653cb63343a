"""Tool tasks: remote work a tool started, polled across Worker kills, asking questions, and cancelled."""

import pytest

from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentEventType,
    CancellationReason,
    InterruptKind,
    ToolCallStatus,
)
from dex_agents.testing import (
    TASK_HANDLE_SAVED_EVENT,
    ScriptedQuestion,
    ScriptedResponse,
    ScriptedTask,
    wait_for_turn_end,
    wait_until,
)
from tests.builtin_support import (
    READ,
    RECEIPT,
    BuiltIns,
    a_normal_turn_works,
    call,
    payloads,
    pending_interrupt,
    tool_call_record,
    wait_for_event,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONFIRM = ScriptedQuestion("Send the receipt to the new address?", ("yes", "no"), allows_free_text=False)


async def test_a_task_is_polled_across_worker_kills_and_started_only_once(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("task")
    task = ScriptedTask(polls=2, output="receipt R-1 sent", gate="started", poll_gate="polling")
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(call(RECEIPT, "receipt-1", task=task),)),
            ScriptedResponse(text="Sent."),
        ],
    )
    await sessions.start_session(session, "Send the receipt of A-1")
    # Killed after the task started and its handle reached the server, before the tool Step committed.
    await built_ins.stack.gate(session, "started").wait_until_reached()
    await wait_for_event(sessions, session, TASK_HANDLE_SAVED_EVENT)
    await built_ins.replace_worker()
    record = await tool_call_record(sessions, session, "receipt-1", ToolCallStatus.WAITING_FOR_TASK)
    assert record.task_id == "task-receipt-1-1" and record.task_poll_interval_seconds == 1, record
    # Killed again in the middle of the first poll.
    await built_ins.stack.gate(session, "polling").wait_until_reached()
    await built_ins.replace_worker()
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert len(built_ins.task_events(session, "task_start")) == 1, "the retried attempt reused the task"
    assert [run.attempt for run in built_ins.runs(session, RECEIPT)] == [1, 2]
    assert len(built_ins.task_events(session, "task_poll")) >= 2
    assert "receipt R-1 sent" in built_ins.model_calls(session)[-1].model_input_text
    events = await built_ins.events(sessions, session)
    assert payloads(events, AgentEventType.TOOL_TASK_STARTED) == [
        {"tool_call_id": "receipt-1", "tool_name": RECEIPT, "task_id": "task-receipt-1-1"}
    ]
    steps = await built_ins.steps(session)
    assert steps.count("CallTool") == 1 and "PollToolTask" in steps, steps


async def test_a_running_task_asks_questions_and_steering_leaves_it_running(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("task-question")
    answered = call(
        READ, "read-1", task=ScriptedTask(question=ScriptedQuestion("Which carrier?"), output="found")
    )
    declined = call(RECEIPT, "receipt-1", task=ScriptedTask(question=CONFIRM, output="receipt kept"))
    built_ins.script(
        session,
        [ScriptedResponse(tool_calls=(answered, declined))],
        [ScriptedResponse(text="Noted.")],
    )
    await sessions.start_session(session, "Track A-1 and send its receipt")
    carrier = await pending_interrupt(sessions, session, "read-1-input-1")
    assert (carrier.kind, carrier.question, carrier.tool_call_id) == (
        InterruptKind.QUESTION,
        "Which carrier?",
        "read-1",
    )
    await pending_interrupt(sessions, session, "receipt-1-input-1")
    # A started task is never abandoned: its questions keep waiting through a steer.
    assert await sessions.steer_user_message(session, "Never mind")
    waiting = await sessions.get_agent_snapshot(session)
    assert {item.interrupt_id for item in waiting.pending_interrupts} == {
        "read-1-input-1",
        "receipt-1-input-1",
    }
    assert await sessions.answer_question(session, "read-1-input-1", "DHL")
    assert await sessions.resolve_interrupt(
        session, "receipt-1-input-1", approved=False, rejection_message="No."
    )
    done = await wait_for_turn_end(sessions, session, 2)

    events = await built_ins.events(sessions, session)
    finished = {
        item["tool_call_id"]: item["status"] for item in payloads(events, AgentEventType.TOOL_CALL_FINISHED)
    }
    assert finished == {"read-1": "succeeded", "receipt-1": "succeeded"}, finished
    next_input = built_ins.model_calls(session, "turn-2")[0].model_input_text
    assert "found (answered: DHL)" in next_input and "receipt kept (declined: No.)" in next_input, next_input
    assert "Never mind" in next_input
    assert [item["steered_message_count"] for item in payloads(events, AgentEventType.TURN_STEERED)] == [1]
    assert done.state is not None and done.state.last_turn_error is None, done.state


async def test_cancel_turn_cancels_a_running_task_and_records_its_outcome_unknown(
    built_ins: BuiltIns,
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("task-cancel")
    polling = call(READ, "read-1", task=ScriptedTask(polls=100_000))
    asking = call(RECEIPT, "receipt-1", task=ScriptedTask(question=CONFIRM))
    built_ins.script(session, [ScriptedResponse(tool_calls=(polling, asking))])
    await sessions.start_session(session, "Track A-1 and send its receipt")
    await pending_interrupt(sessions, session, "receipt-1-input-1")
    await wait_until(
        "the first task to be polled", lambda: built_ins.task_events(session, "task_poll", "read-1")
    )
    assert await sessions.cancel_turn(session)
    cancelled = await wait_for_turn_end(sessions, session, 1)

    assert cancelled.state is not None and cancelled.state.last_turn_error is None, cancelled.state
    cancels = built_ins.task_events(session, "task_cancel")
    assert sorted(item.tool_call_id for item in cancels) == ["read-1", "receipt-1"], cancels
    assert cancelled.pending_interrupts == ()
    events = await built_ins.events(sessions, session)
    finished = {
        item["tool_call_id"]: item["status"] for item in payloads(events, AgentEventType.TOOL_CALL_FINISHED)
    }
    assert finished == {"read-1": "outcome_unknown", "receipt-1": "outcome_unknown"}, finished
    [resolved] = payloads(events, AgentEventType.INTERRUPT_RESOLVED)
    assert (resolved["interrupt_id"], resolved["cancellation_reason"]) == (
        "receipt-1-input-1",
        CancellationReason.TURN_CANCELLED.value,
    )
    assert len(payloads(events, AgentEventType.TURN_CANCELLED)) == 1
    steps = await built_ins.steps(session)
    assert steps.count("CancelToolTask") == 2 and "FinishTurnCancellation" in steps, steps

    done = await a_normal_turn_works(built_ins, sessions, session, 2)
    next_input = built_ins.model_calls(session, "turn-2")[0].model_input_text
    assert next_input.count(OUTCOME_UNKNOWN_TOOL_RESULT) == 2, next_input
    assert done.pending_interrupts == ()
