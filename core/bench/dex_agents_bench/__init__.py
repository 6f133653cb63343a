"""Benchmark helpers: what durability costs per agent turn.

``run_turn_overhead_bench`` times one turn of an agent in process (``InProcessTurn``) and as a durable
session on a private development server with one Worker child (``DurableTurn``), one session at a time and
many at once, and prints the median, p99 and max turn, the turns per second, the CPU per turn of each
process, the overhead per turn, and what the session stores. ``run_durable_turns`` runs one such series
(a ``TurnSeries``) for a benchmark of its own. Each adapter's ``bench/turn_overhead.py`` runs it. It
needs the ``testing`` extra (``pip install "dex-agents[testing]"``) for the development server. Figures
belong in benchmarks like these, never in tests.
"""

from dex_agents_bench._measure import (
    TurnSeries,
    describe_cpu,
    describe_series,
    process_cpu_seconds,
    run_durable_turns,
    wait_for_turn_completed,
)
from dex_agents_bench._turn_overhead import DurableTurn, InProcessTurn, run_turn_overhead_bench

__all__ = [
    "DurableTurn",
    "InProcessTurn",
    "TurnSeries",
    "describe_cpu",
    "describe_series",
    "process_cpu_seconds",
    "run_durable_turns",
    "run_turn_overhead_bench",
    "wait_for_turn_completed",
]
