"""Throughput and latency with 1, 2 and 4 Worker processes behind one devserver.

    uv run python -m bench.scale [--workers 1,2,4] [--sessions 50,200,1000] [--turns 3]

For each number of Workers (pull mode, each sized by `agent_worker_task_slots` for its share of the
sessions) and each number of concurrent sessions, every session takes ``--turns`` turns one after another
(``start_session``, then ``send_user_message``), all sessions at once. A turn is the framework-free turn of
``bench.agent`` (a model call, a read tool, a model call: four Steps), timed from the client's call to
its ``turn_completed`` event. Per cell it prints the turns per second, the p50 and p99 turn, the CPU each
process spent per turn (each Worker's on average, the devserver's, the client's), and how many sessions had
their Steps run by more than one Worker (the tool reports which Worker ran it): sessions are not pinned to
Workers, so a turn's Steps go to whichever Worker is free.

Print the load average with the figures: on a machine with fewer cores than processes, more Workers share
the same cores, and the devserver's single event loop is the ceiling to look for.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dex_agents_bench import process_cpu_seconds
from dex_agents_bench._measure import CLIENT_PROCESS, percentile, wait_for_turn_completed

from bench.agent import QUESTION, build_flow
from dex_agents import AgentSessionClient, MessageRole, agent_worker_task_slots
from dex_agents.testing import AgentTestStack

CORE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Cell:
    """The figures of one number of Workers and one number of concurrent sessions."""

    workers: int
    sessions: int
    turns: int
    elapsed: float
    durations: tuple[float, ...]
    cpu: dict[str, float]
    spread_sessions: int

    def line(self) -> str:
        """One table row: throughput, latency, CPU per turn and sessions served by several Workers."""
        milliseconds = [duration * 1000 for duration in self.durations]
        per_turn = {name: seconds * 1000 / self.turns for name, seconds in self.cpu.items()}
        worker = per_turn.get("worker", 0.0) / self.workers
        return (
            f"| {self.workers} | {self.sessions} | {self.turns / self.elapsed:.1f} "
            f"| {statistics.median(milliseconds):.0f} | {percentile(milliseconds, 0.99):.0f} "
            f"| {worker:.1f} | {per_turn.get('devserver', 0.0):.1f} "
            f"| {per_turn.get(CLIENT_PROCESS, 0.0):.1f} "
            f"| {self.spread_sessions} of {self.sessions} |"
        )


async def _session_turns(
    sessions: AgentSessionClient, session_id: str, turns: int, durations: list[float]
) -> None:
    token = ""
    for number in range(turns):
        started = time.perf_counter()
        if number == 0:
            await sessions.start_session(session_id, QUESTION)
        else:
            assert await sessions.send_user_message(session_id, QUESTION)
        token = await wait_for_turn_completed(sessions, session_id, token)
        durations.append(time.perf_counter() - started)


async def _workers_of(sessions: AgentSessionClient, session_id: str) -> set[int]:
    snapshot = await sessions.get_agent_snapshot(session_id)
    return {
        int(json.loads(message.tool_output or "{}")["worker_pid"])
        for message in snapshot.messages
        if message.role == MessageRole.TOOL
    }


async def run_cell(workers: int, concurrent: int, turns: int) -> Cell:
    """Run ``concurrent`` sessions of ``turns`` turns each against ``workers`` Worker processes."""
    flow = build_flow()
    slots = agent_worker_task_slots(max_concurrent_turns=-(-concurrent // workers), max_parallel_tool_calls=1)
    with tempfile.TemporaryDirectory(prefix="scale-") as directory:
        async with AgentTestStack(
            Path(directory),
            [flow],
            "bench.worker",
            worker_cwd=CORE_DIR,
            max_concurrent_tasks=slots,
            # A thousand sessions queue more tasks than two cores clear in the default 10 s dispatch wait,
            # and an RPC that waits longer fails; a server sized for this load waits as long as it takes.
            server_args=("--dispatch-wait", "300"),
        ) as stack:
            for _ in range(workers):
                await stack.start_worker()
            sessions = stack.sessions(flow)
            await _session_turns(sessions, "warm-up", 1, [])
            durations: list[float] = []
            before = process_cpu_seconds()
            started = time.perf_counter()
            ids = [f"s-{number}" for number in range(concurrent)]
            await asyncio.gather(*(_session_turns(sessions, session, turns, durations) for session in ids))
            elapsed = time.perf_counter() - started
            after = process_cpu_seconds()
            served = await asyncio.gather(*(_workers_of(sessions, session) for session in ids))
    cpu = {name: after[name] - spent for name, spent in before.items() if name in after}
    spread = sum(1 for pids in served if len(pids) > 1)
    return Cell(workers, concurrent, len(durations), elapsed, tuple(durations), cpu, spread)


def _numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


async def main() -> None:
    """Parse the options, run every cell and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--workers", type=_numbers, default=[1, 2, 4])
    parser.add_argument("--sessions", type=_numbers, default=[50, 200, 1000])
    parser.add_argument("--turns", type=int, default=3)
    options = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; each session takes {options.turns} turns (model, read tool, model)")
    print(
        "| Workers | sessions at once | turns/s | p50 ms | p99 ms | CPU ms/turn: each Worker | devserver"
        " | client | sessions on 2+ Workers |"
    )
    print("| --- " * 9 + "|")
    for workers in options.workers:
        for concurrent in options.sessions:
            cell = await run_cell(workers, concurrent, options.turns)
            print(cell.line(), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    asyncio.run(main())
