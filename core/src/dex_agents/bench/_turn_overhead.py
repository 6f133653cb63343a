"""What durability costs per turn: one agent turn timed in process and as a session on a devserver."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from dex import LongPollTimeoutError

from dex_agents import AgentEventType, AgentSessionClient, AgentSessionFlow
from dex_agents.testing import AgentTestStack

__all__ = ["DurableTurn", "InProcessTurn", "run_turn_overhead_bench"]


@dataclass(frozen=True)
class InProcessTurn:
    """The turn as an application without Dex runs it.

    Attributes:
        label: How the figures name it ("create_agent astream").
        run: Runs turn ``number`` (zero-based) once; only this call is timed.
        prepare: Runs before turn ``number`` outside the timing, for per-turn set-up such as a
            framework session to run it in.
        warm_up: Run one turn more first and leave it out, for a framework with lazy imports.
    """

    label: str
    run: Callable[[int], Awaitable[object]]
    prepare: Callable[[int], Awaitable[object]] | None = None
    warm_up: bool = False


@dataclass(frozen=True)
class DurableTurn:
    """The same turn as a session on a private devserver with one pull Worker child.

    Attributes:
        flow: The session Flow; the Worker module serves the same one.
        worker_module: The Worker child's module (``bench.worker``).
        worker_cwd: Where the Worker child starts, so ``worker_module`` imports.
        question: The user message that starts each session.
        message_kinds: What the stored messages of one turn are, for the figures
            ("user, assistant, tool, assistant").
    """

    flow: AgentSessionFlow
    worker_module: str
    worker_cwd: Path
    question: str
    message_kinds: str


async def run_turn_overhead_bench(
    turns: int,
    in_process: InProcessTurn,
    durable: DurableTurn,
    run_state_bytes: Callable[[], Awaitable[int]],
) -> None:
    """Time ``turns`` turns both ways and print the medians, the overhead and what the session stores.

    The durable turn is timed from ``start_session`` to the ``turn_completed`` event, after one turn that
    warms up the Worker's imports and the server's caches.

    Args:
        turns: How many timed turns each way.
        in_process: The turn without Dex.
        durable: The turn as a Dex session.
        run_state_bytes: Returns the size of the run state the session stores at the turn's tool boundary.
    """
    local = await _in_process_seconds(in_process, turns)
    seconds, item_sizes = await _durable_seconds(durable, turns)
    run_state = await run_state_bytes()
    print(_describe(f"in process ({in_process.label})", local))
    print(_describe("durable session (devserver, 1 Worker)", seconds))
    overhead = statistics.median(seconds) - statistics.median(local)
    print(f"durable overhead per turn (2 model calls + 1 tool, 5 Steps): {overhead * 1000:.1f} ms")
    print(f"run state at the tool boundary: {run_state} bytes")
    print(f"stored framework_item bytes per message ({durable.message_kinds}): {item_sizes}")


async def _in_process_seconds(turn: InProcessTurn, turns: int) -> list[float]:
    warm_ups = 1 if turn.warm_up else 0
    durations: list[float] = []
    for number in range(warm_ups + turns):
        if turn.prepare is not None:
            await turn.prepare(number)
        started = time.perf_counter()
        await turn.run(number)
        if number >= warm_ups:
            durations.append(time.perf_counter() - started)
    return durations


async def _durable_seconds(turn: DurableTurn, turns: int) -> tuple[list[float], list[int]]:
    with tempfile.TemporaryDirectory(prefix="turn-overhead-") as directory:
        async with AgentTestStack(
            Path(directory), [turn.flow], turn.worker_module, worker_cwd=turn.worker_cwd
        ) as stack:
            sessions = stack.sessions(turn.flow)
            await stack.start_worker()
            durations: list[float] = []
            for number in range(turns + 1):
                session_id = f"bench-{number}"
                started = time.perf_counter()
                await sessions.start_session(session_id, turn.question)
                await _wait_for_turn_completed(sessions, session_id)
                if number:  # the first turn warms up the Worker's imports and the server's caches
                    durations.append(time.perf_counter() - started)
            snapshot = await sessions.get_agent_snapshot("bench-1")
            return durations, [len(message.framework_item.encode()) for message in snapshot.messages]


async def _wait_for_turn_completed(sessions: AgentSessionClient, session_id: str) -> None:
    token = ""
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, timeout=timedelta(seconds=10))
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        if message.value.type == AgentEventType.TURN_COMPLETED:
            return
        if message.value.type == AgentEventType.TURN_FAILED:
            raise RuntimeError(f"turn failed: {message.value.payload}")


def _describe(label: str, durations: list[float]) -> str:
    milliseconds = sorted(duration * 1000 for duration in durations)
    p90 = milliseconds[max(0, round(0.9 * len(milliseconds)) - 1)]
    median = statistics.median(milliseconds)
    return f"{label}: median {median:.1f} ms, p90 {p90:.1f} ms over {len(milliseconds)} turns"
