"""A tool that asks the user before it takes effect: answered, declined, expired, steered, and colliding."""

import pytest

from dex_agents import (
    QUESTION_DEADLINE_PASSED,
    STEERED_REJECTION_MESSAGE,
    AgentEventType,
    InterruptKind,
    ToolCallStatus,
)
from dex_agents.testing import ScriptedQuestion, ScriptedResponse, wait_for_turn_end
from tests.builtin_support import (
    CANCEL,
    REFUND,
    BuiltIns,
    a_normal_turn_works,
    call,
    payloads,
    pending_interrupt,
    tool_call_record,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

WAREHOUSE = ScriptedQuestion("Which warehouse takes the return?", ("Berlin", "Lyon"), allows_free_text=False)
REASON = ScriptedQuestion("Why is it returned?")


async def test_a_tool_asks_before_it_takes_effect_and_runs_once_with_the_answers(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("tool-asks")
    cancel = call(CANCEL, "cancel-1", asks=(WAREHOUSE, REASON))
    built_ins.script(session, [ScriptedResponse(tool_calls=(cancel,)), ScriptedResponse(text="Cancelled.")])
    await sessions.start_session(session, "Cancel A-1")
    first = await pending_interrupt(sessions, session, "cancel-1-input-1")
    assert (first.kind, first.question, first.choices, first.allows_free_text) == (
        InterruptKind.QUESTION,
        WAREHOUSE.question,
        ("Berlin", "Lyon"),
        False,
    )
    await built_ins.replace_worker()
    assert not await sessions.answer_question(session, "cancel-1-input-1", "Paris"), "only the choices"
    assert await sessions.answer_question(session, "cancel-1-input-1", "Lyon")
    second = await pending_interrupt(sessions, session, "cancel-1-input-2")
    assert second.question == REASON.question and second.allows_free_text
    assert await sessions.answer_question(session, "cancel-1-input-2", "It arrived broken")
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    # The tool stopped twice to ask, and took effect once, with both answers.
    assert len(built_ins.task_events(session, "tool_question", "cancel-1")) == 2
    [run] = built_ins.runs(session, CANCEL)
    assert run.attempt == 1
    result = built_ins.model_calls(session)[-1].model_input_text
    assert 'with answers ["Lyon", "It arrived broken"]' in result, result
    steps = await built_ins.steps(session)
    assert steps.count("CallSingleAttemptTool") == 3 and steps.count("AwaitQuestionAnswer") == 4, steps
    await a_normal_turn_works(built_ins, sessions, session, 2)


async def test_a_declined_or_expired_tool_question_ends_the_call_before_it_takes_effect(
    built_ins: BuiltIns,
) -> None:
    sessions, deadline_sessions = built_ins.sessions, built_ins.deadline_sessions
    declined, expired = (
        built_ins.stack.new_session_id("tool-declined"),
        built_ins.stack.new_session_id("tool-expired"),
    )
    for session in (declined, expired):
        built_ins.script(
            session,
            [
                ScriptedResponse(tool_calls=(call(CANCEL, "cancel-1", asks=(REASON,)),)),
                ScriptedResponse(text="Ok."),
            ],
        )
    await deadline_sessions.start_session(expired, "Cancel A-1")
    await sessions.start_session(declined, "Cancel A-1")
    await pending_interrupt(sessions, declined, "cancel-1-input-1")
    assert await sessions.resolve_interrupt(
        declined, "cancel-1-input-1", approved=False, rejection_message="No."
    )
    await wait_for_turn_end(sessions, declined, 1)
    await wait_for_turn_end(deadline_sessions, expired, 1)

    assert not built_ins.runs(declined, CANCEL) and not built_ins.runs(expired, CANCEL)
    assert "No." in built_ins.model_calls(declined)[-1].model_input_text
    assert QUESTION_DEADLINE_PASSED in built_ins.model_calls(expired)[-1].model_input_text
    for sessions_of, session in ((sessions, declined), (deadline_sessions, expired)):
        finished = payloads(await built_ins.events(sessions_of, session), AgentEventType.TOOL_CALL_FINISHED)
        assert finished == [{"tool_call_id": "cancel-1", "tool_name": CANCEL, "status": "rejected"}], finished
    await a_normal_turn_works(built_ins, sessions, declined, 2)


async def test_steering_abandons_a_tool_question_and_a_colliding_question_fails(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("tool-steered")
    # "cancel-1"'s first question would be "cancel-1-input-1", the ID of the refund's approval.
    colliding = call(CANCEL, "cancel-1", asks=(REASON,))
    refund = call(REFUND, "cancel-1-input-1")
    asking = call(CANCEL, "cancel-2", asks=(REASON,))
    built_ins.script(
        session,
        [ScriptedResponse(tool_calls=(colliding, refund, asking))],
        [ScriptedResponse(text="Let us start over.")],
    )
    await sessions.start_session(session, "Cancel and refund A-1")
    await pending_interrupt(sessions, session, "cancel-2-input-1")
    failed = await tool_call_record(sessions, session, "cancel-1", ToolCallStatus.FAILED)
    snapshot = await sessions.get_agent_snapshot(session)
    assert failed.error == (
        "the tool's question cannot use interrupt ID cancel-1-input-1, which another tool call of this turn "
        "uses"
    )
    [approval] = [item for item in snapshot.pending_interrupts if item.interrupt_id == "cancel-1-input-1"]
    assert approval.kind is InterruptKind.TOOL_APPROVAL and approval.tool_call_id == "cancel-1-input-1"
    assert await sessions.steer_user_message(session, "Forget it, start over")
    done = await wait_for_turn_end(sessions, session, 2)

    assert not built_ins.runs(session, CANCEL) and not built_ins.runs(session, REFUND)
    next_input = built_ins.model_calls(session, "turn-2")[0].model_input_text
    assert next_input.count(STEERED_REJECTION_MESSAGE) == 2, next_input
    resolved = payloads(await built_ins.events(sessions, session), AgentEventType.INTERRUPT_RESOLVED)
    assert {(item["interrupt_id"], item["kind"], item["cancellation_reason"]) for item in resolved} == {
        ("cancel-1-input-1", "tool_approval", "steered"),
        ("cancel-2-input-1", "question", "steered"),
    }
    assert done.pending_interrupts == ()
