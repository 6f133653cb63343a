"""The built-in tools ask_user, durable_wait and write_todos end to end, with a Worker killed as they wait."""

import json

import pytest

from dex_agents import (
    ASK_USER,
    DURABLE_WAIT,
    QUESTION_DEADLINE_PASSED,
    QUESTION_DECLINED_TOOL_RESULT,
    WRITE_TODOS,
    WRITE_TODOS_CALLED_TWICE_ERROR,
    AgentEventType,
    InterruptKind,
    PlanStatus,
    ToolCallStatus,
)
from dex_agents.testing import (
    ScriptedResponse,
    ScriptedToolCall,
    stored_calls_without_result,
    wait_for_turn_end,
)
from tests.builtin_agents import MAX_WAIT
from tests.builtin_support import (
    READ,
    BuiltIns,
    a_normal_turn_works,
    call,
    payloads,
    pending_interrupt,
    tool_call_record,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def ask(tool_call_id: str, question: str = "Which warehouse?", **arguments: object) -> ScriptedToolCall:
    return ScriptedToolCall(ASK_USER, {"question": question, **arguments}, tool_call_id)


def wait(tool_call_id: str, seconds: float, reason: str = "the courier comes back") -> ScriptedToolCall:
    return ScriptedToolCall(DURABLE_WAIT, {"seconds": seconds, "reason": reason}, tool_call_id)


def todos(tool_call_id: str, *tasks: tuple[str, str]) -> ScriptedToolCall:
    items = [{"content": content, "status": status} for content, status in tasks]
    return ScriptedToolCall(WRITE_TODOS, {"todos": items}, tool_call_id)


async def test_ask_user_waits_across_a_worker_kill_and_the_answer_reaches_the_model(
    built_ins: BuiltIns,
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("ask")
    built_ins.script(
        session, [ScriptedResponse(tool_calls=(ask("ask-1"),)), ScriptedResponse(text="Berlin.")]
    )
    await sessions.start_session(session, "Return A-1")
    interrupt = await pending_interrupt(sessions, session, "ask-1")
    assert (interrupt.kind, interrupt.question, interrupt.allows_free_text) == (
        InterruptKind.QUESTION,
        "Which warehouse?",
        True,
    )
    await built_ins.replace_worker()

    # Bad input is refused and changes nothing.
    assert not await sessions.answer_question(session, "ask-1", "   ")
    assert not await sessions.answer_question(session, "no-such-question", "Berlin")
    assert not await sessions.resolve_interrupt(session, "ask-1", approved=True), "questions take answers"
    assert await sessions.answer_question(session, "ask-1", "Berlin")
    assert not await sessions.answer_question(session, "ask-1", "Lyon"), "already answered"
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    first, second = built_ins.model_calls(session)
    assert ASK_USER in first.offered_tools and READ in first.offered_tools, first.offered_tools
    assert '{"status":"answered","answer":"Berlin"}' in second.model_input_text, second.model_input_text
    assert stored_calls_without_result(done.messages) == [], done.messages
    assert await built_ins.steps(session) == [
        "StartAgentSession",
        "RunModel",
        "AwaitQuestionAnswer",
        "ResumeTurn",
        "RunModel",
    ]
    await a_normal_turn_works(built_ins, sessions, session, 2)


async def test_a_declined_and_an_expired_question_end_the_call_as_rejected(built_ins: BuiltIns) -> None:
    sessions, deadline_sessions = built_ins.sessions, built_ins.deadline_sessions
    declined, expired = built_ins.stack.new_session_id("declined"), built_ins.stack.new_session_id("expired")
    built_ins.script(
        declined,
        [
            ScriptedResponse(tool_calls=(ask("ask-1"), ask("ask-2", "Which day?"))),
            ScriptedResponse(text="I will not guess."),
        ],
    )
    built_ins.script(
        expired,
        [ScriptedResponse(tool_calls=(ask("ask-3", "Which time?"),)), ScriptedResponse(text="Too late.")],
    )
    await deadline_sessions.start_session(expired, "Return A-2")
    await sessions.start_session(declined, "Return A-1")
    await pending_interrupt(sessions, declined, "ask-2")
    assert await sessions.resolve_interrupt(
        declined, "ask-1", approved=False, rejection_message="Not telling."
    )
    assert await sessions.resolve_interrupt(declined, "ask-2", approved=False)
    await wait_for_turn_end(sessions, declined, 1)
    # ask-3 waits for its deadline.
    done = await wait_for_turn_end(deadline_sessions, expired, 1)

    last = built_ins.model_calls(declined)[-1].model_input_text
    for expected in ("Not telling.", QUESTION_DECLINED_TOOL_RESULT):
        assert expected in last, (expected, last)
    assert QUESTION_DEADLINE_PASSED in built_ins.model_calls(expired)[-1].model_input_text
    events = await built_ins.events(sessions, declined)
    finished = {
        item["tool_call_id"]: item["status"] for item in payloads(events, AgentEventType.TOOL_CALL_FINISHED)
    }
    assert finished == {"ask-1": "rejected", "ask-2": "rejected"}, finished
    resolved = {item["interrupt_id"]: item for item in payloads(events, AgentEventType.INTERRUPT_RESOLVED)}
    assert [resolved[key]["answered"] for key in ("ask-1", "ask-2")] == [False, False], resolved
    [expiry] = payloads(await built_ins.events(deadline_sessions, expired), AgentEventType.INTERRUPT_RESOLVED)
    assert (expiry["interrupt_id"], expiry["rejection_message"]) == ("ask-3", QUESTION_DEADLINE_PASSED), (
        expiry
    )
    assert done.pending_interrupts == ()
    await a_normal_turn_works(built_ins, deadline_sessions, expired, 2)


async def test_durable_wait_survives_a_worker_kill_and_ends_with_its_timer(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("wait")
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(wait("wait-1", 3600),)),
            ScriptedResponse(tool_calls=(wait("wait-2", 1, "a short pause"),)),
            ScriptedResponse(text="Checked again."),
        ],
    )
    await sessions.start_session(session, "Check A-1 again in an hour")
    record = await tool_call_record(sessions, session, "wait-1", ToolCallStatus.WAITING_FOR_TIMER)
    assert record.wait_until is not None
    await built_ins.replace_worker()
    snapshot = await sessions.get_agent_snapshot(session)
    assert snapshot.state is not None and snapshot.state.turn_count == 0, "the wait goes on without a Worker"
    assert await built_ins.stack.skip_durable_wait(session, "wait-1")
    # The second wait is one second long and ends by its own Timer.
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    results = built_ins.model_calls(session)[-1].model_input_text
    second = json.loads(results.split(f"tool {DURABLE_WAIT} [wait-2]: ", 1)[1].splitlines()[0])
    assert second == {"status": "completed", "waited_seconds": 1, "reason": "a short pause"}, second
    first = json.loads(results.split(f"tool {DURABLE_WAIT} [wait-1]: ", 1)[1].splitlines()[0])
    assert first["status"] == "completed" and first["waited_seconds"] < 3600, first
    events = await built_ins.events(sessions, session)
    started = payloads(events, AgentEventType.TIMER_STARTED)
    assert [(item["tool_call_id"], item["reason"]) for item in started] == [
        ("wait-1", "the courier comes back"),
        ("wait-2", "a short pause"),
    ]
    assert (await built_ins.steps(session)).count("AwaitTimer") == 2


async def test_invalid_built_in_arguments_fail_the_call_and_the_model_reads_why(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("invalid")
    too_long = int(MAX_WAIT.total_seconds()) + 1
    calls = (
        ScriptedToolCall(ASK_USER, {"choices": ["a"]}, "ask-1"),
        ScriptedToolCall(ASK_USER, {"question": "Pick", "allows_free_text": False}, "ask-2"),
        wait("wait-1", too_long),
        ScriptedToolCall(WRITE_TODOS, {"todos": [{"content": "Refund", "status": "done"}]}, "todos-1"),
    )
    built_ins.script(session, [ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Sorry.")])
    await sessions.start_session(session, "Do several things")
    done = await wait_for_turn_end(sessions, session, 1)

    last = built_ins.model_calls(session)[-1].model_input_text
    for expected in (
        "The tool call failed: invalid ask_user arguments: question is required",
        "invalid ask_user arguments: a question that allows no free text needs at least one choice",
        f"invalid durable_wait arguments: seconds must be at most {too_long - 1}",
        "invalid todos: task 1's status must be one of pending, in_progress, completed",
    ):
        assert expected in last, (expected, last)
    assert done.plan is None
    # Nothing waited: every call was final in RunModel's commit.
    assert await built_ins.steps(session) == ["StartAgentSession", "RunModel", "ResumeTurn", "RunModel"]
    await a_normal_turn_works(built_ins, sessions, session, 2)


async def test_write_todos_settles_in_the_model_step_and_survives_a_worker_kill(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("todos")
    plan = todos("todos-1", ("Look up A-1", "completed"), ("Refund A-1", "in_progress"))
    twice = (todos("todos-2", ("x", "pending")), todos("todos-3", ("y", "pending")))
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(plan, call(READ, "read-1"))),
            ScriptedResponse(tool_calls=twice, gate="second-call"),
            ScriptedResponse(text="Working on it."),
        ],
    )
    await sessions.start_session(session, "Refund A-1")
    await built_ins.stack.gate(session, "second-call").wait_until_reached()
    await built_ins.replace_worker()
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.plan is not None
    assert (done.plan.revision, done.plan.status) == (1, PlanStatus.ACTIVE), done.plan
    assert [(task.content, task.status.value) for task in done.plan.tasks] == [
        ("Look up A-1", "completed"),
        ("Refund A-1", "in_progress"),
    ]
    calls = built_ins.model_calls(session)
    assert '{"status":"updated","revision":1,"task_count":2}' in calls[1].model_input_text
    assert calls[-1].model_input_text.count(WRITE_TODOS_CALLED_TWICE_ERROR) == 2, calls[-1].model_input_text
    events = await built_ins.events(sessions, session)
    assert payloads(events, AgentEventType.PLAN_UPDATED) == [
        {"revision": 1, "status": "active", "task_count": 2}
    ]
    assert len(built_ins.runs(session, READ)) == 1


async def test_steering_and_cancel_turn_abandon_a_question_and_a_durable_wait(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    steered, cancelled = (
        built_ins.stack.new_session_id("steered"),
        built_ins.stack.new_session_id("cancelled"),
    )
    waits = ScriptedResponse(tool_calls=(ask("ask-1"), wait("wait-1", 3600)))
    built_ins.script(steered, [waits], [ScriptedResponse(text="Starting over.")])
    built_ins.script(cancelled, [waits])
    for session in (steered, cancelled):
        await sessions.start_session(session, "Return A-1 in an hour")
        await pending_interrupt(sessions, session, "ask-1")
        await tool_call_record(sessions, session, "wait-1", ToolCallStatus.WAITING_FOR_TIMER)
    assert await sessions.steer_user_message(steered, "Forget the return")
    assert await sessions.cancel_turn(cancelled)
    await wait_for_turn_end(sessions, steered, 2)
    done = await wait_for_turn_end(sessions, cancelled, 1)
    assert not await sessions.answer_question(cancelled, "ask-1", "Berlin"), "the question is gone"

    for session, reason in ((steered, "steered"), (cancelled, "turn_cancelled")):
        events = await built_ins.events(sessions, session)
        finished = {
            item["tool_call_id"]: item["status"]
            for item in payloads(events, AgentEventType.TOOL_CALL_FINISHED)
        }
        assert finished == {"ask-1": "rejected", "wait-1": "rejected"}, (session, finished)
        [resolved] = payloads(events, AgentEventType.INTERRUPT_RESOLVED)
        assert (resolved["interrupt_id"], resolved["cancellation_reason"]) == ("ask-1", reason), resolved
    assert "Forget the return" in built_ins.model_calls(steered, "turn-2")[0].model_input_text
    assert done.pending_interrupts == () and done.tool_calls == ()
    await a_normal_turn_works(built_ins, sessions, cancelled, 2)
