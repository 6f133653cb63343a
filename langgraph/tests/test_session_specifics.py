"""LangChain specifics through a whole session: devserver, Worker child, real agent loop, scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from dex_agents import (
    WRITE_TODOS,
    AgentEventType,
    AgentMessage,
    AgentSessionClient,
    FrameworkMessage,
    InterruptKind,
    MessageRole,
)
from dex_agents.testing import (
    AgentTestStack,
    ProjectedCall,
    ScriptedResponse,
    ScriptedToolCall,
    check_message_projection,
    executed_step_types,
    read_agent_events,
    recorded_usage,
    stored_calls_without_result,
    text_by_model_step,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.matrix import wait_for_turn_end

from tests.matrix_spec import PACKAGE_DIR
from tests.specifics_agents import build_flows, node_answers_path

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Session:
    stack: AgentTestStack
    plain: AgentSessionClient
    forecast: AgentSessionClient
    reviewed: AgentSessionClient
    planning: AgentSessionClient
    compacting: AgentSessionClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    flows = build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("specifics"), flows, "tests.specifics_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        await stack.start_worker()
        yield Session(stack, *(stack.sessions(flow) for flow in flows))


async def test_human_in_the_loop_middleware_reviews_are_the_sessions_approvals_across_a_worker_kill(
    session: Session,
) -> None:
    stack, client = session.stack, session.reviewed
    session_id = stack.new_session_id("reviewed")
    calls = (
        ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1"),
        ScriptedToolCall("cancel_order", {"order_id": "A-1"}, "cancel-1"),
        ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1"),
    )
    stack.scripts.set_turns(
        session_id, [[ScriptedResponse(tool_calls=calls), ScriptedResponse(text="A-1 is cancelled.")]]
    )
    await client.start_session(session_id, "Cancel A-1 and send me the receipt")
    pending = await wait_for_agent_snapshot(
        client,
        session_id,
        lambda snapshot: snapshot.pending_interrupts if len(snapshot.pending_interrupts) == 2 else None,
        description="both reviewed calls waiting for approval",
    )
    assert {interrupt.kind for interrupt in pending} == {InterruptKind.TOOL_APPROVAL}
    waiting = {interrupt.tool_name or "": interrupt.interrupt_id for interrupt in pending}
    # Only the middleware's interrupt_on tools ask (cancel_order's own policy needs no approval), and
    # nothing the middleware reviews has run.
    assert sorted(waiting) == ["cancel_order", "send_receipt"]
    assert stack.invocations.tool_calls(session_id, "cancel_order") == []
    stack.kill_workers()
    await stack.start_worker()
    assert await client.resolve_interrupt(session_id, waiting["cancel_order"], approved=True)
    # The middleware's "respond" decision: the user's text is what the model gets for the call.
    answer = "The customer already has the receipt."
    assert await client.resolve_interrupt(
        session_id, waiting["send_receipt"], approved=False, rejection_message=answer
    )
    snapshot = await wait_for_turn_end(client, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert len(stack.invocations.tool_calls(session_id, "cancel_order")) == 1
    assert stack.invocations.tool_calls(session_id, "send_receipt") == []
    [_, resumed] = stack.invocations.model_calls(session_id)
    assert resumed.model_input[-1] == f"tool send_receipt [receipt-1] error: {answer}"
    outputs = {m.tool_call_id: m.tool_output for m in snapshot.messages if m.role is MessageRole.TOOL}
    assert outputs["receipt-1"] == answer


async def test_an_interrupt_in_a_graph_node_is_a_question_that_survives_a_worker_kill(
    session: Session,
) -> None:
    stack, client = session.stack, session.reviewed
    session_id = stack.new_session_id("node-question")
    stack.scripts.set_turns(session_id, [[ScriptedResponse(text="Going ahead.")]])
    await client.start_session(session_id, "Confirm first: cancel A-2")
    question = await client.wait_for_interrupt(session_id)
    assert question is not None and question.kind is InterruptKind.QUESTION
    assert (question.question, question.choices) == ("Go ahead with the order?", ("yes", "no"))
    assert stack.invocations.model_calls(session_id) == [], "the node asks before the model call"
    stack.kill_workers()
    await stack.start_worker()
    assert await client.answer_question(session_id, question.interrupt_id, "yes")
    snapshot = await wait_for_turn_end(client, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    # interrupt() returned the answer once, and the model was called once, after it.
    assert node_answers_path(stack.state_dir).read_text(encoding="utf-8").splitlines() == ["yes"]
    assert len(stack.invocations.model_calls(session_id)) == 1
    assert [message.text for message in snapshot.messages if message.role is MessageRole.ASSISTANT] == [
        "Going ahead."
    ]


async def test_a_planning_turn_offers_only_write_todos_and_the_next_turn_sees_the_plan(
    session: Session,
) -> None:
    # Matrix item 22 kills a Worker in the planning model call; this test pins LangGraph's model input.
    stack, client = session.stack, session.planning
    session_id = stack.new_session_id("plan")
    todos = [{"content": "Look up A-1", "status": "pending"}, {"content": "Refund A-1", "status": "pending"}]
    draft = ScriptedToolCall(WRITE_TODOS, {"todos": todos}, "todos-1")
    stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="My plan.", tool_calls=(draft,)),
                ScriptedResponse(text="Ok?"),
            ],
            [
                ScriptedResponse(
                    tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1"),)
                ),
                ScriptedResponse(text="A-1 is looked up."),
            ],
        ],
    )
    await client.start_session(session_id)
    assert await client.send_user_message(session_id, "Plan the refund of A-1", plan_mode=True)
    planned = await wait_for_turn_end(client, session_id, 1)

    assert planned.plan is not None and (planned.plan.revision, len(planned.plan.tasks)) == (1, 2)
    calls = stack.invocations.model_calls(session_id, "turn-1")
    assert [list(call.offered_tools) for call in calls] == [[WRITE_TODOS]] * 2, "the plan, then Ok?"
    assert "[Dex] There is no plan yet." in calls[0].model_input_text

    assert await client.execute_plan(session_id, 1)
    executed = await wait_for_turn_end(client, session_id, 2)
    assert executed.state is not None and executed.state.last_turn_error is None
    first = stack.invocations.model_calls(session_id, "turn-2")[0]
    assert "lookup_order" in first.offered_tools, first.offered_tools
    # The plan note comes as user text right before the turn's own message.
    assert first.model_input[-3:] == (
        "assistant: Ok?",
        "user: [Dex] The current plan, revision 1, is active:\n"
        "- [pending] Look up A-1\n- [pending] Refund A-1",
        "user: [Dex] The user approved plan revision 1. Execute it and keep the task statuses current with "
        "write_todos.",
    )


async def test_a_long_session_compacts_into_a_summary_message_at_the_start_of_the_model_input(
    session: Session,
) -> None:
    # Matrix item 23 kills a Worker in the summary call; this test pins LangGraph's model input.
    stack, client = session.stack, session.compacting
    session_id = stack.new_session_id("compact")
    long_question = "Where is order A-1? " + "It was a birthday present for my aunt. " * 18
    stack.scripts.set_turns(
        session_id, [[ScriptedResponse(text="A-1 ships Monday.")], [ScriptedResponse(text="Yes, Monday.")]]
    )
    stack.scripts.set_summaries(
        session_id,
        {"turn-2": ScriptedResponse(text="The user asked where A-1 is: it ships Monday.")},
    )
    await client.start_session(session_id, long_question)
    await wait_for_turn_end(client, session_id, 1)
    assert await client.send_user_message(session_id, "Monday, really?")
    snapshot = await wait_for_turn_end(client, session_id, 2)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    [summary] = stack.invocations.summary_calls(session_id)
    assert "birthday present" in summary.model_input_text
    # The model input starts with the summary as a user message; the summarized question is gone, and as
    # much as fits the retained budget stays verbatim.
    [answer] = stack.invocations.model_calls(session_id, "turn-2")
    assert answer.model_input == (
        "user: [Dex] Summary of the earlier conversation:\n\nThe user asked where A-1 is: it ships Monday.",
        "assistant: A-1 ships Monday.",
        "user: Monday, really?",
    )
    # The stored transcript keeps every message; only the model input is shorter.
    assert [message.text for message in snapshot.messages] == [
        long_question,
        "A-1 ships Monday.",
        "Monday, really?",
        "Yes, Monday.",
    ]


async def test_structured_output_next_to_a_read_call_ends_the_turn_without_another_model_call(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("forecast")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    output = ScriptedToolCall("Forecast", {"city": "Lima", "temperature_c": 21}, "output-1")
    session.stack.scripts.set_turns(session_id, [[ScriptedResponse(tool_calls=(read, output))]])
    await session.forecast.start_session(session_id, "Forecast for Lima")
    snapshot = await wait_for_turn_end(session.forecast, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert len(session.stack.invocations.model_calls(session_id)) == 1
    assert len(session.stack.invocations.tool_calls(session_id, "lookup_order")) == 1
    answer = next(message for message in snapshot.messages if message.role is MessageRole.ASSISTANT)
    assert json.loads(answer.text or "") == {"city": "Lima", "temperature_c": 21}
    assert snapshot.usage.model_calls == 1
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "RunModel",
    ]


async def test_invalid_structured_output_fails_the_turn_after_one_model_call(session: Session) -> None:
    session_id = session.stack.new_session_id("invalid-output")
    bad = ScriptedToolCall("Forecast", {"city": "Lima"}, "output-1")
    session.stack.scripts.set_turns(session_id, [[ScriptedResponse(tool_calls=(bad,))]])
    await session.forecast.start_session(session_id, "Forecast for Lima")
    snapshot = await wait_for_turn_end(session.forecast, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is not None
    assert "second model call" in snapshot.state.last_turn_error
    [call] = session.stack.invocations.model_calls(session_id)
    assert call.attempt == 1, "a deterministic framework failure is not retried"
    assert [message.role for message in snapshot.messages] == [MessageRole.USER]


async def test_text_streams_as_deltas_of_each_model_call_and_usage_is_per_call(session: Session) -> None:
    session_id = session.stack.new_session_id("streaming")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check order A-1.", tool_calls=(read,), input_tokens=30),
                ScriptedResponse(text="A-1 shipped.", input_tokens=45),
            ]
        ],
    )
    await session.plain.start_session(session_id, "Where is A-1?")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)
    events = await read_agent_events(session.plain, session_id)

    deltas = sum(event.type == AgentEventType.TEXT_DELTA for event in events)
    assert list(text_by_model_step(events).values()) == ["Let me check order A-1.", "A-1 shipped."]
    assert deltas > 2, "the text arrives in chunks while the model streams"
    assistant_texts = [message.text for message in snapshot.messages if message.role is MessageRole.ASSISTANT]
    assert assistant_texts == ["Let me check order A-1.", None, "A-1 shipped."], "the call is its own message"
    recorded = recorded_usage(events)
    assert [(usage["model_calls"], usage["input_tokens"]) for usage in recorded] == [(1, 30), (1, 45)]
    assert snapshot.usage.model_calls == 2 and snapshot.usage.input_tokens == 75
    assert snapshot.tool_calls == (), "a completed turn keeps no tool call records"


async def test_cancel_turn_stops_the_graphs_model_call_and_the_next_turn_sees_every_call_and_result(
    session: Session,
) -> None:
    stack, sessions = session.stack, session.plain
    session_id = stack.new_session_id("cancelled")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", output="A-1 shipped on Monday")
    refund = ScriptedToolCall("refund_order", {"order_id": "B-2"}, "refund-1")
    stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check A-1 and refund B-2.", tool_calls=(read, refund)),
                ScriptedResponse(text="Never said.", block_until_cancelled=True),
            ],
            [ScriptedResponse(text="I refunded nothing.")],
        ],
    )
    await sessions.start_session(session_id, "Where is A-1? Refund B-2.")
    pending = await wait_for_agent_snapshot(
        sessions,
        session_id,
        lambda snapshot: snapshot.pending_interrupts,
        description="the refund's approval",
    )
    assert await sessions.resolve_interrupt(
        session_id, pending[0].interrupt_id, approved=False, rejection_message="Not without a receipt."
    )
    await wait_until(
        "the resumed model call to start", lambda: len(stack.invocations.model_calls(session_id)) == 2
    )

    assert await sessions.cancel_turn(session_id, "turn-1")
    cancelled = await wait_for_turn_end(sessions, session_id, 1)

    await wait_until(
        "the graph's model call to be cancelled", lambda: stack.invocations.cancelled_model_calls(session_id)
    )
    assert cancelled.state is not None and cancelled.state.last_turn_error is None
    assert stored_calls_without_result(cancelled.messages) == []
    # The turn keeps its answer and both results in the shared projection, not the cancelled note.
    check_message_projection(
        [_as_framework_message(message) for message in cancelled.messages[1:]],
        response_text="Let me check A-1 and refund B-2.",
        calls=[
            ProjectedCall("read-1", "lookup_order", {"order_id": "A-1"}),
            ProjectedCall("refund-1", "refund_order", {"order_id": "B-2"}),
        ],
        outputs={"read-1": "A-1 shipped on Monday", "refund-1": "Not without a receipt."},
    )

    assert await sessions.send_user_message(session_id, "Did you refund B-2?")
    done = await wait_for_turn_end(sessions, session_id, 2)

    assert done.messages[-1].text == "I refunded nothing."
    [next_call] = stack.invocations.model_calls(session_id, "turn-2")
    assert list(next_call.model_input) == [
        "user: Where is A-1? Refund B-2.",
        "assistant: Let me check A-1 and refund B-2.",
        'assistant calls lookup_order {"order_id": "A-1"} [read-1]',
        'assistant calls refund_order {"order_id": "B-2"} [refund-1]',
        "tool lookup_order [read-1] success: A-1 shipped on Monday",
        "tool refund_order [refund-1] error: Not without a receipt.",
        "user: Did you refund B-2?",
    ]
    assert len(stack.invocations.tool_calls(session_id, "lookup_order")) == 1
    assert stack.invocations.tool_calls(session_id, "refund_order") == []
    events = await read_agent_events(sessions, session_id)
    assert [event.type for event in events].count(AgentEventType.TURN_CANCELLED) == 1


def _as_framework_message(message: AgentMessage) -> FrameworkMessage:
    return FrameworkMessage(
        role=message.role,
        framework_item=message.framework_item,
        text=message.text,
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        tool_arguments=message.tool_arguments,
        tool_output=message.tool_output,
    )
