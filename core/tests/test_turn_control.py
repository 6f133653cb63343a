"""Steering, deleting queued messages, and cancelling a turn, against the devserver and Worker children.

Every test runs one session on the module's stack, kills the Worker in the middle where a crash matters,
and ends with a normal turn, so nothing that a refusal or a cancellation leaves behind blocks the session.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

import dex_agents
from dex_agents import (
    MAX_USER_MESSAGE_BYTES,
    STEERED_REJECTION_MESSAGE,
    TURN_CANCELLED_REJECTION_MESSAGE,
    AgentEvent,
    AgentEventType,
    AgentMessage,
    AgentSessionClient,
    AgentSnapshot,
    AgentToolCall,
    AgentUserMessage,
    CancellationReason,
    MessageRole,
    SteerUserMessageRequest,
    ToolCallStatus,
    ToolEffect,
    build_turn_control_note,
)
from dex_agents.testing import (
    AgentTestStack,
    Invocation,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    stored_calls_without_result,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from tests.agents import CORE_DIR
from tests.conflicting_client import ConflictingClient
from tests.control_agents import ControlFlows, ControlTestFlow, build_control_flows

pytestmark = pytest.mark.asyncio(loop_scope="module")

READ, RECEIPT, REFUND, CANCEL = "lookup_order", "send_receipt", "refund_order", "cancel_order"


@dataclass
class Control:
    stack: AgentTestStack
    flows: ControlFlows

    def sessions(self, flow: ControlTestFlow) -> AgentSessionClient:
        return self.stack.sessions(flow)

    def script(self, session: str, *turns: Sequence[ScriptedResponse]) -> None:
        self.stack.scripts.set_turns(session, turns)

    def model_calls(self, session: str, turn_id: str) -> list[Invocation]:
        return self.stack.invocations.model_calls(session, turn_id)

    def runs(self, session: str, tool_name: str) -> list[Invocation]:
        return self.stack.invocations.tool_calls(session, tool_name)

    async def replace_worker(self) -> None:
        self.stack.kill_workers()
        await self.stack.start_worker()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def control_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Control]:
    flows = build_control_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("control"), flows.all, "tests.control_worker", worker_cwd=CORE_DIR
    ) as stack:
        yield Control(stack, flows)


@pytest_asyncio.fixture(loop_scope="module")
async def control(control_stack: Control) -> Control:
    if not control_stack.stack.workers:
        await control_stack.stack.start_worker()
    return control_stack


def call(tool_name: str, tool_call_id: str, order_id: str = "A-1", **behaviour: Any) -> ScriptedToolCall:
    return ScriptedToolCall(tool_name, {"order_id": order_id}, tool_call_id, **behaviour)


def payloads(events: Sequence[AgentEvent], event_type: str) -> list[dict[str, Any]]:
    return [json.loads(event.payload) for event in events if event.type == event_type]


def tool_results(messages: Sequence[AgentMessage]) -> dict[str, str | None]:
    return {
        message.tool_call_id or "": message.tool_output
        for message in messages
        if message.role is MessageRole.TOOL
    }


def rejected(tool_call_id: str, order_id: str, order: int, reason: CancellationReason) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=tool_call_id,
        turn_id="turn-1",
        tool_name=REFUND,
        arguments=json.dumps({"order_id": order_id}, separators=(",", ":")),
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=ToolCallStatus.REJECTED,
        rejection_message=STEERED_REJECTION_MESSAGE
        if reason is CancellationReason.STEERED
        else TURN_CANCELLED_REJECTION_MESSAGE,
        deferral_order=order,
        cancellation_reason=reason,
    )


async def pending_approvals(sessions: AgentSessionClient, session: str, count: int) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: snapshot if len(snapshot.pending_interrupts) == count else None,
        description=f"{count} pending approvals",
    )


async def finish_with_a_normal_turn(
    sessions: AgentSessionClient, session: str, turn_count: int
) -> AgentSnapshot:
    assert await sessions.send_user_message(session, "Still there?")
    done = await wait_for_turn_end(sessions, session, turn_count)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert [message.text for message in done.messages[-2:]] == ["Still there?", "Yes."], done.messages
    return done


async def test_steer_during_a_model_call_applies_at_the_next_boundary(control: Control) -> None:
    sessions = control.sessions(control.flows.main)
    session = control.stack.new_session_id("steer-model")
    control.script(
        session,
        [ScriptedResponse(tool_calls=(call(READ, "read-1"), call(REFUND, "refund-1")), gate="model")],
        [ScriptedResponse(text="A-2 is in the warehouse.")],
        [ScriptedResponse(text="A-3 left today.")],
        [ScriptedResponse(text="Yes.")],
    )
    await sessions.start_session(session, "Look up A-1 and refund it")
    await control.stack.gate(session, "model").wait_until_reached()
    # A later release queues plan_mode messages; a steer by ID must keep the flag on the moved message.
    assert await control.stack.client.invoke_rpc(
        control.flows.main.queue_plan_mode_message, session, AgentUserMessage("Plan the A-2 refund")
    )
    assert await sessions.send_user_message(session, "Then look at A-3")
    queued = (await sessions.get_agent_snapshot(session)).queued_messages
    assert [(item.message.text, item.message.plan_mode) for item in queued] == [
        ("Plan the A-2 refund", True),
        ("Then look at A-3", False),
    ]
    assert await sessions.steer_user_message(session, message_id=queued[0].message_id)
    assert await sessions.steer_user_message(session, "Stop: where is A-2?")
    waiting = await sessions.get_agent_snapshot(session)
    assert [(item.message.text, item.message.plan_mode) for item in waiting.steered_messages] == [
        ("Plan the A-2 refund", True),
        ("Stop: where is A-2?", False),
    ]
    assert waiting.steered_messages[0].message_id != queued[0].message_id  # a new message in a new Channel
    assert [item.message_id for item in waiting.queued_messages] == [queued[1].message_id]
    assert waiting.state is not None and waiting.state.active_turn_id == "turn-1"

    # The model call started before the steer, so it runs to its end, here across a Worker crash: the
    # retry reads the first attempt's state. The steer applies to the tool calls it requested.
    await control.replace_worker()
    done = await wait_for_turn_end(sessions, session, 3)

    first_turn = control.model_calls(session, "turn-1")
    assert len(first_turn) == 2 and len({item.step_execution_id for item in first_turn}) == 1, first_turn
    assert not control.runs(session, READ) and not control.runs(session, REFUND)
    assert stored_calls_without_result(done.messages) == [], done.messages
    assert tool_results(done.messages) == {
        "read-1": STEERED_REJECTION_MESSAGE,
        "refund-1": STEERED_REJECTION_MESSAGE,
    }
    users = [(message.turn_id, message.text) for message in done.messages if message.role is MessageRole.USER]
    assert users == [
        ("turn-1", "Look up A-1 and refund it"),
        ("turn-2", "Plan the A-2 refund"),
        ("turn-2", "Stop: where is A-2?"),
        ("turn-3", "Then look at A-3"),
    ]
    [steered_call] = control.model_calls(session, "turn-2")
    assert steered_call.model_input_text.count("superseded_by_steered_user_message") == 2
    assert "Then look at A-3" not in steered_call.model_input_text
    events = await read_agent_events(sessions, session)
    assert payloads(events, AgentEventType.TURN_STEERED) == [{"steered_message_count": 2, "message_count": 4}]
    assert [
        (item["tool_call_id"], item["status"]) for item in payloads(events, AgentEventType.TOOL_CALL_FINISHED)
    ][:2] in (
        [("read-1", "rejected"), ("refund-1", "rejected")],
        [("refund-1", "rejected"), ("read-1", "rejected")],
    )
    [resolved] = [
        item
        for item in payloads(events, AgentEventType.INTERRUPT_RESOLVED)
        if item["interrupt_id"] == "refund-1"
    ]
    assert (resolved["approved"], resolved["cancellation_reason"]) == (False, "steered"), resolved
    assert not payloads(events, AgentEventType.TOOL_CALL_STARTED)
    await finish_with_a_normal_turn(sessions, session, 4)


async def test_steer_abandons_waiting_approvals_even_when_the_builder_fails(control: Control) -> None:
    sessions = control.sessions(control.flows.broken_builder)
    session = control.stack.new_session_id("steer-approvals")
    refunds = (call(REFUND, "refund-1", "A-1"), call(REFUND, "refund-2", "A-2"))
    control.script(
        session,
        [ScriptedResponse(tool_calls=refunds)],
        [ScriptedResponse(text="Nothing was refunded.")],
        [ScriptedResponse(text="Yes.")],
    )
    await sessions.start_session(session, "Refund A-1 and A-2")
    await pending_approvals(sessions, session, 2)
    await control.replace_worker()  # the approvals wait across a crash; the new Worker applies the steer
    assert await sessions.steer_user_message(session, "Do not refund anything")
    done = await wait_for_turn_end(sessions, session, 2)

    assert not await sessions.resolve_interrupt(session, "refund-1", approved=True)  # the steer removed it
    assert not control.runs(session, REFUND)
    # The runner's builder raised, so the turn keeps the steered note instead of its own items.
    note = build_turn_control_note(
        [
            rejected("refund-1", "A-1", 0, CancellationReason.STEERED),
            rejected("refund-2", "A-2", 1, CancellationReason.STEERED),
        ],
        CancellationReason.STEERED,
    )
    assert [(message.turn_id, message.text) for message in done.messages] == [
        ("turn-1", "Refund A-1 and A-2"),
        ("turn-1", note),
        ("turn-2", "Do not refund anything"),
        ("turn-2", "Nothing was refunded."),
    ]
    assert note in control.model_calls(session, "turn-2")[0].model_input_text
    events = await read_agent_events(sessions, session)
    resolved = payloads(events, AgentEventType.INTERRUPT_RESOLVED)
    assert sorted(
        (item["interrupt_id"], item["cancellation_reason"], item["rejection_message"]) for item in resolved
    ) == [
        ("refund-1", "steered", STEERED_REJECTION_MESSAGE),
        ("refund-2", "steered", STEERED_REJECTION_MESSAGE),
    ]
    assert payloads(events, AgentEventType.TURN_STEERED) == [{"steered_message_count": 1, "message_count": 1}]
    steps = executed_step_types(await control.stack.read_step_history(session))
    assert steps.count("AwaitToolApproval") == 2 and "CallSingleAttemptTool" not in steps, steps
    await finish_with_a_normal_turn(sessions, session, 3)


async def test_refusals_return_false_and_delete_removes_only_that_message(control: Control) -> None:
    flow = control.flows.main
    sessions = control.sessions(flow)
    session = control.stack.new_session_id("refusals")
    control.script(
        session,
        [ScriptedResponse(text="First.", gate="model")],
        [ScriptedResponse(text="Second.")],
        [ScriptedResponse(text="Third.")],
        [ScriptedResponse(text="Fourth.")],
        [ScriptedResponse(text="Yes.")],
    )
    await sessions.start_session(session, "Hi")
    await control.stack.gate(session, "model").wait_until_reached()
    assert await sessions.send_user_message(session, "Forget this")
    assert await sessions.send_user_message(session, "Keep this")
    before = await sessions.get_agent_snapshot(session)
    forget, keep = before.queued_messages

    oversized = "x" * (MAX_USER_MESSAGE_BYTES + 1)
    refused_steers = [
        SteerUserMessageRequest(),
        SteerUserMessageRequest(message_id=keep.message_id, text="both"),
        SteerUserMessageRequest(text=" \n\t"),
        SteerUserMessageRequest(text=oversized),
        SteerUserMessageRequest(message_id="0190e4c1-no-such-message"),
        SteerUserMessageRequest(message_id=""),
    ]
    for request in refused_steers:
        assert not await control.stack.client.invoke_rpc(flow.steer_user_message, session, request), request
    assert not await sessions.steer_user_message(session, "   ")
    with pytest.raises(ValueError, match="exactly one of text and message_id"):
        await sessions.steer_user_message(session, "both", message_id=keep.message_id)
    with pytest.raises(ValueError, match="exactly one of text and message_id"):
        await sessions.steer_user_message(session)
    with pytest.raises(ValueError, match="MAX_USER_MESSAGE_BYTES"):
        await sessions.steer_user_message(session, oversized)
    assert not await sessions.cancel_turn(session, "turn-7")  # another turn's ID
    assert not await sessions.delete_queued_message(session, "0190e4c1-no-such-message")
    assert not await sessions.delete_queued_message(session, "")
    # Two deletes of one message race: the one that commits second finds it gone, and nothing commits.
    deleted = await asyncio.gather(
        sessions.delete_queued_message(session, forget.message_id),
        sessions.delete_queued_message(session, forget.message_id),
    )
    assert sorted(deleted) == [False, True]
    assert not await sessions.delete_queued_message(session, forget.message_id)

    after = await sessions.get_agent_snapshot(session)
    assert after.queued_messages == (keep,) and after.queued_message_count == 1
    assert after.steered_messages == () and after.state == before.state
    # The model call answers without tool calls, so this steer applies once the turn has completed, and
    # it starts the next turn before the message that was queued first.
    assert await sessions.steer_user_message(session, "One more thing")
    control.stack.gate(session, "model").release()
    third = await wait_for_turn_end(sessions, session, 3)
    assert [(message.turn_id, message.text) for message in third.messages] == [
        ("turn-1", "Hi"),
        ("turn-1", "First."),
        ("turn-2", "One more thing"),
        ("turn-2", "Second."),
        ("turn-3", "Keep this"),
        ("turn-3", "Third."),
    ]

    # Idle: nothing to cancel, and a steer is an ordinary queued message.
    assert not await sessions.cancel_turn(session)
    assert await sessions.steer_user_message(session, "And a fourth thing")
    fourth = await wait_for_turn_end(sessions, session, 4)
    assert [message.text for message in fourth.messages[-2:]] == ["And a fourth thing", "Fourth."]
    events = await read_agent_events(sessions, session)
    assert not payloads(events, AgentEventType.TURN_STEERED) and not payloads(
        events, AgentEventType.TURN_CANCELLED
    )
    await finish_with_a_normal_turn(sessions, session, 5)


async def test_a_turn_that_a_worker_without_steering_started_refuses_steer_and_cancel(
    control: Control,
) -> None:
    flow = control.flows.main
    sessions = control.sessions(flow)
    session = control.stack.new_session_id("earlier-worker")
    control.script(session, [ScriptedResponse(text="Done.", gate="model")], [ScriptedResponse(text="Yes.")])
    await sessions.start_session(session, "Hi")
    await control.stack.gate(session, "model").wait_until_reached()
    running = await sessions.get_agent_snapshot(session)
    assert running.state is not None and running.state.accepts_turn_control
    assert running.state.active_turn_release == dex_agents.__version__
    assert await control.stack.client.invoke_rpc(flow.write_state_as_earlier_worker, session)

    assert not await sessions.steer_user_message(session, "Stop")
    assert not await sessions.cancel_turn(session)
    assert not await sessions.cancel_turn(session, "turn-1")
    refused = await sessions.get_agent_snapshot(session)
    assert refused.steered_messages == () and refused.queued_messages == ()
    control.stack.gate(session, "model").release()
    done = await wait_for_turn_end(sessions, session, 1)
    assert done.state is not None and not done.state.accepts_turn_control
    assert done.state.active_turn_release is None
    assert [message.text for message in done.messages] == ["Hi", "Done."]
    await finish_with_a_normal_turn(sessions, session, 2)


async def test_cancel_during_a_model_call_of_a_steered_turn_ends_it_cancelled(control: Control) -> None:
    sessions = control.sessions(control.flows.incremental)
    session = control.stack.new_session_id("cancel-model")
    control.script(
        session,
        [
            ScriptedResponse(tool_calls=(call(READ, "read-1", output="A-1 shipped on Monday"),)),
            ScriptedResponse(block_until_cancelled=True),
        ],
        [ScriptedResponse(text="A-2 is in the warehouse.")],
        [ScriptedResponse(text="Yes.")],
    )
    await sessions.start_session(session, "Where is A-1?")
    await wait_until("the blocking model call", lambda: len(control.model_calls(session, "turn-1")) == 2)
    await control.replace_worker()  # the blocking model call runs again on the new Worker
    await wait_until("the model call's retry", lambda: len(control.model_calls(session, "turn-1")) == 3)
    assert await sessions.steer_user_message(session, "And where is A-2?")
    assert await sessions.cancel_turn(session, "turn-1")
    done = await wait_for_turn_end(sessions, session, 2)

    # The retry's coroutine was cancelled (the killed attempt's process could log nothing).
    [cancelled] = control.stack.invocations.cancelled_model_calls(session, "turn-1")
    assert cancelled.attempt == control.model_calls(session, "turn-1")[-1].attempt
    assert len(control.runs(session, READ)) == 1
    # Cancelled wins over steered, and the steered message starts the next turn.
    assert [
        (message.turn_id, message.role, message.tool_call_id, message.text) for message in done.messages
    ] == [
        ("turn-1", MessageRole.USER, None, "Where is A-1?"),
        ("turn-1", MessageRole.ASSISTANT, "read-1", None),  # stored when the call was requested
        ("turn-1", MessageRole.TOOL, "read-1", None),  # from build_unfinished_turn_messages
        ("turn-2", MessageRole.USER, None, "And where is A-2?"),
        ("turn-2", MessageRole.ASSISTANT, None, "A-2 is in the warehouse."),
    ]
    assert tool_results(done.messages) == {"read-1": "A-1 shipped on Monday"}
    [next_call] = control.model_calls(session, "turn-2")
    assert "A-1 shipped on Monday" in next_call.model_input_text
    events = await read_agent_events(sessions, session)
    assert payloads(events, AgentEventType.TURN_CANCELLED) == [{"message_count": 2}]
    assert not payloads(events, AgentEventType.TURN_STEERED) and not payloads(
        events, AgentEventType.TURN_FAILED
    )
    steps = executed_step_types(await control.stack.read_step_history(session))
    assert "RecordTurnFailure" not in steps and steps.count("FinishTurnCancellation") == 1, steps
    await finish_with_a_normal_turn(sessions, session, 3)


async def test_cancel_lets_started_tools_finish_and_abandons_the_approval(control: Control) -> None:
    sessions = control.sessions(control.flows.main)
    session = control.stack.new_session_id("cancel-tools")
    calls = (
        call(READ, "read-1", gate="read", output="A-1 shipped on Monday"),
        call(CANCEL, "cancel-1", "A-2", gate="write", output="A-2 cancelled"),
        call(REFUND, "refund-1", "A-3"),
    )
    control.script(session, [ScriptedResponse(tool_calls=calls)], [ScriptedResponse(text="Yes.")])
    await sessions.start_session(session, "Look up A-1, cancel A-2, refund A-3")
    await control.stack.gate(session, "read").wait_until_reached()
    await control.stack.gate(session, "write").wait_until_reached()
    await pending_approvals(sessions, session, 1)
    # A Step holding a lock makes cancel_turn conflict; the client retries.
    conflicting = ConflictingClient(control.stack, control.flows.all, conflicts=2, rpc_name="cancel_turn")
    try:
        assert await AgentSessionClient(conflicting, control.flows.main).cancel_turn(session)
        assert conflicting.calls == 3
    finally:
        await conflicting.close()
    abandoned = await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: snapshot
        if any(item.tool_call_id == "refund-1" and item.is_final for item in snapshot.tool_calls)
        else None,
        description="the approval to be abandoned",
    )
    refund = next(item for item in abandoned.tool_calls if item.tool_call_id == "refund-1")
    assert (refund.status, refund.rejection_message, refund.cancellation_reason) == (
        ToolCallStatus.REJECTED,
        TURN_CANCELLED_REJECTION_MESSAGE,
        CancellationReason.TURN_CANCELLED,
    )
    assert abandoned.pending_interrupts == ()
    assert await sessions.cancel_turn(session)  # already cancelled: true, and nothing changes
    assert not await sessions.resolve_interrupt(session, "refund-1", approved=True)

    control.stack.gate(session, "write").release()
    await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: any(
            item.tool_call_id == "cancel-1" and item.is_final for item in snapshot.tool_calls
        ),
        description="the started write to finish",
    )
    await control.replace_worker()  # the read started before the cancel, so its retry runs to its end
    done = await wait_for_turn_end(sessions, session, 1)

    assert len(control.runs(session, CANCEL)) == 1 and not control.runs(session, REFUND)
    assert [run.attempt for run in control.runs(session, READ)] == [1, 2]
    assert tool_results(done.messages) == {
        "read-1": "A-1 shipped on Monday",
        "cancel-1": "A-2 cancelled",
        "refund-1": TURN_CANCELLED_REJECTION_MESSAGE,
    }
    assert len(control.model_calls(session, "turn-1")) == 1
    events = await read_agent_events(sessions, session)
    [resolved] = payloads(events, AgentEventType.INTERRUPT_RESOLVED)
    assert (resolved["interrupt_id"], resolved["cancellation_reason"]) == ("refund-1", "turn_cancelled")
    assert len(payloads(events, AgentEventType.TURN_CANCELLED)) == 1
    done = await finish_with_a_normal_turn(sessions, session, 2)
    turn_two = control.model_calls(session, "turn-2")[0].model_input_text
    assert "A-2 cancelled" in turn_two and "turn_cancelled_by_user" in turn_two


async def test_cancel_that_commits_before_an_approval_wins(control: Control) -> None:
    sessions = control.sessions(control.flows.notes)
    session = control.stack.new_session_id("cancel-first")
    control.script(
        session, [ScriptedResponse(tool_calls=(call(REFUND, "refund-1"),))], [ScriptedResponse(text="Yes.")]
    )
    await sessions.start_session(session, "Refund A-1")
    await pending_approvals(sessions, session, 1)
    await control.replace_worker()
    assert await sessions.cancel_turn(session)
    # Racing the cancellation's Steps: an approval may still commit, but the call never starts.
    approved = await sessions.resolve_interrupt(session, "refund-1", approved=True)
    done = await wait_for_turn_end(sessions, session, 1)

    assert not control.runs(session, REFUND)
    note = build_turn_control_note(
        [rejected("refund-1", "A-1", 0, CancellationReason.TURN_CANCELLED)], CancellationReason.TURN_CANCELLED
    )
    assert [message.text for message in done.messages] == ["Refund A-1", note]
    assert not await sessions.resolve_interrupt(session, "refund-1", approved=True)
    events = await read_agent_events(sessions, session)
    [resolved] = payloads(events, AgentEventType.INTERRUPT_RESOLVED)
    if approved:
        assert (resolved["approved"], resolved["cancellation_reason"]) == (True, None), resolved
    else:
        assert (resolved["approved"], resolved["cancellation_reason"]) == (False, "turn_cancelled"), resolved
    assert payloads(events, AgentEventType.TURN_CANCELLED) == [{"message_count": 1}]
    await finish_with_a_normal_turn(sessions, session, 2)


async def test_an_answer_that_commits_before_the_cancel_wins(control: Control) -> None:
    sessions = control.sessions(control.flows.main)
    session = control.stack.new_session_id("answer-first")
    control.script(
        session,
        [
            ScriptedResponse(tool_calls=(call(REFUND, "refund-1"),)),
            ScriptedResponse(block_until_cancelled=True),
        ],
        [ScriptedResponse(text="Yes.")],
    )
    await sessions.start_session(session, "Refund A-1")
    await pending_approvals(sessions, session, 1)
    assert await sessions.resolve_interrupt(
        session, "refund-1", approved=False, rejection_message="Not this one."
    )
    assert await sessions.cancel_turn(session)
    done = await wait_for_turn_end(sessions, session, 1)

    assert not control.runs(session, REFUND)
    assert tool_results(done.messages) == {"refund-1": "Not this one."}
    events = await read_agent_events(sessions, session)
    [resolved] = payloads(events, AgentEventType.INTERRUPT_RESOLVED)
    assert (resolved["approved"], resolved["rejection_message"], resolved["cancellation_reason"]) == (
        False,
        "Not this one.",
        None,
    )
    assert len(payloads(events, AgentEventType.TURN_CANCELLED)) == 1
    await finish_with_a_normal_turn(sessions, session, 2)


async def test_an_incremental_runner_keeps_a_result_for_every_stored_call(control: Control) -> None:
    sessions = control.sessions(control.flows.incremental)
    session = control.stack.new_session_id("incremental")
    control.script(
        session,
        [
            ScriptedResponse(tool_calls=(call(READ, "read-1", gate="read"),)),
            ScriptedResponse(text="Shipped."),
        ],
        [
            ScriptedResponse(tool_calls=(call(READ, "read-2", "A-2"),)),
            ScriptedResponse(fail_attempts=(1, 2, 3)),
        ],
        [ScriptedResponse(text="Yes.")],
    )
    await sessions.start_session(session, "Where is A-1?")
    await control.stack.gate(session, "read").wait_until_reached()
    running = await sessions.get_agent_snapshot(session)
    assert [(message.role, message.tool_call_id) for message in running.messages] == [
        (MessageRole.USER, None),
        (MessageRole.ASSISTANT, "read-1"),  # stored with the tool calls, before any result
    ]
    control.stack.gate(session, "read").release()
    first = await wait_for_turn_end(sessions, session, 1)
    assert [(message.role, message.tool_call_id, message.text) for message in first.messages[1:]] == [
        (MessageRole.ASSISTANT, "read-1", None),
        (MessageRole.TOOL, "read-1", None),
        (MessageRole.ASSISTANT, None, "Shipped."),
    ]

    assert await sessions.send_user_message(session, "And A-2?")
    failed = await wait_for_turn_end(sessions, session, 2)
    assert failed.state is not None and "scripted model failure" in (failed.state.last_turn_error or "")
    second_turn = [message for message in failed.messages if message.turn_id == "turn-2"]
    assert [(message.role, message.tool_call_id) for message in second_turn] == [
        (MessageRole.USER, None),
        (MessageRole.ASSISTANT, "read-2"),
        (MessageRole.TOOL, "read-2"),  # from build_unfinished_turn_messages, before the note
        (MessageRole.USER, None),
    ]
    assert stored_calls_without_result(failed.messages) == []
    events = await read_agent_events(sessions, session)
    assert payloads(events, AgentEventType.TURN_COMPLETED) == [{"message_count": 3}]
    await finish_with_a_normal_turn(sessions, session, 3)
