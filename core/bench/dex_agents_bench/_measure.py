"""Timing durable turns one at a time and many at once, with the CPU each process spends on them."""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from dex import LongPollTimeoutError

from dex_agents import AgentEventType, AgentSessionClient

__all__ = [
    "CLIENT_PROCESS",
    "TurnSeries",
    "child_processes",
    "describe_cpu",
    "describe_series",
    "percentile",
    "process_cpu_seconds",
    "resident_mib",
    "run_durable_turns",
    "wait_for_turn_completed",
]

CLIENT_PROCESS = "client"
"""The name of this process in the CPU figures."""


def _cpu_seconds_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_processes() -> dict[int, str]:
    """This process's children by process ID, named ``devserver`` or ``worker`` (Linux only)."""
    found: dict[int, str] = {}
    for thread in os.listdir(f"/proc/{os.getpid()}/task"):
        with open(f"/proc/{os.getpid()}/task/{thread}/children", encoding="ascii") as children:
            for pid in children.read().split():
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                        words = cmdline.read().split(b"\0")
                except FileNotFoundError:
                    continue
                found[int(pid)] = "devserver" if any(b"dex_devserver" in word for word in words) else "worker"
    return found


def process_cpu_seconds() -> dict[str, float]:
    """CPU seconds (user + system) spent so far by each child process and by this one, by name."""
    seconds: dict[str, float] = {CLIENT_PROCESS: time.process_time()}
    for pid, name in child_processes().items():
        try:
            seconds[name] = seconds.get(name, 0.0) + _cpu_seconds_of(pid)
        except FileNotFoundError:
            continue
    return seconds


def resident_mib() -> dict[str, float]:
    """Resident memory of each child process (``devserver``, ``worker``), in MiB, by name (Linux only)."""
    found: dict[str, float] = {}
    for pid, name in child_processes().items():
        try:
            with open(f"/proc/{pid}/status", encoding="ascii") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        found[name] = found.get(name, 0.0) + int(line.split()[1]) / 1024
        except FileNotFoundError:
            continue
    return found


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values`` (``fraction`` 0.99 for p99)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


@dataclass(frozen=True)
class TurnSeries:
    """Turns timed from ``start_session`` to the ``turn_completed`` event.

    Attributes:
        concurrency: How many sessions ran a turn at the same time.
        durations: Each turn's seconds.
        elapsed: Wall-clock seconds of the whole series.
        cpu: CPU seconds each process spent during the series, by process name.
    """

    concurrency: int
    durations: tuple[float, ...]
    elapsed: float
    cpu: dict[str, float]

    @property
    def median(self) -> float:
        """The median turn, in seconds."""
        return statistics.median(self.durations)

    @property
    def turns_per_second(self) -> float:
        """Turns finished per wall-clock second."""
        return len(self.durations) / self.elapsed

    def cpu_per_turn(self) -> dict[str, float]:
        """CPU seconds per turn, by process, plus ``total``."""
        per_turn = {name: seconds / len(self.durations) for name, seconds in self.cpu.items()}
        per_turn["total"] = sum(per_turn.values())
        return per_turn


def describe_series(label: str, durations: Sequence[float]) -> str:
    """One line: the median, p99 and max of ``durations`` (seconds) in milliseconds, and p99 / median."""
    milliseconds = [duration * 1000 for duration in durations]
    median = statistics.median(milliseconds)
    p99 = percentile(milliseconds, 0.99)
    return (
        f"{label}: median {median:.1f} ms, p99 {p99:.1f} ms, max {max(milliseconds):.1f} ms "
        f"(p99/median {p99 / median:.1f}x) over {len(milliseconds)} turns"
    )


def describe_cpu(series: TurnSeries) -> str:
    """One line: the CPU per turn of each process and in total, in milliseconds."""
    parts = [f"{name} {seconds * 1000:.1f}" for name, seconds in sorted(series.cpu_per_turn().items())]
    return "CPU per turn (ms): " + ", ".join(parts)


async def wait_for_turn_completed(sessions: AgentSessionClient, session_id: str, token: str = "") -> str:
    """Read the session's events until ``turn_completed`` and return the token after it.

    Raises:
        RuntimeError: If the turn failed.
    """
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, timeout=timedelta(seconds=10))
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        if message.value.type == AgentEventType.TURN_COMPLETED:
            return token
        if message.value.type == AgentEventType.TURN_FAILED:
            raise RuntimeError(f"turn failed in {session_id}: {message.value.payload}")


async def run_durable_turns(
    sessions: AgentSessionClient,
    question: str,
    *,
    turns: int,
    concurrency: int,
    session_prefix: str,
) -> TurnSeries:
    """Run ``turns`` one-turn sessions, ``concurrency`` of them at any moment, and time each.

    Each turn is a new session started with ``question``; it is timed from ``start_session`` to its
    ``turn_completed`` event.

    Args:
        sessions: The session client.
        question: The first user message of every session.
        turns: How many sessions (one turn each).
        concurrency: How many run at the same time.
        session_prefix: Makes the session IDs unique on the server.

    Returns:
        The series.
    """
    numbers = iter(range(turns))
    durations: list[float] = []

    async def run_sessions() -> None:
        for number in numbers:
            session_id = f"{session_prefix}-{number}"
            started = time.perf_counter()
            await sessions.start_session(session_id, question)
            await wait_for_turn_completed(sessions, session_id)
            durations.append(time.perf_counter() - started)

    cpu_before = process_cpu_seconds()
    started = time.perf_counter()
    await asyncio.gather(*(run_sessions() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    cpu_after = process_cpu_seconds()
    cpu = {name: cpu_after[name] - before for name, before in cpu_before.items() if name in cpu_after}
    return TurnSeries(concurrency, tuple(durations), elapsed, cpu)
