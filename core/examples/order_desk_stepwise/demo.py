"""The Stepwise order desk's demo: a plan the user approves, then a refund approved across a Worker kill.

The adapters' order desk (`dex_agents_examples.order_desk_main`) starts with the refund; Stepwise has plan
mode, so this session starts with a planning turn. The customer's message is sent with ``plan_mode=True``: the
agent may only draft the plan (``write_todos``), which the demo prints and the user approves with
``execute_plan``. The executing turn then looks the order up and asks to refund it; while that approval
waits, the demo SIGKILLs the Worker and starts another, and the approved refund runs exactly once. The
demo borrows ``dex_agents.testing``'s stack to run a private devserver and Worker processes it can kill.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from dex import LongPollTimeoutError
from dex_agents_examples import ORDER_DESK_LEDGER_ENV, ORDER_DESK_REQUEST

from dex_agents import (
    AgentEventType,
    AgentInterrupt,
    AgentSessionClient,
    AgentSessionStatus,
    AgentSnapshot,
    MessageRole,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    AgentTestStack,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from examples.order_desk_stepwise.agent import build_flow

SESSION_ID = "order-desk-1"
WORKER_MODULE = "examples.order_desk_stepwise.worker"
CORE_DIR = Path(__file__).resolve().parents[2]
_TURN_SECONDS = 120.0


@dataclass
class _LiveEvents:
    """Prints the session's events as they arrive, text as it streams, and counts the turns that ended."""

    sessions: AgentSessionClient
    turns_ended: int = 0
    turn_ended: asyncio.Event = field(default_factory=asyncio.Event)

    async def follow(self) -> None:
        token = ""
        model_call = ("", 0)
        while True:
            try:
                message = await self.sessions.read_agent_event(
                    SESSION_ID, token, timeout=timedelta(seconds=5)
                )
            except LongPollTimeoutError:
                continue
            token = message.resume_token
            event = message.value
            payload = json.loads(event.payload)
            if event.type == AgentEventType.TEXT_DELTA:
                # Each model call is its own Step execution; its text starts a new assistant line.
                if event.step_execution_id != model_call[0]:
                    print("\nassistant: ", end="")
                elif event.attempt != model_call[1]:
                    # A failed call (a provider error, a cut stream) is answered again by a new attempt,
                    # whose text replaces what the failed one streamed.
                    print(f"\n  [model call retried: attempt {event.attempt}]\nassistant: ", end="")
                model_call = (event.step_execution_id, event.attempt)
                print(payload["text"], end="", flush=True)
            elif event.type == AgentEventType.TOOL_CALL_DEFERRED:
                approval = ", needs approval" if payload["requires_approval"] else ""
                print(f"\n  [tool call] {payload['tool_name']} ({payload['effect']}{approval})", flush=True)
            elif event.type == AgentEventType.PLAN_UPDATED:
                print(f"  [plan revision {payload['revision']}: {payload['status']}]", flush=True)
            elif event.type == AgentEventType.PLAN_EXECUTION_STARTED:
                print(
                    f"  [plan revision {payload['revision']} approved: the executing turn starts]", flush=True
                )
            elif event.type in (AgentEventType.TURN_COMPLETED, AgentEventType.TURN_FAILED):
                print(f"\n  [{event.type}]", flush=True)
                self.turns_ended += 1
                self.turn_ended.set()

    async def wait_for_turn(self, count: int) -> None:
        """Wait until ``count`` turns ended and were printed (the snapshot decides; printing only follows)."""
        async with asyncio.timeout(_TURN_SECONDS):
            while self.turns_ended < count:
                self.turn_ended.clear()
                await self.turn_ended.wait()


async def _ask(question: str, interactive: bool) -> bool:
    """Ask the person at the terminal, or say yes when nobody can answer."""
    if not interactive:
        print(f"\n{question}y  (approved automatically: --yes, or no terminal)")
        return True
    answer = await asyncio.to_thread(input, "\n" + question)
    return answer.strip().lower() in ("y", "yes")


def _print_plan(snapshot: AgentSnapshot) -> None:
    plan = snapshot.plan
    if plan is None:
        print("\nThe agent wrote no plan.")
        return
    print(f"\nPlan revision {plan.revision} ({plan.status.value}):")
    for number, task in enumerate(plan.tasks, 1):
        print(f"  {number}. [{task.status.value}] {task.content}")


def _print_transcript(snapshot: AgentSnapshot) -> None:
    print("\nTranscript (stored messages):")
    for message in snapshot.messages:
        if message.role == MessageRole.TOOL:
            call = f"{message.tool_name} {message.tool_arguments}"
            print(f"  {message.sequence:>2} tool      {call} -> {message.tool_output}")
        elif message.tool_name:
            print(f"  {message.sequence:>2} assistant calls {message.tool_name} {message.tool_arguments}")
        else:
            print(f"  {message.sequence:>2} {message.role.value:<9} {message.text}")
    usage = snapshot.usage
    print(
        f"  usage: {usage.model_calls} model calls, {usage.input_tokens} input / {usage.output_tokens} output"
    )


async def _print_steps(stack: AgentTestStack) -> None:
    print("\nStep history (completed and failed executions):")
    for entry in await stack.read_step_history(SESSION_ID):
        if entry.event_type in (EXECUTE_COMPLETED_EVENT, EXECUTE_FAILED_EVENT):
            outcome = "failed" if entry.event_type == EXECUTE_FAILED_EVENT else "ok"
            # A tool Step's input is its tool call ID; ResumeTurn's the number of results it awaits.
            step_input = f"({entry.step_input})" if isinstance(entry.step_input, (str, int)) else ""
            print(f"  {entry.step_type}{step_input} attempt {entry.final_attempt}: {outcome}")


def _approval_or_turn_end(snapshot: AgentSnapshot) -> AgentInterrupt | AgentSnapshot | None:
    """The refund's approval, or the snapshot of an executing turn that ended without one."""
    if snapshot.pending_interrupts:
        return snapshot.pending_interrupts[0]
    state = snapshot.state
    ended = (
        state is not None
        and state.turn_count >= 2
        and state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE
    )
    return snapshot if ended else None


async def run_plan_demo(model_name: str, *, interactive: bool) -> int:
    """Run the demo session on a private devserver and return its exit status.

    Args:
        model_name: ``scripted``, or a LiteLLM model string.
        interactive: Ask at the terminal; otherwise approve by itself (``--yes``, or no terminal).

    Returns:
        0 when the session did what the user approved: one refund, or none when the plan or the refund
        was declined; otherwise 1.
    """
    with tempfile.TemporaryDirectory(prefix="order-desk-") as directory:
        state_dir = Path(directory)
        ledger = state_dir / "ledger.jsonl"
        flow = build_flow(model_name)
        worker_env = {"ORDER_DESK_MODEL": model_name, ORDER_DESK_LEDGER_ENV: str(ledger)}
        async with AgentTestStack(
            state_dir, [flow], WORKER_MODULE, worker_cwd=CORE_DIR, worker_env=worker_env
        ) as stack:
            sessions = stack.sessions(flow)
            worker = await stack.start_worker()
            print(f"devserver at {stack.server_address}; Worker pid {worker.pid}; model {model_name}\n")
            live = _LiveEvents(sessions)
            reader = asyncio.create_task(live.follow())
            try:
                await sessions.start_session(SESSION_ID)
                print(f"user (plan mode): {ORDER_DESK_REQUEST}", end="", flush=True)
                await sessions.send_user_message(SESSION_ID, ORDER_DESK_REQUEST, plan_mode=True)
                await wait_for_turn_end(sessions, SESSION_ID, 1, timeout=_TURN_SECONDS)
                await live.wait_for_turn(1)
                expected = await _approve_and_execute(stack, sessions, live, interactive)
            finally:
                reader.cancel()
            snapshot = await sessions.get_agent_snapshot(SESSION_ID)
            _print_transcript(snapshot)
            _print_plan(snapshot)
            await _print_steps(stack)
            refunds = ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []
            print(f"\nRefund ledger: {len(refunds)} refund(s)")
            for line in refunds:
                print(f"  {line}")
            state = snapshot.state
            if expected is None or len(refunds) != expected or state is None or state.last_turn_error:
                print(f"error: expected {expected} refund(s) and completed turns", file=sys.stderr)
                return 1
            return 0


async def _approve_and_execute(
    stack: AgentTestStack, sessions: AgentSessionClient, live: _LiveEvents, interactive: bool
) -> int | None:
    """Approve the plan, then the refund across a Worker kill; return the refunds to expect, or `None`."""
    planned = await sessions.get_agent_snapshot(SESSION_ID)
    _print_plan(planned)
    plan = planned.plan
    if plan is None or not await _ask(f"Approve plan revision {plan.revision}? [y/N] ", interactive):
        print("The plan was not approved, so nothing runs.")
        return 0
    if not await sessions.execute_plan(SESSION_ID, plan.revision):
        print("error: the session refused to execute the plan", file=sys.stderr)
        return None
    waiting = await wait_for_agent_snapshot(
        sessions,
        SESSION_ID,
        _approval_or_turn_end,
        description="the refund's approval",
        timeout=_TURN_SECONDS,
    )
    if not isinstance(waiting, AgentInterrupt):
        print("error: the executing turn ended without asking to refund", file=sys.stderr)
        return None
    killed = stack.workers[-1]
    killed.kill()
    replacement = await stack.start_worker()
    print(
        f"\n  [Worker {killed.pid} killed with SIGKILL while the approval waits; "
        f"replacement Worker pid {replacement.pid}]"
    )
    approved = await _ask(f"Approve {waiting.tool_name} {waiting.arguments}? [y/N] ", interactive)
    if not await sessions.resolve_interrupt(SESSION_ID, waiting.interrupt_id, approved=approved):
        print("error: the approval was no longer pending", file=sys.stderr)
        return None
    await wait_for_turn_end(sessions, SESSION_ID, 2, timeout=_TURN_SECONDS)
    await live.wait_for_turn(2)
    return 1 if approved else 0
