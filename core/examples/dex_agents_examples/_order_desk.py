"""The adapters' order-desk demo: live text, a refund approved across a Worker kill, and its ledger.

Each adapter's ``examples/order_desk`` builds its framework's agent and Flow around the shop's tools
(`lookup_order` and `refund_order`), and its ``__main__`` hands them to `order_desk_main`, which runs the
demo around them with `run_approval_demo`. The refund tool appends one JSON line per real
run to the ledger file named by the Worker's ``ledger_env`` variable, so the ledger shows that the refund
ran exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dex_agents_examples._approval import ApprovalDecision, ApprovalDemo, run_approval_demo
from dex_agents_examples._shop import ORDER_DESK_LEDGER_ENV, ORDER_DESK_REQUEST

from dex_agents import (
    AgentEventType,
    AgentInterrupt,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    MessageRole,
)
from dex_agents.testing import EXECUTE_COMPLETED_EVENT, EXECUTE_FAILED_EVENT, AgentTestStack, WorkerProcess

__all__ = ["OrderDeskDemo", "order_desk_main", "print_live_events", "run_order_desk_demo"]


@dataclass(frozen=True)
class OrderDeskDemo:
    """One adapter's order desk.

    Attributes:
        build_flow: Builds the order desk's session Flow for a model name (``scripted`` by default).
        worker_module: The Worker module (``examples.order_desk.worker``); it builds the Flow for the model
            named by ``model_env``.
        worker_cwd: The package directory, so ``worker_module`` imports.
        model_help: The ``--model`` option's help: which model names the framework takes.
        session_id: The demo session's ID, the start of the refund's idempotency key.
        request: The customer's message.
        ledger_env: The Worker's environment variable naming the refund ledger file.
        model_env: The Worker's environment variable naming the model.
        prog: How the demo is run, for ``--help``.
        transcript_footer: Prints what the adapter adds below the transcript, or ``None``.
    """

    build_flow: Callable[[str], AgentSessionFlow]
    worker_module: str
    worker_cwd: Path
    model_help: str
    session_id: str = "order-desk-1"
    request: str = ORDER_DESK_REQUEST
    ledger_env: str = ORDER_DESK_LEDGER_ENV
    model_env: str = "ORDER_DESK_MODEL"
    prog: str = "python -m examples.order_desk"
    transcript_footer: Callable[[AgentSnapshot], None] | None = None


def order_desk_main(demo: OrderDeskDemo, argv: Sequence[str] | None = None) -> int:
    """Run the order-desk demo from the command line: ``[--model NAME] [--yes]``.

    Args:
        demo: The adapter's order desk.
        argv: The arguments; ``None`` for ``sys.argv``.

    Returns:
        The exit status: 0 when the turn completed with one refund in the ledger (none when rejected).
    """
    parser = argparse.ArgumentParser(prog=demo.prog, description="The order-desk demo.")
    parser.add_argument("--model", default="scripted", help=demo.model_help)
    parser.add_argument("--yes", action="store_true", help="approve the refund without asking")
    arguments = parser.parse_args(argv)
    interactive = not arguments.yes and sys.stdin.isatty()
    return asyncio.run(run_order_desk_demo(demo, arguments.model, interactive=interactive))


async def run_order_desk_demo(demo: OrderDeskDemo, model_name: str, *, interactive: bool) -> int:
    """Run the order-desk demo on a private devserver and return its exit status.

    Args:
        demo: The adapter's order desk.
        model_name: The model the Flow and the Worker use.
        interactive: Ask at the terminal; otherwise approve by itself (``--yes``, or no terminal).

    Returns:
        0 when the turn completed with one refund in the ledger (none when rejected), otherwise 1.
    """
    with tempfile.TemporaryDirectory(prefix="order-desk-") as directory:
        state_dir = Path(directory)
        ledger = state_dir / "ledger.jsonl"
        # The demo borrows dex_agents.testing's stack to run a private devserver and Worker processes it can
        # kill. An application points its Client and Workers at its Dex Server instead.
        session = ApprovalDemo(
            demo.build_flow(model_name),
            demo.worker_module,
            demo.worker_cwd,
            demo.session_id,
            demo.request,
            worker_env={demo.model_env: model_name, demo.ledger_env: str(ledger)},
            approval_timeout=180,
            turn_timeout=120,
            live_events=print_live_events,
        )
        hooks = _OrderDeskHooks(demo, model_name, ledger, interactive)
        return await run_approval_demo(session, state_dir, hooks)


async def print_live_events(sessions: AgentSessionClient, session_id: str) -> None:
    """Print the session's events as they arrive, text as it streams, until the first turn ends.

    Args:
        sessions: The session client.
        session_id: The session to follow.
    """
    model_call = ("", 0)
    async for message in sessions.follow_agent_events(session_id):
        event = message.value
        payload = json.loads(event.payload)
        if event.type == AgentEventType.TEXT_DELTA:
            # Each model call is its own Step execution; its text starts a new assistant line.
            if event.step_execution_id != model_call[0]:
                print("\nassistant: ", end="")
            elif event.attempt != model_call[1]:
                # A failed call (a provider error, a cut stream) is answered again by a new attempt, whose
                # text replaces what the failed one streamed.
                print(f"\n  [model call retried: attempt {event.attempt}]\nassistant: ", end="")
            model_call = (event.step_execution_id, event.attempt)
            print(payload["text"], end="", flush=True)
        elif event.type == AgentEventType.TOOL_CALL_DEFERRED:
            approval = ", needs approval" if payload["requires_approval"] else ""
            print(f"\n  [tool call] {payload['tool_name']} ({payload['effect']}{approval})", flush=True)
        elif event.type == AgentEventType.TOOL_CALL_FINISHED:
            print(f"  [tool call finished] {payload['tool_name']}: {payload['status']}", flush=True)
        elif event.type in (AgentEventType.TURN_COMPLETED, AgentEventType.TURN_FAILED):
            print(f"\n  [{event.type}]", flush=True)
            return


class _OrderDeskHooks:
    def __init__(self, demo: OrderDeskDemo, model_name: str, ledger: Path, interactive: bool) -> None:
        self._demo = demo
        self._model_name = model_name
        self._ledger = ledger
        self._interactive = interactive

    def started(self, stack: AgentTestStack, worker: WorkerProcess) -> None:
        print(f"devserver at {stack.server_address}; Worker pid {worker.pid}; model {self._model_name}\n")
        print(f"user: {self._demo.request}", end="", flush=True)

    def approval_waits(self, interrupt: AgentInterrupt) -> None:
        del interrupt  # the live events already showed the call that needs approval

    def worker_replaced(self, killed: WorkerProcess, replacement: WorkerProcess) -> None:
        print(
            f"\n  [Worker {killed.pid} killed with SIGKILL while the approval waits; "
            f"replacement Worker pid {replacement.pid}]"
        )

    async def decide(self, stack: AgentTestStack, interrupt: AgentInterrupt) -> ApprovalDecision:
        """Ask the person at the terminal, or approve when nobody can answer."""
        del stack
        question = f"Approve {interrupt.tool_name} {interrupt.arguments}? [y/N] "
        if not self._interactive:
            print(f"\n{question}y  (approved automatically: --yes, or no terminal)")
            return ApprovalDecision(approved=True)
        answer = (await asyncio.to_thread(input, "\n" + question)).strip().lower()
        if answer in ("y", "yes"):
            return ApprovalDecision(approved=True)
        reason = (await asyncio.to_thread(input, "Why not? ")).strip()
        return ApprovalDecision(approved=False, rejection_message=reason or None)

    async def report(self, stack: AgentTestStack, snapshot: AgentSnapshot, approved: bool) -> int:
        self._print_transcript(snapshot)
        print("\nStep history (completed and failed executions):")
        for entry in await stack.read_step_history(self._demo.session_id):
            if entry.event_type in (EXECUTE_COMPLETED_EVENT, EXECUTE_FAILED_EVENT):
                outcome = "failed" if entry.event_type == EXECUTE_FAILED_EVENT else "ok"
                # A tool Step's input is its tool call ID; ResumeTurn's the number of results it awaits.
                step_input = f"({entry.step_input})" if isinstance(entry.step_input, (str, int)) else ""
                print(f"  {entry.step_type}{step_input} attempt {entry.final_attempt}: {outcome}")
        refunds = self._ledger.read_text(encoding="utf-8").splitlines() if self._ledger.exists() else []
        print(f"\nRefund ledger: {len(refunds)} refund(s)")
        for line in refunds:
            print(f"  {line}")
        expected = 1 if approved else 0
        if len(refunds) != expected or snapshot.state is None or snapshot.state.last_turn_error:
            print(f"error: expected {expected} refund(s) and a completed turn", file=sys.stderr)
            return 1
        return 0

    def _print_transcript(self, snapshot: AgentSnapshot) -> None:
        print("\nTranscript (stored messages):")
        for message in snapshot.messages:
            if message.role == MessageRole.TOOL:
                call = f"{message.tool_name} {message.tool_arguments}"
                print(f"  {message.sequence:>2} tool      {call} -> {message.tool_output}")
            elif message.tool_name:
                print(f"  {message.sequence:>2} assistant calls {message.tool_name} {message.tool_arguments}")
            elif message.text is None and message.role == MessageRole.ASSISTANT:
                # Several calls in one response have no single tool name; the tool messages below name them.
                print(f"  {message.sequence:>2} assistant calls the tools below")
            else:
                print(f"  {message.sequence:>2} {message.role.value:<9} {message.text}")
        usage = snapshot.usage
        tokens = f"{usage.input_tokens} input / {usage.output_tokens} output tokens"
        print(f"  usage: {usage.model_calls} model calls, {tokens}")
        if self._demo.transcript_footer is not None:
            self._demo.transcript_footer(snapshot)
