"""The order-desk demo: one durable Claude Agent SDK session on a private development server.

    python -m examples.order_desk [--model scripted|<claude model>] [--yes]

It starts a devserver and a Worker process, asks the agent to refund a broken order, and shows the
session's live text as it streams. The Claude Code CLI runs the turn: it looks the order up inline (a
read) and stops at the refund, which becomes its own Step. The refund needs approval: while it waits,
the demo SIGKILLs the Worker and starts a replacement, then asks you at the terminal (or approves by
itself with `--yes` or without a terminal). At the end it prints the stored transcript, the Step
history, and the refund ledger, which shows the refund ran exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

from dex import LongPollTimeoutError
from dex_agents import AgentEventType, AgentInterrupt, AgentSessionClient, AgentSessionStatus, AgentSnapshot
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    AgentTestStack,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)

from examples.order_desk.agent import LEDGER_ENV, build_flow

PACKAGE_DIR = Path(__file__).resolve().parents[2]
SESSION_ID = "order-desk-1"
REQUEST = "Hi, my order A-17 arrived broken. Can I get my money back?"


async def print_live_events(sessions: AgentSessionClient, session_id: str) -> None:
    """Print the session's events as they arrive, text as it streams, until the first turn ends."""
    token = ""
    model_call = ""
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, timeout=timedelta(seconds=5))
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        event = message.value
        payload = json.loads(event.payload)
        if event.type == AgentEventType.TEXT_DELTA:
            # Each model call is its own Step execution; its text starts a new assistant line.
            if event.step_execution_id != model_call:
                model_call = event.step_execution_id
                print("\nassistant: ", end="")
            print(payload["text"], end="", flush=True)
        elif event.type == AgentEventType.TOOL_CALL_DEFERRED:
            approval = ", needs approval" if payload["requires_approval"] else ""
            print(f"\n  [tool call] {payload['tool_name']} ({payload['effect']}{approval})", flush=True)
        elif event.type == AgentEventType.TOOL_CALL_FINISHED:
            print(f"  [tool call finished] {payload['tool_name']}: {payload['status']}", flush=True)
        elif event.type in (AgentEventType.TURN_COMPLETED, AgentEventType.TURN_FAILED):
            print(f"\n  [{event.type}]", flush=True)
            return


def approval_or_turn_end(snapshot: AgentSnapshot) -> AgentInterrupt | AgentSnapshot | None:
    """The pending approval, or the snapshot of a turn that ended without one (such as a failed turn)."""
    if snapshot.pending_interrupts:
        return snapshot.pending_interrupts[0]
    state = snapshot.state
    if (
        state is not None
        and state.turn_count >= 1
        and state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE
    ):
        return snapshot
    return None


async def decide(interrupt: AgentInterrupt, interactive: bool) -> tuple[bool, str | None]:
    """Ask the person at the terminal, or approve when nobody can answer."""
    question = f"Approve {interrupt.tool_name} {interrupt.arguments}? [y/N] "
    if not interactive:
        print(f"\n{question}y  (approved automatically: --yes, or no terminal)")
        return True, None
    answer = (await asyncio.to_thread(input, "\n" + question)).strip().lower()
    if answer in ("y", "yes"):
        return True, None
    reason = (await asyncio.to_thread(input, "Why not? ")).strip()
    return False, reason or None


def print_transcript(snapshot: AgentSnapshot) -> None:
    print("\nTranscript (stored messages):")
    for message in snapshot.messages:
        if message.tool_name:
            call = f"{message.tool_name} {message.tool_arguments}"
            print(f"  {message.sequence:>2} tool      {call} -> {message.tool_output}")
        else:
            print(f"  {message.sequence:>2} {message.role.value:<9} {message.text}")
    usage = snapshot.usage
    tokens = f"{usage.input_tokens} input / {usage.output_tokens} output tokens"
    print(f"  usage: {usage.model_calls} model calls, {tokens}")
    stored_bytes = sum(len(message.framework_item.encode()) for message in snapshot.messages)
    print(f"  stored framework items (the CLI transcript included): {stored_bytes / 1024:.1f} KiB")


async def run_demo(model_name: str, interactive: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="order-desk-") as directory:
        state_dir = Path(directory)
        ledger = state_dir / "ledger.jsonl"
        flow = build_flow(model_name)
        # The demo borrows dex_agents.testing's stack to run a private devserver and Worker processes it can
        # kill. An application points its Client and Workers at its Dex Server instead.
        async with AgentTestStack(
            state_dir,
            [flow],
            "examples.order_desk.worker",
            worker_cwd=PACKAGE_DIR,
            worker_env={"ORDER_DESK_MODEL": model_name, LEDGER_ENV: str(ledger)},
        ) as stack:
            sessions = stack.sessions(flow)
            worker = await stack.start_worker()
            print(f"devserver at {stack.server_address}; Worker pid {worker.pid}; model {model_name}\n")
            print(f"user: {REQUEST}", end="", flush=True)
            await sessions.start_session(SESSION_ID, REQUEST)
            printer = asyncio.create_task(print_live_events(sessions, SESSION_ID))
            try:
                waiting = await wait_for_agent_snapshot(
                    sessions,
                    SESSION_ID,
                    approval_or_turn_end,
                    description="the refund's approval",
                    timeout=180,
                )
                if not isinstance(waiting, AgentInterrupt):
                    error = waiting.state.last_turn_error if waiting.state else None
                    print(f"\nThe turn ended before any approval was asked: {error}", file=sys.stderr)
                    return 1
                interrupt = waiting
                stack.kill_workers()
                replacement = await stack.start_worker()
                print(
                    f"\n  [Worker {worker.pid} killed with SIGKILL while the approval waits; "
                    f"replacement Worker pid {replacement.pid}]"
                )
                approved, reason = await decide(interrupt, interactive)
                await sessions.resolve_interrupt(
                    SESSION_ID, interrupt.interrupt_id, approved=approved, rejection_message=reason
                )
                snapshot = await wait_for_turn_end(sessions, SESSION_ID, 1, timeout=120)
                # The turn's last events may still be on their way; let the printer show them.
                await asyncio.wait({printer}, timeout=10)
            finally:
                printer.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await printer

            print_transcript(snapshot)
            print("\nStep history (completed and failed executions):")
            for entry in await stack.read_step_history(SESSION_ID):
                if entry.event_type in (EXECUTE_COMPLETED_EVENT, EXECUTE_FAILED_EVENT):
                    outcome = "failed" if entry.event_type == EXECUTE_FAILED_EVENT else "ok"
                    # A tool Step's input is its tool call ID; ResumeTurn's the number of results it awaits.
                    step_input = f"({entry.step_input})" if isinstance(entry.step_input, (str, int)) else ""
                    print(f"  {entry.step_type}{step_input} attempt {entry.final_attempt}: {outcome}")
            refunds = ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []
            print(f"\nRefund ledger: {len(refunds)} refund(s)")
            for line in refunds:
                print(f"  {line}")
            expected = 1 if approved else 0
            if len(refunds) != expected or snapshot.state is None or snapshot.state.last_turn_error:
                print(f"error: expected {expected} refund(s) and a completed turn", file=sys.stderr)
                return 1
            return 0


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.order_desk", description="The order-desk demo.")
    parser.add_argument(
        "--model",
        default="scripted",
        help="'scripted' (default, no key needed) or a Claude model name (with ANTHROPIC_API_KEY set)",
    )
    parser.add_argument("--yes", action="store_true", help="approve the refund without asking")
    arguments = parser.parse_args()
    interactive = not arguments.yes and sys.stdin.isatty()
    return asyncio.run(run_demo(arguments.model, interactive))


if __name__ == "__main__":
    sys.exit(main())
