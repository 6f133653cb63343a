"""Plain console hooks for the refund examples of the core and the LangGraph adapter.

One line per point of `run_approval_demo`, then the stored transcript and the completed Step executions;
the example prints its real tool runs itself, since where it counts them is its own.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from dex_agents_examples._approval import ApprovalDecision

from dex_agents import AgentInterrupt, AgentSnapshot, MessageRole
from dex_agents.testing import EXECUTE_COMPLETED_EVENT, AgentTestStack, WorkerProcess

__all__ = ["RefundExampleHooks"]


class RefundExampleHooks:
    """`DemoHooks` that print the refund example's plain console lines.

    Args:
        session_id: The example session, whose Step history is printed.
        assume_yes: Approve without asking; the hooks also approve when stdin is not a terminal.
        print_tool_runs: Prints the real tool runs once the turn has ended and returns the exit status;
            it receives the stack and whether the refund was approved.
        on_rejected: Runs when the person rejects the refund, before the rejection is sent (a scripted
            model is told how to answer it), or ``None``.
        show_usage: Print the session's model calls and input tokens below the transcript.
    """

    def __init__(
        self,
        session_id: str,
        *,
        assume_yes: bool,
        print_tool_runs: Callable[[AgentTestStack, bool], int],
        on_rejected: Callable[[AgentTestStack], None] | None = None,
        show_usage: bool = False,
    ) -> None:
        self._session_id = session_id
        self._assume_yes = assume_yes
        self._print_tool_runs = print_tool_runs
        self._on_rejected = on_rejected
        self._show_usage = show_usage

    def started(self, stack: AgentTestStack, worker: WorkerProcess) -> None:
        """Print the server's address and the Worker's pid."""
        print(f"Dex server at {stack.server_address}")
        print(f"Worker started (pid {worker.pid})")

    def approval_waits(self, interrupt: AgentInterrupt) -> None:
        """Print the call that waits."""
        print(f"The session waits for approval of {interrupt.tool_name} ({interrupt.interrupt_id})")

    def worker_replaced(self, killed: WorkerProcess, replacement: WorkerProcess) -> None:
        """Print the killed Worker and its replacement."""
        print(f"Worker {killed.pid} killed with SIGKILL while the approval waits")
        print(f"Replacement Worker started (pid {replacement.pid})")

    async def decide(self, stack: AgentTestStack, interrupt: AgentInterrupt) -> ApprovalDecision:
        """Ask at the terminal, or approve at once with ``assume_yes`` or without a terminal."""
        question = f"Approve {interrupt.tool_name} {interrupt.arguments}? [y/N] "
        if self._assume_yes or not sys.stdin.isatty():
            print(f"{question}y (automatic)")
            return ApprovalDecision(approved=True)
        answer = await asyncio.to_thread(input, question)
        if answer.strip().lower() in ("y", "yes"):
            return ApprovalDecision(approved=True)
        if self._on_rejected is not None:
            self._on_rejected(stack)
        return ApprovalDecision(approved=False, rejection_message="Not approved.")

    async def report(self, stack: AgentTestStack, snapshot: AgentSnapshot, approved: bool) -> int:
        """Print the transcript, the completed Step executions and the real tool runs."""
        print("\nTranscript:")
        for message in snapshot.messages:
            if message.role == MessageRole.TOOL:
                print(f"  tool      {message.tool_name} -> {message.tool_output}")
            elif message.tool_name:
                print(f"  assistant calls {message.tool_name} {message.tool_arguments}")
            else:
                print(f"  {message.role.value:<9} {message.text}")
        if self._show_usage:
            usage = snapshot.usage
            print(f"\nUsage: {usage.model_calls} model calls, {usage.input_tokens} input tokens")
        print("\nStep history (completed executes):")
        for entry in await stack.read_step_history(self._session_id):
            if entry.event_type == EXECUTE_COMPLETED_EVENT:
                step = f"{entry.step_execution_id:<26} attempt {entry.final_attempt}"
                print(f"  {step}  input {entry.step_input!r}")
        return self._print_tool_runs(stack, approved)
