"""What idle sessions cost: many sessions with a little history each, waiting for their next message.

    uv run python -m bench.idle [--sessions 10000] [--turns 2] [--idle-seconds 10] [--concurrency 100]

Creates ``--sessions`` sessions on one devserver (a SQLite file) with one Worker, each taking ``--turns``
turns of the framework-free turn of ``bench.agent`` (model call, read tool, model call), then leaves them
all waiting for a user message. It prints the Worker's and the devserver's resident memory before the
sessions, after them and after ``--idle-seconds`` of idling, the CPU each spent while idle, the database
file's size, how long a devserver SIGKILLed and started again on the file takes to listen, its memory
then, and the turn a few of the sessions (the oldest, a middle one, the newest) take after the restart.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from dex_agents_bench import process_cpu_seconds
from dex_agents_bench._measure import resident_mib, wait_for_turn_completed

from bench.agent import QUESTION, build_flow
from bench.worker import DECODED_CACHE_BYTES_ENV
from dex_agents import AgentSessionClient, agent_worker_task_slots
from dex_agents.testing import AgentTestStack, wait_for_turn_end

CORE_DIR = Path(__file__).resolve().parents[1]


def _memory_line(label: str) -> str:
    memory = resident_mib()
    worker, devserver = memory.get("worker", 0.0), memory.get("devserver", 0.0)
    return f"{label}: Worker {worker:.0f} MiB, devserver {devserver:.0f} MiB resident"


async def _take_turns(sessions: AgentSessionClient, session_id: str, turns: int) -> None:
    token = ""
    for number in range(turns):
        if number == 0:
            await sessions.start_session(session_id, QUESTION)
        else:
            assert await sessions.send_user_message(session_id, QUESTION)
        token = await wait_for_turn_completed(sessions, session_id, token)


async def _next_turn_seconds(sessions: AgentSessionClient, session_id: str, turns_before: int) -> float:
    started = time.perf_counter()
    assert await sessions.send_user_message(session_id, QUESTION)
    done = await wait_for_turn_end(sessions, session_id, turns_before + 1, timeout=120)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    return time.perf_counter() - started


async def main() -> None:
    """Parse the options, build the idle sessions, measure, restart the devserver and take turns."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument(
        "--decoded-cache-mib",
        type=float,
        help="bound the Worker's decoded-value cache (default: its own bound)",
    )
    options = parser.parse_args()
    flow = build_flow()
    slots = agent_worker_task_slots(max_concurrent_turns=options.concurrency, max_parallel_tool_calls=1)
    with tempfile.TemporaryDirectory(prefix="idle-") as directory:
        async with AgentTestStack(
            Path(directory), [flow], "bench.worker", worker_cwd=CORE_DIR, max_concurrent_tasks=slots
        ) as stack:
            cache = options.decoded_cache_mib
            env = {} if cache is None else {DECODED_CACHE_BYTES_ENV: str(int(cache * 2**20))}
            await stack.start_worker(env=env)
            sessions = stack.sessions(flow)
            await _take_turns(sessions, "warm-up", 1)
            print(_memory_line("after one session"))
            ids = iter(f"idle-{number}" for number in range(options.sessions))

            async def create() -> None:
                for session_id in ids:
                    await _take_turns(sessions, session_id, options.turns)

            started = time.perf_counter()
            await asyncio.gather(*(create() for _ in range(options.concurrency)))
            elapsed = time.perf_counter() - started
            print(
                f"{options.sessions} sessions of {options.turns} turns each in {elapsed:.0f} s "
                f"({options.sessions * options.turns / elapsed:.1f} turns/s)"
            )
            print(_memory_line("all sessions idle"))
            before = process_cpu_seconds()
            await asyncio.sleep(options.idle_seconds)
            after = process_cpu_seconds()
            idle_cpu = {name: (after[name] - spent) * 1000 for name, spent in before.items() if name in after}
            print(
                f"CPU while {options.sessions} sessions idle for {options.idle_seconds:g} s: "
                f"Worker {idle_cpu.get('worker', 0):.0f} ms, devserver {idle_cpu.get('devserver', 0):.0f} ms"
            )
            print(_memory_line(f"after {options.idle_seconds:g} s idle"))
            files = sorted(path for path in stack.state_dir.rglob("*.sqlite3*") if path.stat().st_size)
            sizes = ", ".join(f"{path.name} {path.stat().st_size / 2**20:.0f} MiB" for path in files)
            print(f"database files: {sizes}")
            started = time.perf_counter()
            await stack.restart_server()
            restart = time.perf_counter() - started
            print(f"devserver SIGKILLed and started again: listening after {restart:.1f} s")
            print(_memory_line("after the restart"))
            picks = sorted({0, options.sessions // 2, options.sessions - 1})
            seconds = [
                await _next_turn_seconds(sessions, f"idle-{number}", options.turns) for number in picks
            ]
            print(
                f"next turn of sessions {', '.join(f'idle-{number}' for number in picks)} after the restart: "
                + ", ".join(f"{value * 1000:.0f} ms" for value in seconds)
                + f" (median {statistics.median(seconds) * 1000:.0f} ms)"
            )
            print(_memory_line("after those turns"))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    asyncio.run(main())
