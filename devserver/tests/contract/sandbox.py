"""A directory shared by the test process and the Worker child: an append-only event log and gates.

The Worker child runs in another process group, so the only channel back to the test is the file
system. Every handler appends one JSON line per observable fact (``O_APPEND`` makes each line a
single atomic write across processes), and handlers that must stop at an exact point poll for a
gate file that only the test creates.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

SANDBOX_ENV = "DEX_CONTRACT_SANDBOX"
_GATE_POLL_SECONDS = 0.02

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]


@dataclass(frozen=True)
class Event:
    """One line of the event log."""

    flow_id: str
    kind: str
    step: str
    attempt: int
    pid: int
    data: dict[str, JsonValue]


class Sandbox:
    """The shared directory, seen from either process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.events_path = root / "events.jsonl"
        self.gates = root / "gates"
        self.gates.mkdir(parents=True, exist_ok=True)
        self.events_path.touch(exist_ok=True)

    @classmethod
    def from_env(cls) -> Sandbox:
        return cls(Path(os.environ[SANDBOX_ENV]))

    def gate_path(self, flow_id: str, name: str) -> Path:
        return self.gates / f"{flow_id}.{name}"

    def open_gate(self, flow_id: str, name: str) -> None:
        self.gate_path(flow_id, name).touch()

    def record(self, flow_id: str, kind: str, step: str = "", attempt: int = 0, **data: object) -> None:
        line = json.dumps(
            {
                "flow_id": flow_id,
                "kind": kind,
                "step": step,
                "attempt": attempt,
                "pid": os.getpid(),
                "data": data,
            }
        )
        fd = os.open(self.events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    def events(self, flow_id: str, kind: str | None = None) -> list[Event]:
        found: list[Event] = []
        # A Worker may be halfway through appending a line; only newline-terminated lines are complete.
        complete, _, _ = self.events_path.read_text().rpartition("\n")
        for raw in complete.splitlines():
            if not raw.strip():
                continue
            item = cast(dict[str, JsonValue], json.loads(raw))
            if item["flow_id"] != flow_id or (kind is not None and item["kind"] != kind):
                continue
            found.append(
                Event(
                    flow_id=cast(str, item["flow_id"]),
                    kind=cast(str, item["kind"]),
                    step=cast(str, item["step"]),
                    attempt=cast(int, item["attempt"]),
                    pid=cast(int, item["pid"]),
                    data=cast(dict[str, JsonValue], item["data"]),
                )
            )
        return found

    def wait_for_event(
        self,
        flow_id: str,
        kind: str,
        *,
        count: int = 1,
        timeout: float = 20.0,
        where: Callable[[Event], bool] | None = None,
    ) -> list[Event]:
        """Poll the log until ``count`` matching events exist; fail with the log so far otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            matching = [e for e in self.events(flow_id, kind) if where is None or where(e)]
            if len(matching) >= count:
                return matching
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout}s waiting for {count} {kind!r} event(s) of {flow_id}; "
                    f"log: {[(e.kind, e.step, e.attempt, e.data) for e in self.events(flow_id)]}"
                )
            time.sleep(0.02)

    async def wait_gate(self, flow_id: str, name: str) -> None:
        """Block the calling handler (cooperatively) until the test opens the gate."""
        path = self.gate_path(flow_id, name)
        # The gate is a file another process creates, so there is no in-process Event to await.
        while not path.exists():  # noqa: ASYNC110
            await asyncio.sleep(_GATE_POLL_SECONDS)
