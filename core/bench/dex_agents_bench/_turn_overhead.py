"""What durability costs per turn: one agent turn timed in process and as a session on a devserver."""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dex_agents_bench._measure import TurnSeries, describe_cpu, describe_series, run_durable_turns

from dex_agents import AgentSessionFlow, agent_worker_task_slots
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
        shape: What one turn runs, named in the overhead line; an adapter whose turn takes other Steps
            says so here.
    """

    flow: AgentSessionFlow
    worker_module: str
    worker_cwd: Path
    question: str
    message_kinds: str
    shape: str = "2 model calls + 1 tool, 4 Steps"


async def run_turn_overhead_bench(
    turns: int,
    in_process: InProcessTurn,
    durable: DurableTurn,
    run_state_bytes: Callable[[], Awaitable[int]],
    *,
    concurrency: int = 20,
    concurrent_turns: int | None = None,
    peers: Sequence[InProcessTurn] = (),
) -> None:
    """Time turns in process and as sessions, one at a time and many at once, and print the figures.

    Prints, for each way: the median, p99 and max turn and p99/median; for the durable sessions also the
    turns per second and the CPU per turn of each process (the Worker, the devserver and this process,
    the client). The durable turn is timed from ``start_session`` to the ``turn_completed`` event, after
    one turn that warms up the Worker's imports and the server's caches. The overhead is the durable
    median, one session at a time, minus the in-process median.

    Args:
        turns: How many timed turns each way, one at a time.
        in_process: The turn without Dex.
        durable: The turn as a Dex session.
        run_state_bytes: Returns the size of the run state the session stores at the turn's tool boundary.
        concurrency: How many sessions run a turn at once in the throughput series.
        concurrent_turns: How many turns the throughput series runs; ``None`` for five per session.
        peers: The same turn on other durable stacks that run in this process (a checkpointer, a durable
            execution library), timed in the same run, one at a time and ``concurrency`` at once, so their
            overhead over ``in_process`` and ours compare within one run's load.
    """
    many = concurrent_turns or 5 * concurrency
    local = await _in_process_seconds(in_process, turns)
    sequential, concurrent, item_sizes = await _durable_series(durable, turns, concurrency, many)
    peer_series = [
        (
            peer,
            await _in_process_seconds(peer, turns),
            await _in_process_turns_per_second(peer, concurrency, many),
        )
        for peer in peers
    ]
    run_state = await run_state_bytes()
    print(f"load average {os.getloadavg()[0]:.2f} (other work on the machine inflates wall-clock figures)")
    print(describe_series(f"in process ({in_process.label})", local))
    _print_durable("durable, 1 session at a time", sequential)
    _print_durable(f"durable, {concurrency} sessions at once", concurrent)
    overhead = sequential.median - statistics.median(local)
    print(f"durable overhead per turn ({durable.shape}): {overhead * 1000:.1f} ms")
    for peer, durations, per_second in peer_series:
        peer_overhead = statistics.median(durations) - statistics.median(local)
        print(describe_series(f"peer ({peer.label}), 1 at a time", durations))
        ratio = f" (ours {overhead / peer_overhead:.2f}x of it)" if peer_overhead > 0 else ""
        print(
            f"  overhead per turn {peer_overhead * 1000:.1f} ms{ratio}; {concurrency} at once: "
            f"{per_second:.1f} turns/s (ours {concurrent.turns_per_second:.1f})"
        )
    print(f"run state at the tool boundary: {run_state} bytes")
    print(f"stored framework_item bytes per message ({durable.message_kinds}): {item_sizes}")


def _print_durable(label: str, series: TurnSeries) -> None:
    print(describe_series(label, series.durations) + f", {series.turns_per_second:.1f} turns/s")
    print("  " + describe_cpu(series))


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


async def _in_process_turns_per_second(turn: InProcessTurn, concurrency: int, turns: int) -> float:
    """Run ``turns`` turns ``concurrency`` at a time (numbered after the one-at-a-time series)."""
    limit = asyncio.Semaphore(concurrency)
    first = 1_000_000

    async def one(number: int) -> None:
        async with limit:
            if turn.prepare is not None:
                await turn.prepare(number)
            await turn.run(number)

    started = time.perf_counter()
    await asyncio.gather(*(one(first + index) for index in range(turns)))
    return turns / (time.perf_counter() - started)


async def _durable_series(
    turn: DurableTurn, turns: int, concurrency: int, concurrent_turns: int
) -> tuple[TurnSeries, TurnSeries, list[int]]:
    with tempfile.TemporaryDirectory(prefix="turn-overhead-") as directory:
        async with AgentTestStack(
            Path(directory),
            [turn.flow],
            turn.worker_module,
            worker_cwd=turn.worker_cwd,
            # Sized as AgentWorker sizes a Worker for this many turns at once, of one tool call each.
            max_concurrent_tasks=agent_worker_task_slots(
                max_concurrent_turns=concurrency, max_parallel_tool_calls=1
            ),
        ) as stack:
            sessions = stack.sessions(turn.flow)
            await stack.start_worker()
            # The first turn warms up the Worker's imports and the server's caches.
            await run_durable_turns(sessions, turn.question, turns=1, concurrency=1, session_prefix="warm-up")
            sequential = await run_durable_turns(
                sessions, turn.question, turns=turns, concurrency=1, session_prefix="one"
            )
            concurrent = await run_durable_turns(
                sessions,
                turn.question,
                turns=concurrent_turns,
                concurrency=concurrency,
                session_prefix="many",
            )
            snapshot = await sessions.get_agent_snapshot("one-0")
            sizes = [len(message.framework_item.encode()) for message in snapshot.messages]
            return sequential, concurrent, sizes
