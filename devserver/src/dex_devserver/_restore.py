"""Restore on restart: loads the running Flows (closed ones stay in the store) and resumes each one."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _flows as flows
from . import _rows as rows
from ._model import FlowRun

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["restore"]


def restore(engine: Engine) -> int:
    """Loads and resumes every running run; call on the event loop before serving.

    Returns:
        How many runs were resumed.
    """
    engine.next_run_seq = rows.max_run_seq(engine.store) + 1
    running = rows.load_running_runs(engine.store)
    for run in running:
        engine.live[run.flow_id] = run
        for exe in run.executions.values():
            engine.spawn(run, exe)
        if run.delayed_start is not None:
            flows.schedule_delayed_start(engine, run, run.rt)
        if run.timeout_at:
            flows.schedule_timeout(engine, run, run.rt)
        _arm_timers(engine, run)
        engine.transition(run, durable=True)
    return len(running)


def _arm_timers(engine: Engine, run: FlowRun) -> None:
    """Schedules the pending Timers of a restored run's waiting executions at their stored deadlines."""
    loop = asyncio.get_running_loop()
    now = time.time()
    for exe in run.rt.waiting.values():
        for index, fire_at in enumerate(exe.timer_fire_at):
            if exe.timer_status[index] == pb.INTERNAL_TIMER_STATUS_PENDING:
                run.rt.handles.append(loop.call_later(max(0.0, fire_at - now), engine.on_timer, run))
