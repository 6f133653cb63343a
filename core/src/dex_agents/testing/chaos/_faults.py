"""Fault injection: SIGKILL Worker process groups and the engine at seeded moments, and replace them.

A rolling deploy is the graceful fault: every Worker in turn gets SIGTERM, drains, and is replaced by a new
one started beside it, as a deployment replaces the processes of a release one by one.

A kill lands at one of three moments: a random one (whatever the Workers are doing then), inside a tool
run, or inside a model call. The last two use the script's gates: a scripted tool or model stops at its
gate right after it logged its run, so killing the Worker that reached the gate kills it between a side
effect and the commit of its result, the moment a duplicate write would come from. Every gate the
injector does not want is released at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dex_agents.testing._gates import FileGate
from dex_agents.testing._stack import AgentTestStack
from dex_agents.testing._worker import WORKER_DRAIN_TIMEOUT_SECONDS, WorkerProcess
from dex_agents.testing.chaos._plan import MODEL_GATE_PREFIX, TOOL_GATE_PREFIX

__all__ = ["FaultCounts", "FaultInjector", "GateWatcher", "HeldGate"]

_GATE_POLL_SECONDS = 0.02
_REACHED_SUFFIX = ".reached"
_RELEASED_SUFFIX = ".released"
# What a draining Worker may take beyond its drain timeout to cancel what is left and exit.
_EXIT_GRACE_SECONDS = 10.0
# A replacement Worker imports its framework while the others run sessions; on a busy 2-core machine that
# took over 30 s (LiteLLM), which is a slow start, not a broken promise.
_WORKER_READY_SECONDS = 180.0


@dataclass(frozen=True)
class HeldGate:
    """A gate a Worker waits at, which the injector claimed instead of releasing.

    Attributes:
        gate: The gate.
        pid: The Worker process that reached it.
    """

    gate: FileGate
    pid: int


class GateWatcher:
    """Releases every gate a Worker reaches, except one the injector claimed.

    Args:
        state_dir: The stack's state directory (gates live in its ``gates`` folder).
    """

    def __init__(self, state_dir: Path) -> None:
        self._state_dir = state_dir
        self._directory = state_dir / "gates"
        self._seen: set[str] = set()
        self._claims: dict[str, asyncio.Future[HeldGate]] = {}
        self.released = 0
        """Gates released at once."""

    async def claim(self, prefix: str, timeout: float) -> HeldGate | None:  # noqa: ASYNC109
        """Wait for the next gate whose name starts with ``prefix`` and hold it.

        Args:
            prefix: :data:`TOOL_GATE_PREFIX` or :data:`MODEL_GATE_PREFIX`.
            timeout: Seconds to wait for one.

        Returns:
            The held gate, or ``None`` when none was reached in time.
        """
        claim: asyncio.Future[HeldGate] = asyncio.get_running_loop().create_future()
        self._claims[prefix] = claim
        try:
            await asyncio.wait_for(asyncio.shield(claim), timeout)
        except TimeoutError:
            pass
        finally:
            del self._claims[prefix]
        # A gate handed over just as the wait timed out is still the caller's to use.
        return claim.result() if claim.done() else None

    def forget_session(self, session_id: str) -> None:
        """Delete the gates of a session that is done, so the watched folder holds only live ones.

        Args:
            session_id: A session that is idle after its last planned turn (no Step of it runs).
        """
        prefix = f"{session_id}."
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self._directory):
                if entry.name.startswith(prefix):
                    Path(entry.path).unlink(missing_ok=True)
                    self._seen.discard(entry.name)

    async def run(self) -> None:
        """Watch for reached gates until cancelled."""
        while True:
            self.poll()
            await asyncio.sleep(_GATE_POLL_SECONDS)

    def poll(self) -> None:
        """Hand each newly reached gate to a waiting claim, or release it."""
        try:
            entries = list(os.scandir(self._directory))
        except FileNotFoundError:
            return
        for entry in entries:
            if not entry.name.endswith(_REACHED_SUFFIX) or entry.name in self._seen:
                continue
            name = entry.name.removesuffix(_REACHED_SUFFIX)
            gate = FileGate(self._state_dir, name)
            pids = gate.reached_by() if not gate.is_released else [0]
            if not pids:
                continue  # the Worker created the file but has not written its pid yet
            self._seen.add(entry.name)
            if gate.is_released:
                continue
            gate_name = name.split(".", 1)[1] if "." in name else name
            claim = next(
                (future for prefix, future in self._claims.items() if gate_name.startswith(prefix)),
                None,
            )
            if claim is not None and not claim.done():
                claim.set_result(HeldGate(gate, pids[0]))
            else:
                gate.release()
                self.released += 1


@dataclass
class FaultCounts:
    """What the injector did.

    Attributes:
        worker_kills: Worker process groups SIGKILLed.
        worker_kill_moments: Kills by moment: ``random``, ``in_tool`` or ``in_model``.
        engine_crashes: Engine SIGKILLs followed by a restart on the same database.
        engine_crash_moments: Engine crashes by moment: ``random`` or ``in_tool``.
        workers_started: Worker processes started, the first ones included.
        deploys: Rolling deploys: every running Worker SIGTERMed in turn and replaced.
        drain_seconds: How long each Worker a deploy stopped took to drain and exit.
        drain_overruns: The pids of Workers that did not exit within their drain timeout and the grace, and
            were SIGKILLed.
    """

    worker_kills: int = 0
    worker_kill_moments: Counter[str] = field(default_factory=Counter[str])
    engine_crashes: int = 0
    engine_crash_moments: Counter[str] = field(default_factory=Counter[str])
    workers_started: int = 0
    deploys: int = 0
    drain_seconds: list[float] = field(default_factory=list[float])
    drain_overruns: list[int] = field(default_factory=list[int])


class FaultInjector:
    """Kills Workers and the engine at seeded moments, keeping ``workers`` Workers running.

    Args:
        stack: The entered stack.
        gates: The gate watcher (running).
        rng: The seeded random source of the faults.
        workers: How many Workers to keep running.
        gate_wait_seconds: How long a kill inside a tool or model call waits for one to reach its gate
            before it kills at a random moment instead.
        drain_timeout_seconds: The Workers' drain timeout; a deploy waits that long plus a grace for each
            Worker to exit.
    """

    def __init__(
        self,
        stack: AgentTestStack,
        gates: GateWatcher,
        rng: random.Random,
        *,
        workers: int,
        gate_wait_seconds: float = 15.0,
        drain_timeout_seconds: float = WORKER_DRAIN_TIMEOUT_SECONDS,
        log: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self._stack = stack
        self._gates = gates
        self._rng = rng
        self._workers = workers
        self._gate_wait_seconds = gate_wait_seconds
        self._drain_timeout_seconds = drain_timeout_seconds
        self._log = log
        self.counts = FaultCounts()

    async def start_workers(self) -> None:
        """Start Workers until ``workers`` run, all at once, and wait until each registered."""
        missing = self._workers - len(self._stack.workers)
        if missing > 0:
            await asyncio.gather(
                *(self._stack.start_worker(ready_timeout=_WORKER_READY_SECONDS) for _ in range(missing))
            )
            self.counts.workers_started += missing

    async def run(self, worker_kills: int, engine_crashes: int, deadline: float, deploys: int = 0) -> None:
        """Inject the faults in a seeded order, stopping early at ``deadline`` (event-loop time).

        Args:
            worker_kills: Worker kills to make.
            engine_crashes: Engine crashes to make.
            deadline: When to stop even if faults remain.
            deploys: Rolling deploys to make.
        """
        faults = ["worker"] * worker_kills + ["engine"] * engine_crashes + ["deploy"] * deploys
        self._rng.shuffle(faults)
        loop = asyncio.get_running_loop()
        actions = {"worker": self._kill_worker, "engine": self._crash_engine, "deploy": self._deploy}
        for number, fault in enumerate(faults, start=1):
            if loop.time() >= deadline:
                return
            await asyncio.sleep(self._rng.uniform(0.2, 1.5))
            started = loop.time()
            what = await actions[fault]()
            killed = loop.time()
            await self.start_workers()
            self._log(
                f"fault {number}/{len(faults)}: {what} after {killed - started:.1f} s; Workers back in "
                f"{loop.time() - killed:.1f} s"
            )

    async def _kill_worker(self) -> str:
        moment = self._rng.choices(["random", "in_tool", "in_model"], weights=[4, 4, 2])[0]
        victim: WorkerProcess | None = None
        if moment != "random":
            prefix = TOOL_GATE_PREFIX if moment == "in_tool" else MODEL_GATE_PREFIX
            held = await self._gates.claim(prefix, self._gate_wait_seconds)
            if held is not None:
                victim = next((worker for worker in self._stack.workers if worker.pid == held.pid), None)
                if victim is None:
                    held.gate.release()  # its Worker is gone already
        if victim is None:
            moment = "random"
            running = self._stack.workers
            if not running:
                return "no Worker to kill"
            victim = self._rng.choice(running)
        victim.kill()
        self.counts.worker_kills += 1
        self.counts.worker_kill_moments[moment] += 1
        return f"Worker {victim.pid} killed ({moment})"

    async def _crash_engine(self) -> str:
        moment = self._rng.choice(["random", "in_tool"])
        held = (
            await self._gates.claim(TOOL_GATE_PREFIX, self._gate_wait_seconds)
            if moment == "in_tool"
            else None
        )
        if held is None:
            moment = "random"
        await self._stack.restart_server()
        if held is not None:
            # The tool finishes in its Worker, but the engine that sent it is gone: its result is dropped.
            held.gate.release()
        self.counts.engine_crashes += 1
        self.counts.engine_crash_moments[moment] += 1
        return f"engine crashed and restarted ({moment})"

    async def _deploy(self) -> str:
        loop = asyncio.get_running_loop()
        outgoing = self._stack.workers
        drains: list[float] = []
        for worker in outgoing:
            # The replacement starts while the old Worker drains, as a rolling deployment surges by one.
            worker.begin_stop()
            started = loop.time()
            replacement = asyncio.create_task(self._stack.start_worker(ready_timeout=_WORKER_READY_SECONDS))
            try:
                await asyncio.to_thread(worker.wait, self._drain_timeout_seconds + _EXIT_GRACE_SECONDS)
                drains.append(round(loop.time() - started, 2))
            except subprocess.TimeoutExpired:
                worker.kill()
                self.counts.drain_overruns.append(worker.pid)
            await replacement
            self.counts.workers_started += 1
        self.counts.deploys += 1
        self.counts.drain_seconds.extend(drains)
        longest = max(drains, default=0.0)
        return f"rolling deploy of {len(outgoing)} Workers (longest drain {longest:.1f} s)"
