"""Approvals: lock conflicts in resolve_interrupt, and deadlines (an early Timer waits again)."""

import asyncio
import re
from datetime import timedelta

import pytest
from dex import (
    RpcLockConflictError,
    StepExecutionId,
    TimerId,
    WorkerInvocationError,
)

from dex_agents import APPROVAL_DEADLINE_PASSED, AgentSessionClient, ToolCallStatus
from dex_agents.testing import (
    WAIT_FOR_COMPLETED_EVENT,
    ScriptedResponse,
    executed_step_types,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from dex_agents.testing.matrix import MatrixHarness
from tests.conflicting_client import ConflictingClient, worker_disconnected

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def _start_approval(harness: MatrixHarness, prefix: str, *call_ids: str) -> str:
    session = harness.stack.new_session_id(prefix)
    calls = tuple(
        harness.call(harness.tools.approval_write, call_id, order_id=call_id) for call_id in call_ids
    )
    harness.script(session, [ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Done.")])
    await harness.sessions.start_session(session, "Refund these orders")
    await wait_for_agent_snapshot(
        harness.sessions,
        session,
        lambda snapshot: len(snapshot.pending_interrupts) == len(call_ids),
        description="every approval to be pending",
    )
    return session


async def test_resolve_interrupt_retries_lock_conflicts(harness: MatrixHarness) -> None:
    session = await _start_approval(harness, "lock-retry", "refund-1")
    client = ConflictingClient(harness.stack, harness.flows.all, conflicts=3)
    try:
        assert await AgentSessionClient(client, harness.flows.main).resolve_interrupt(
            session, "refund-1", approved=True
        )
        assert client.calls == 4  # three conflicts, then the call that committed
    finally:
        await client.close()
    await wait_for_turn_end(harness.sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1


async def test_lock_conflict_past_the_retry_time_raises_and_changes_nothing(harness: MatrixHarness) -> None:
    session = await _start_approval(harness, "lock-timeout", "refund-1")
    client = ConflictingClient(harness.stack, harness.flows.all, conflicts=1_000_000)
    try:
        # Long enough that a stalled process still retries at least once before the time passes.
        impatient = AgentSessionClient(
            client, harness.flows.main, lock_conflict_retry_timeout=timedelta(seconds=1)
        )
        with pytest.raises(RpcLockConflictError):
            await impatient.resolve_interrupt(session, "refund-1", approved=True)
        assert client.calls >= 2  # it retried before giving up
    finally:
        await client.close()
    snapshot = await harness.sessions.get_agent_snapshot(session)
    assert [interrupt.interrupt_id for interrupt in snapshot.pending_interrupts] == ["refund-1"]
    assert await harness.sessions.resolve_interrupt(session, "refund-1", approved=True)
    await wait_for_turn_end(harness.sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1


async def test_rpcs_outlast_workers_that_disconnect_during_them(harness: MatrixHarness) -> None:
    # A rolling deploy: the Worker running the RPC is drained or killed, and another one answers it.
    session = await _start_approval(harness, "read-retry", "refund-1")
    for disconnects, survives in ((3, True), (4, False)):
        client = ConflictingClient(
            harness.stack, harness.flows.all, disconnects, "get_agent_snapshot", worker_disconnected
        )
        try:
            reader = AgentSessionClient(client, harness.flows.main)
            if survives:
                snapshot = await reader.get_agent_snapshot(session)
                assert [interrupt.interrupt_id for interrupt in snapshot.pending_interrupts] == ["refund-1"]
            else:
                with pytest.raises(WorkerInvocationError, match="disconnected"):
                    await reader.get_agent_snapshot(session)
            assert client.calls == disconnects + (1 if survives else 0)
        finally:
            await client.close()
    # A message whose RPC lost its Worker committed nothing, so sending it again queues it once.
    client = ConflictingClient(harness.stack, harness.flows.all, 1, "send_user_message", worker_disconnected)
    try:
        assert await AgentSessionClient(client, harness.flows.main).send_user_message(session, "And A-8?")
        assert client.calls == 2
    finally:
        await client.close()
    snapshot = await harness.sessions.get_agent_snapshot(session)
    assert [queued.message.text for queued in snapshot.queued_messages] == ["And A-8?"]


async def test_concurrent_resolutions_of_one_session_all_apply(harness: MatrixHarness) -> None:
    ids = ("refund-1", "refund-2", "refund-3")
    session = await _start_approval(harness, "lock-race", *ids)
    # All three RPCs lock PendingInterrupts at once; the client retries whichever meets a held lock.
    # Each resolution wakes an AwaitToolApproval that takes the lock in turn, so on a slow machine an RPC
    # can meet a held lock for longer than the default 5 s. The lock is always released, so a longer
    # retry only removes the timing margin: the test still proves every resolution applies.
    patient = AgentSessionClient(
        harness.stack.client, harness.flows.main, lock_conflict_retry_timeout=timedelta(seconds=30)
    )
    results = await asyncio.gather(
        *(patient.resolve_interrupt(session, call_id, approved=True) for call_id in ids)
    )
    assert results == [True, True, True]
    await wait_for_turn_end(harness.sessions, session, 1)
    runs = harness.tool_runs(session, harness.tools.approval_write)
    assert sorted(run.tool_call_id for run in runs) == sorted(ids)


async def test_approval_deadline_early_timer_waits_again_then_rejects(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("deadline")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(session, [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Too late.")])
    await harness.deadline_sessions.start_session(session, "Refund A-1")
    await wait_for_agent_snapshot(
        harness.deadline_sessions,
        session,
        lambda snapshot: bool(snapshot.pending_interrupts and snapshot.pending_interrupts[0].deadline),
        description="a pending approval with a deadline",
    )

    async def waiting_approval() -> str | None:
        history = await harness.stack.read_step_history(session)
        waits = [
            entry.step_execution_id
            for entry in history
            if entry.step_type == "AwaitToolApproval" and entry.event_type == WAIT_FOR_COMPLETED_EVENT
        ]
        return waits[-1] if waits else None

    execution_id = await wait_until("AwaitToolApproval to wait", waiting_approval)
    # Fire the deadline Timer long before the deadline: the Step must see the deadline has not passed.
    await harness.stack.client.skip_timer(
        session,
        StepExecutionId("AwaitToolApproval", int(execution_id.rsplit("-", 1)[1])),
        TimerId.by_condition_index(0),
    )
    await wait_until(
        "the early Timer's AwaitToolApproval to finish",
        lambda: _count_executed(harness, session, "AwaitToolApproval"),
    )
    early = await harness.deadline_sessions.get_agent_snapshot(session)
    assert [interrupt.interrupt_id for interrupt in early.pending_interrupts] == ["refund-1"]
    assert [call.status for call in early.tool_calls] == [ToolCallStatus.AWAITING_APPROVAL]

    await wait_for_turn_end(harness.deadline_sessions, session, 1)
    assert not await harness.deadline_sessions.resolve_interrupt(session, "refund-1", approved=True)
    assert not harness.tool_runs(session, harness.tools.approval_write)
    assert APPROVAL_DEADLINE_PASSED in harness.model_calls(session)[-1].model_input_text
    steps = executed_step_types(await harness.stack.read_step_history(session))
    # The early Timer's execution waited again; a later one saw the deadline pass and rejected the call.
    assert steps.count("AwaitToolApproval") >= 2 and "CallSingleAttemptTool" not in steps


async def _count_executed(harness: MatrixHarness, session: str, step_type: str) -> int:
    return executed_step_types(await harness.stack.read_step_history(session)).count(step_type)


async def test_approval_drops_the_rejection_message_and_times_are_utc_with_milliseconds(
    harness: MatrixHarness,
) -> None:
    session = harness.stack.new_session_id("approval-fields")
    write = harness.call(harness.tools.approval_write, "refund-1", gate="write")
    harness.script(session, [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Refunded.")])
    await harness.deadline_sessions.start_session(session, "Refund A-1")
    pending = await wait_for_agent_snapshot(
        harness.deadline_sessions,
        session,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        description="the approval",
    )
    utc_millis = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    assert utc_millis.match(pending.created_at), pending
    assert pending.deadline is not None and utc_millis.match(pending.deadline), pending
    assert await harness.deadline_sessions.resolve_interrupt(
        session, "refund-1", approved=True, rejection_message="ignored on approval"
    )
    await harness.stack.gate(session, "write").wait_until_reached()
    running = await harness.deadline_sessions.get_agent_snapshot(session)
    assert [(call.status, call.rejection_message) for call in running.tool_calls] == [
        (ToolCallStatus.APPROVED, None)
    ]
    harness.stack.gate(session, "write").release()
    await wait_for_turn_end(harness.deadline_sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
