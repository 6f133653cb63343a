"""The demo driver: one session whose write waits for approval while its Worker is killed and replaced.

Every example in this repository shows the same thing: a session on a private devserver asks for a write
that needs approval, the Worker is SIGKILLed while the approval waits, a replacement Worker takes over, the
write is approved (or not) and runs exactly once. `run_approval_demo` runs that sequence; what an example
prints and how it asks are its `DemoHooks`.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from dex_agents import AgentInterrupt, AgentSessionClient, AgentSessionFlow, AgentSnapshot
from dex_agents.testing import AgentTestStack, WorkerProcess

__all__ = ["ApprovalDecision", "ApprovalDemo", "DemoHooks", "run_approval_demo"]

_LIVE_EVENTS_DRAIN_SECONDS = 10.0
_APPROVAL_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class ApprovalDecision:
    """The answer to the approval.

    Attributes:
        approved: Whether the write may run.
        rejection_message: What the model reads when it may not; ``None`` for the session's default.
    """

    approved: bool
    rejection_message: str | None = None


@dataclass(frozen=True)
class ApprovalDemo:
    """The session a demo runs and the Worker that serves it.

    Attributes:
        flow: The session Flow; the Worker module builds the same one.
        worker_module: What the Worker child runs (``python -m <worker_module>``).
        worker_cwd: Where the Worker child starts, so ``worker_module`` imports.
        session_id: The demo session's ID.
        request: The user message that starts the session.
        worker_env: Extra environment of every Worker child.
        approval_timeout: Seconds to wait for the approval (or for a turn that ends without one).
        turn_timeout: Seconds to wait for the turn to end once the approval is answered.
        live_events: Reads the session's events while the turn runs, for a demo that prints them as they
            arrive; it should return once the turn has ended. ``None`` for a demo that prints none.
    """

    flow: AgentSessionFlow
    worker_module: str
    worker_cwd: Path
    session_id: str
    request: str
    worker_env: Mapping[str, str] = field(default_factory=dict[str, str])
    approval_timeout: float = _APPROVAL_WAIT_SECONDS
    turn_timeout: float = 60.0
    live_events: Callable[[AgentSessionClient, str], Coroutine[Any, Any, None]] | None = None


class DemoHooks(Protocol):
    """What a demo prints and asks at each point of `run_approval_demo`."""

    def started(self, stack: AgentTestStack, worker: WorkerProcess) -> None:
        """The server and the first Worker run; the session starts next."""
        ...

    def approval_waits(self, interrupt: AgentInterrupt) -> None:
        """The session waits for ``interrupt``; its Worker is killed next."""
        ...

    def worker_replaced(self, killed: WorkerProcess, replacement: WorkerProcess) -> None:
        """``killed`` was SIGKILLed while the approval waited and ``replacement`` runs."""
        ...

    async def decide(self, stack: AgentTestStack, interrupt: AgentInterrupt) -> ApprovalDecision:
        """Answer the approval, at the terminal or by itself."""
        ...

    async def report(self, stack: AgentTestStack, snapshot: AgentSnapshot, approved: bool) -> int:
        """Print what the ended turn left and return the demo's exit status (0 when it did what it shows)."""
        ...


async def run_approval_demo(demo: ApprovalDemo, state_dir: Path, hooks: DemoHooks) -> int:
    """Run the demo session on a private devserver and return its exit status.

    Args:
        demo: The session and its Worker.
        state_dir: An empty directory for the server, the Workers and the scripts.
        hooks: What the demo prints and how it answers the approval.

    Returns:
        ``hooks.report``'s status, or 1 when the turn ended without asking for the approval or the
        approval was no longer pending when answered.
    """
    async with AgentTestStack(
        state_dir, [demo.flow], demo.worker_module, worker_cwd=demo.worker_cwd, worker_env=demo.worker_env
    ) as stack:
        sessions = stack.sessions(demo.flow)
        worker = await stack.start_worker()
        hooks.started(stack, worker)
        await sessions.start_session(demo.session_id, demo.request)
        async with _reading_live_events(demo, sessions) as live:
            waiting = await sessions.wait_for_interrupt(
                demo.session_id, timeout=timedelta(seconds=demo.approval_timeout)
            )
            if waiting is None:
                ended = await sessions.wait_for_turn_end(demo.session_id)
                print(f"\nThe turn ended before any approval was asked: {ended.error}", file=sys.stderr)
                return 1
            hooks.approval_waits(waiting)
            worker.kill()
            hooks.worker_replaced(worker, await stack.start_worker())
            decision = await hooks.decide(stack, waiting)
            if not await sessions.resolve_interrupt(
                demo.session_id,
                waiting.interrupt_id,
                approved=decision.approved,
                rejection_message=decision.rejection_message,
            ):
                print("the approval was no longer pending", file=sys.stderr)
                return 1
            ended = await sessions.wait_for_turn_end(
                demo.session_id, timeout=timedelta(seconds=demo.turn_timeout)
            )
            if live is not None:
                # The turn's last events may still be on their way; let the reader show them.
                await asyncio.wait({live}, timeout=_LIVE_EVENTS_DRAIN_SECONDS)
        return await hooks.report(stack, ended.snapshot, decision.approved)


@contextlib.asynccontextmanager
async def _reading_live_events(
    demo: ApprovalDemo, sessions: AgentSessionClient
) -> AsyncIterator[asyncio.Task[None] | None]:
    if demo.live_events is None:
        yield None
        return
    task = asyncio.create_task(demo.live_events(sessions, demo.session_id))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
