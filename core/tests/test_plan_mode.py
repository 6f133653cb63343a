"""Plan mode: a planning turn only writes the plan; execute_plan approves it and starts an executing turn."""

import asyncio

import pytest

from dex_agents import (
    ASK_USER,
    PLANNING_TURN_REJECTION_MESSAGE,
    WRITE_TODOS,
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    InteractionMode,
    InterruptKind,
    PlanStatus,
    TurnOutcome,
)
from dex_agents.testing import ScriptedResponse, ScriptedToolCall, wait_for_turn_end
from tests.builtin_support import READ, BuiltIns, a_normal_turn_works, call, payloads

pytestmark = pytest.mark.asyncio(loop_scope="module")


def todos(tool_call_id: str, *tasks: tuple[str, str]) -> ScriptedToolCall:
    items = [{"content": content, "status": status} for content, status in tasks]
    return ScriptedToolCall(WRITE_TODOS, {"todos": items}, tool_call_id)


async def test_a_planning_turn_only_writes_the_plan_and_execute_plan_runs_it(built_ins: BuiltIns) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("plan")
    draft = todos("todos-1", ("Look up A-1", "pending"), ("Refund A-1", "pending"))
    done_plan = todos("todos-2", ("Look up A-1", "completed"), ("Refund A-1", "completed"))
    built_ins.script(
        session,
        [
            ScriptedResponse(text="Here is my plan.", tool_calls=(draft, call(READ, "read-early"))),
            ScriptedResponse(text="Review the plan, please."),
        ],
        [
            ScriptedResponse(tool_calls=(call(READ, "read-1"),)),
            ScriptedResponse(tool_calls=(done_plan,)),
            ScriptedResponse(text="Done: A-1 is refunded."),
        ],
    )
    await sessions.start_session(session)
    assert await sessions.send_user_message(session, "Plan the refund of A-1", plan_mode=True)
    planned = await wait_for_turn_end(sessions, session, 1)

    assert planned.state is not None and planned.state.interaction_mode is InteractionMode.PLANNING
    assert planned.plan is not None and (planned.plan.revision, planned.plan.status) == (1, PlanStatus.DRAFT)
    assert not built_ins.runs(session, READ), "a planning turn runs no tool"
    first, second = built_ins.model_calls(session, "turn-1")
    assert list(first.offered_tools) == [WRITE_TODOS], first.offered_tools
    assert "[Dex] There is no plan yet." in first.model_input_text
    assert "This turn only plans" in first.model_input_text
    assert PLANNING_TURN_REJECTION_MESSAGE in second.model_input_text
    assert "[Dex] The current plan, revision 1, is draft:\n- [pending] Look up A-1" in second.model_input_text

    # Bad input: a stale revision, then the real one twice at once: exactly one approval starts the turn.
    assert not await sessions.execute_plan(session, 7)
    results = await asyncio.gather(sessions.execute_plan(session, 1), sessions.execute_plan(session, 1))
    assert sorted(results) == [False, True], results
    executed = await wait_for_turn_end(sessions, session, 2)

    assert executed.state is not None and executed.state.interaction_mode is InteractionMode.EXECUTING
    assert executed.plan is not None and (executed.plan.revision, executed.plan.status) == (
        2,
        PlanStatus.COMPLETED,
    )
    assert len(built_ins.runs(session, READ)) == 1
    executing = built_ins.model_calls(session, "turn-2")
    assert "[Dex] The user approved plan revision 1." in executing[0].model_input_text
    assert (
        "is active:" in executing[0].model_input_text
        and "This turn only plans" not in executing[0].model_input_text
    )
    assert READ in executing[0].offered_tools
    assert not await sessions.execute_plan(session, 2), "a completed plan cannot be executed"
    events = await built_ins.events(sessions, session)
    kinds = [event.type for event in events if event.turn_id == "turn-2"]
    assert kinds.index(AgentEventType.TURN_STARTED) < kinds.index(AgentEventType.PLAN_EXECUTION_STARTED)
    assert payloads(events, AgentEventType.PLAN_EXECUTION_STARTED) == [{"revision": 1}]
    assert payloads(events, AgentEventType.PLAN_UPDATED) == [
        {"revision": 1, "status": "draft", "task_count": 2},
        {"revision": 1, "status": "active", "task_count": 2},
        {"revision": 2, "status": "completed", "task_count": 2},
    ]
    assert (await built_ins.steps(session)).count("AwaitUserMessage") == 2
    await a_normal_turn_works(built_ins, sessions, session, 3)


async def test_a_draft_keeps_the_next_turn_planning_and_approvals_wait_for_an_idle_session(
    built_ins: BuiltIns,
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("draft")
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(todos("todos-1", ("Refund A-1", "pending")),)),
            ScriptedResponse(text="Ok."),
        ],
        [
            ScriptedResponse(
                tool_calls=(todos("todos-2", ("Refund A-1 in full", "pending")),), gate="revise"
            ),
            ScriptedResponse(text="Revised."),
        ],
    )
    await sessions.start_session(session, "Plan the refund of A-1")
    chat = await wait_for_turn_end(sessions, session, 1)
    assert not await sessions.execute_plan(session, 0), "no such revision"
    assert chat.plan is not None and chat.plan.status is PlanStatus.ACTIVE, (
        "a chat turn writes an active plan"
    )
    assert chat.state is not None and chat.state.interaction_mode is InteractionMode.CHAT

    assert await sessions.send_user_message(session, "Revise the plan", plan_mode=True)
    await built_ins.stack.gate(session, "revise").wait_until_reached()
    assert not await sessions.execute_plan(session, 1), "a turn is running"
    built_ins.stack.gate(session, "revise").release()
    revised = await wait_for_turn_end(sessions, session, 2)
    assert revised.plan is not None and (revised.plan.revision, revised.plan.status) == (2, PlanStatus.DRAFT)
    assert not await sessions.execute_plan(session, 1), "revision 1 is stale"

    # While a draft exists, the next message plans too, even without plan_mode.
    built_ins.stack.scripts.add_turn(session, ScriptedResponse(text="Still planning."))
    assert await sessions.send_user_message(session, "What about A-2?")
    again = await wait_for_turn_end(sessions, session, 3)
    assert again.state is not None and again.state.interaction_mode is InteractionMode.PLANNING
    assert list(built_ins.model_calls(session, "turn-3")[0].offered_tools) == [WRITE_TODOS]

    # A Flow without plan mode refuses plan_mode messages.
    other = built_ins.stack.new_session_id("no-plan-mode")
    await built_ins.deadline_sessions.start_session(other)
    assert not await built_ins.deadline_sessions.send_user_message(other, "Plan it", plan_mode=True)
    await a_normal_turn_works(built_ins, built_ins.deadline_sessions, other, 1)


async def test_the_client_waits_follow_the_turn_execute_plan_starts_and_its_question(
    built_ins: BuiltIns,
) -> None:
    flow = built_ins.flows.main
    session = built_ins.stack.new_session_id("plan-waits")
    draft = todos("todos-1", ("Ask which warehouse", "pending"))
    done_plan = todos("todos-2", ("Ask which warehouse", "completed"))
    question = ScriptedToolCall(ASK_USER, {"question": "Which warehouse?"}, "ask-1")
    built_ins.script(
        session,
        [ScriptedResponse(tool_calls=(draft,)), ScriptedResponse(text="Review the plan, please.")],
        [
            ScriptedResponse(tool_calls=(question,)),
            ScriptedResponse(tool_calls=(done_plan,)),
            ScriptedResponse(text="Berlin it is."),
        ],
    )
    # A client process that imports no agent passes the Worker's options, plan mode included.
    client_flow = AgentSessionFlow.for_client(flow_type=flow.flow_type, options=flow.options)
    async with AgentSessionClient.connect(built_ins.stack.server_address, client_flow) as sessions:
        await sessions.start_session(session)
        assert await sessions.send_user_message(session, "Plan the return of A-1", plan_mode=True)
        assert await sessions.wait_for_interrupt(session) is None
        planned = await sessions.wait_for_turn_end(session)
        assert (planned.turn_id, planned.outcome) == ("turn-1", TurnOutcome.COMPLETED)
        assert planned.snapshot.plan is not None and planned.snapshot.plan.status is PlanStatus.DRAFT
        # The approval starts turn 2 from a channel message the snapshot does not show, so until that turn
        # starts the session looks idle. The client marks the session when the approval is accepted (not
        # when it is refused), and the waits hold on to the mark until turn 2 starts; the race itself (a
        # Worker slower than the wait's first read) cannot be forced from outside, so the mark is checked.
        assert not await sessions.execute_plan(session, 7)
        assert sessions.send_markers.get(session) is None
        assert await sessions.execute_plan(session, 1)
        assert sessions.send_markers.get(session) is not None
        asked = await sessions.wait_for_interrupt(session)
        assert asked is not None and (asked.kind, asked.tool_call_id) == (InterruptKind.QUESTION, "ask-1")
        assert await sessions.answer_question(session, asked.interrupt_id, "Berlin")
        assert await sessions.wait_for_interrupt(session) is None
        executed = await sessions.wait_for_turn_end(session)
        assert (executed.turn_id, executed.outcome) == ("turn-2", TurnOutcome.COMPLETED)
        assert sessions.send_markers.get(session) is None
        assert executed.snapshot.messages[-1].text == "Berlin it is."
        assert executed.snapshot.plan is not None and executed.snapshot.plan.status is PlanStatus.COMPLETED
