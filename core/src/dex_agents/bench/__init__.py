"""Benchmark helpers: what durability costs per agent turn.

``run_turn_overhead_bench`` times one turn of an agent in process (``InProcessTurn``) and as a durable
session on a private development server with one Worker child (``DurableTurn``), and prints the medians,
the overhead per turn, and what the session stores. Each adapter's ``bench/turn_overhead.py`` runs it. It
needs the ``testing`` extra (``pip install "dex-agents[testing]"``) for the development server. Figures
belong in benchmarks like these, never in tests.
"""

from dex_agents.bench._turn_overhead import DurableTurn, InProcessTurn, run_turn_overhead_bench

__all__ = ["DurableTurn", "InProcessTurn", "run_turn_overhead_bench"]
