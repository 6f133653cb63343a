"""A chaos run's machine-readable result: what was done to the package, and every broken promise."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dex_agents.testing.chaos._invariants import Violation

__all__ = ["REPORT_FORMAT", "ChaosReport"]

REPORT_FORMAT = "dex-agents-chaos/1"
"""The ``format`` field of a report file."""


@dataclass(frozen=True)
class ChaosReport:
    """One package's chaos run.

    Attributes:
        name: The package's label in ``scripts/chaos`` (``core-scripted``, ``pydantic-ai``, ...).
        spec: The spec reference the run loaded.
        seed: The seed; the same seed plans the same sessions and the same faults.
        requested_worker_kills: Worker kills asked for.
        requested_engine_crashes: Engine crashes asked for.
        worker_kills: Worker process groups SIGKILLed.
        worker_kill_moments: Kills by moment (``random``, ``in_tool``, ``in_model``).
        engine_crashes: Engine SIGKILLs with a restart on the same database.
        engine_crash_moments: Crashes by moment (``random``, ``in_tool``).
        stopped_by_time_limit: The time limit ended the faults before all were made.
        sessions: Sessions run.
        turns: Turns taken, the check turns included.
        failed_turns: Turns that ended failed (a model call killed on every attempt, say).
        turn_failures: The distinct errors of the failed turns.
        tool_runs: Real tool runs by tool name, from the tools' ledger.
        repeated_calls: Calls of retrying tools (reads, idempotent writes) that ran more than once.
        tool_call_statuses: How the session recorded its tool calls (``succeeded``, ``outcome_unknown``...).
        model_calls: Real model calls, retries included.
        approvals: Interrupts the driver approved.
        retried_client_calls: Client calls that failed under a fault and were made again.
        seconds: The run's wall time.
        provider_faults: Model call requests the scripted provider server answered with a fault, by kind
            (a runner whose model is behind it only); every one was survived when there are no violations.
        rolling_deploys: Rolling deploys made (every Worker SIGTERMed in turn and replaced).
        worker_drains: Workers a deploy stopped that drained and exited by themselves.
        longest_drain_seconds: The longest of those drains, from SIGTERM to exit.
        sessions_on_several_workers: Sessions whose model and tool calls more than one Worker process made:
            a session is not tied to a Worker, so a turn goes on wherever a Worker is free.
        violations: Every broken promise; a passing run has none.
        replay: The command that replays this run.
    """

    name: str
    spec: str
    seed: int
    requested_worker_kills: int
    requested_engine_crashes: int
    worker_kills: int
    worker_kill_moments: dict[str, int]
    engine_crashes: int
    engine_crash_moments: dict[str, int]
    stopped_by_time_limit: bool
    sessions: int
    turns: int
    failed_turns: int
    turn_failures: list[str]
    tool_runs: dict[str, int]
    repeated_calls: int
    tool_call_statuses: dict[str, int]
    model_calls: int
    approvals: int
    retried_client_calls: int
    seconds: float
    provider_faults: dict[str, int] = field(default_factory=dict[str, int])
    rolling_deploys: int = 0
    worker_drains: int = 0
    longest_drain_seconds: float = 0.0
    sessions_on_several_workers: int = 0
    violations: list[Violation] = field(default_factory=list[Violation])
    replay: str = ""

    @property
    def passed(self) -> bool:
        """Whether every promise held."""
        return not self.violations

    def write(self, path: Path) -> None:
        """Write the report as JSON, replacing ``path`` atomically.

        Args:
            path: The report file.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"format": REPORT_FORMAT, **asdict(self)}, indent=2) + "\n", "utf-8")
        temporary.replace(path)

    @classmethod
    def read(cls, path: Path) -> ChaosReport:
        """Read a report :meth:`write` wrote.

        Args:
            path: The report file.

        Returns:
            The report.

        Raises:
            ValueError: If the file is not a chaos report of this format.
        """
        data: dict[str, Any] = json.loads(path.read_text("utf-8"))
        if data.pop("format", None) != REPORT_FORMAT:
            raise ValueError(f"{path} is not a {REPORT_FORMAT} report")
        data["violations"] = [Violation(**violation) for violation in data["violations"]]
        return cls(**data)

    def summary(self) -> str:
        """A few lines for a person: what was done, what held, and how to replay."""
        moments = ", ".join(f"{count} {moment}" for moment, count in sorted(self.worker_kill_moments.items()))
        lines = [
            f"{self.name}: {self.worker_kills} Worker kills ({moments or 'none'}), "
            f"{self.engine_crashes} engine crashes, {self.sessions} sessions, {self.turns} turns "
            f"({self.failed_turns} failed by faults), {sum(self.tool_runs.values())} tool runs "
            f"({self.repeated_calls} retried calls), "
            f"{self.tool_call_statuses.get('outcome_unknown', 0)} outcome_unknown, "
            f"{self.model_calls} model calls, {self.seconds:.0f} s: "
            f"{len(self.violations)} invariant violations",
        ]
        if self.provider_faults:
            faults = ", ".join(f"{count} {kind}" for kind, count in self.provider_faults.items())
            lines.append(f"  provider faults survived: {sum(self.provider_faults.values())} ({faults})")
        if self.rolling_deploys:
            lines.append(
                f"  rolling deploys: {self.rolling_deploys}; {self.worker_drains} Workers drained and exited,"
                f" the longest in {self.longest_drain_seconds:.1f} s; {self.sessions_on_several_workers}"
                f" of {self.sessions} sessions ran on more than one Worker"
            )
        if self.stopped_by_time_limit:
            lines.append(
                f"  the time limit stopped the faults early ({self.requested_worker_kills} kills and "
                f"{self.requested_engine_crashes} crashes were asked for)"
            )
        lines.extend(
            f"  VIOLATION {item.invariant} in {item.session_id}: {item.detail}" for item in self.violations
        )
        if self.violations:
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)
