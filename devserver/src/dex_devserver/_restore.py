"""Restore on restart: loads stored runs and resumes every running one where it stopped."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _flows as flows
from ._model import FlowRun, Phase
from ._runtime import Runtime
from ._snapshot import load_run

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["restore"]


def restore(engine: Engine) -> None:
    """Loads stored runs and resumes every running one; call on the event loop before serving."""
    engine.streams.restore()
    for row in engine.store.load_runs():
        run = load_run(row.state)
        run.attributes = {
            key: pb.Value.FromString(value)
            for key, value in engine.store.load_attributes(run.flow_id, run.run_id).items()
        }
        engine.runs.setdefault(run.flow_id, []).append(run)
        engine.next_run_seq = max(engine.next_run_seq, run.seq + 1)
    for runs in engine.runs.values():
        run = runs[-1]
        if not run.is_running:
            continue
        rt = engine.runtimes.of(run)
        for exe in sorted(run.executions.values(), key=lambda e: e.seq):
            engine.spawn(run, exe)
        if run.delayed_start is not None:
            flows.schedule_delayed_start(engine, run, rt)
        if run.timeout_at:
            flows.schedule_timeout(engine, run, rt)
        _arm_timers(engine, run, rt)
        engine.transition(run, durable=True)


def _arm_timers(engine: Engine, run: FlowRun, rt: Runtime) -> None:
    """Schedules the pending Timers of a restored run's waiting executions at their stored deadlines."""
    loop = asyncio.get_running_loop()
    now = time.time()
    for exe in run.executions.values():
        if exe.phase != Phase.WAITING:
            continue
        for index, fire_at in enumerate(exe.timer_fire_at):
            if exe.timer_status[index] == pb.INTERNAL_TIMER_STATUS_PENDING:
                rt.handles.append(loop.call_later(max(0.0, fire_at - now), engine.on_timer, run))
