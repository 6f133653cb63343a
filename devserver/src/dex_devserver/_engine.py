"""The Flow interpreter's core: the live runs, their transitions, and the scheduling of their Step executions.

All state changes run on one event loop without awaiting in between, so each transition of a Flow is atomic;
a transition that must be durable is committed to the store before the caller is answered or the next
Worker task is sent. Only running Flows live in memory; a run leaves once its close is committed, and a
closed run is read from the store when asked for. The operations live in their own modules (`_flows`,
`_steps`, `_rpc`, `_writes`, `_queries`, `_restore`); this one holds what they share.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb

from . import _conditions as conditions
from . import _errors as errors
from . import _requests as requests
from . import _rows as rows
from . import _steps as steps
from ._blobs import Blobs
from ._dispatch import Dispatcher
from ._journal import Journal
from ._model import Execution, FlowRun, Phase
from ._store import Store
from ._streams import Streams

__all__ = ["Engine", "EngineOptions"]


@dataclass
class EngineOptions:
    """Engine settings.

    Attributes:
        default_worker_target: Push address for Flows started without a worker target; None means pull mode.
        stop_grace: Seconds a stopping devserver waits for attempts that reached a Worker to finish.
    """

    default_worker_target: str | None = None
    stop_grace: float = 5.0


class Engine:
    """Owns the live Flow runs and drives their Steps; closed runs are read from the store.

    Args:
        store: Persistence.
        blobs: Blob offload.
        dispatcher: Sends Worker tasks.
        streams: Stream storage.
        options: Engine settings.
    """

    def __init__(
        self, store: Store, blobs: Blobs, dispatcher: Dispatcher, streams: Streams, options: EngineOptions
    ) -> None:
        self.store = store
        self.blobs = blobs
        self.dispatcher = dispatcher
        self.streams = streams
        self.options = options
        # The running run of each Flow, and a closed one until its close is committed.
        self.live: dict[str, FlowRun] = {}
        self.journal = Journal(store)
        self.journal.listeners.append(self._on_committed)
        self.next_run_seq = 1
        self.closing = False
        self._closed: asyncio.Future[None] | None = None

    def _on_committed(self, committed: list[FlowRun]) -> None:
        """Lets closed runs leave memory once their close is committed; queries then read the store."""
        self.streams.on_committed()
        for run in committed:
            if not run.is_running and self.live.get(run.flow_id) is run:
                del self.live[run.flow_id]
                self.streams.forget_flow(run.flow_type, run.flow_id)

    async def parked(self) -> None:
        """Waits until the engine closes (then it is cancelled): a stopping devserver sends no attempt."""
        if self._closed is None:
            self._closed = asyncio.get_running_loop().create_future()
        await self._closed

    async def close(self) -> None:
        """Lets attempts that reached a Worker finish (up to the stop grace), then stops and commits.

        An attempt that is still running at the end of the grace counts as used, as after a crash; an
        attempt that had not reached a Worker is given back.
        """
        self.closing = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.stop_grace
        while (remaining := deadline - loop.time()) > 0:
            busy = [
                task
                for run in self.live.values()
                for exe_id, task in run.rt.tasks.items()
                if (exe := run.executions.get(exe_id)) is not None and exe.in_flight and exe.dispatched
            ]
            if not busy:
                break
            await asyncio.wait(busy, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            with contextlib.suppress(Exception):
                await self.journal.durable()
        self.journal.stop()
        tasks: list[asyncio.Task[None]] = []
        for run in list(self.live.values()):
            for handle in run.rt.handles:
                handle.cancel()
            # Deferred ASYNC commits are made now rather than lost.
            self.journal.mark_dirty(run)
            tasks.extend(run.rt.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for run in list(self.live.values()):
            self.journal.mark_dirty(run)
        self.journal.commit()

    # ------------------------------------------------------------------ lookup

    def find_run(self, flow_id: str, run_id: str = "") -> FlowRun | None:
        """Returns a run (the current one when `run_id` is empty) or None; closed runs come from the store."""
        run = self.live.get(flow_id)
        if run is not None and (not run_id or run.run_id == run_id):
            return run
        return rows.load_run(self.store, flow_id, run_id)

    def run_of(self, flow_id: str, run_id: str = "") -> FlowRun:
        """Returns a run (the current one when `run_id` is empty).

        Raises:
            ServiceError: ``FLOW_NOT_EXISTS`` when there is no such Flow or run.
        """
        run = self.find_run(flow_id, run_id)
        if run is None:
            raise errors.flow_not_found(flow_id, run_id)
        return run

    def running_run(self, flow_id: str, run_id: str = "") -> FlowRun:
        """Returns a running run.

        Raises:
            ServiceError: ``FLOW_NOT_EXISTS`` when there is no such Flow or it is closed.
        """
        run = self.run_of(flow_id, run_id)
        if not run.is_running:
            raise errors.flow_not_found(flow_id, run_id)
        return run

    # ------------------------------------------------------------------ transitions

    def transition(self, run: FlowRun, *, durable: bool) -> None:
        """Re-evaluates waits and completion after a change, persists, and wakes long-polls."""
        if run.is_running:
            self._evaluate(run)
        self.journal.persist(run, durable=durable or not run.is_running)
        run.rt.wake_watchers(closed=not run.is_running)

    def on_timer(self, run: FlowRun) -> None:
        """Re-evaluates a run when one of its Timers is due."""
        if run.is_running:
            self.transition(run, durable=True)

    def _evaluate(self, run: FlowRun) -> None:
        """Fires due Timers, wakes executions whose condition is met, and completes a graceful close."""
        rt = run.rt
        # Only waiting executions are looked at, so a wide fan-out costs nothing here.
        waiting = sorted(rt.waiting.values(), key=lambda e: e.seq) if rt.waiting else []
        now = math.floor(time.time())
        for exe in waiting:
            if exe.condition is None:
                continue
            for index, fire_at in enumerate(exe.timer_fire_at):
                if exe.timer_status[index] == pb.INTERNAL_TIMER_STATUS_PENDING and now >= fire_at:
                    exe.set_timer_status(index, pb.INTERNAL_TIMER_STATUS_FIRED)
            timer_done = [status != pb.INTERNAL_TIMER_STATUS_PENDING for status in exe.timer_status]
            sizes = {name: len(queue) for name, queue in run.channels.items()}
            chosen = conditions.plan(exe.condition, timer_done, sizes)
            if chosen is None:
                continue
            consumed = {
                index: run.take_messages(exe.condition.channel_conditions[index].channel_name, chosen[index])
                for index in sorted(chosen)
            }
            exe.condition_results = conditions.build_results(exe.condition, timer_done, consumed)
            run.set_phase(exe, Phase.EXECUTE)
            exe.reset_method()
            event = rt.wake.get(exe.exe_id)
            if event is not None:
                event.set()
        # The timeout handler is not a user Step: it never holds back a graceful completion.
        if (
            run.graceful
            and run.delayed_start is None
            and all(exe.step_type == requests.TIMEOUT_HANDLER for exe in run.executions.values())
        ):
            self.close_run(run, pb.FLOW_STATUS_COMPLETED)

    # ------------------------------------------------------------------ scheduling

    def queue(
        self, run: FlowRun, movement: pb.StepMovement, from_id: str, recovery: pb.RecoveryErrorInfo | None
    ) -> Execution:
        """Creates the next execution of a Step type, stamped with its predecessor, and starts it."""
        number = run.counters.get(movement.step_type, 0) + 1
        run.counters[movement.step_type] = number
        stamped = pb.StepMovement()
        stamped.CopyFrom(movement)
        stamped.from_step_execution_id_internal_only = from_id
        stamped.ClearField("recovery_error_internal_only")
        if recovery is not None:
            stamped.recovery_error_internal_only.CopyFrom(recovery)
        exe = Execution(
            exe_id=f"{movement.step_type}-{number}",
            step_type=movement.step_type,
            movement=stamped,
            seq=run.next_exe_seq,
            phase=Phase.EXECUTE if movement.step_options.skip_wait_for else Phase.WAIT_FOR,
        )
        run.next_exe_seq += 1
        run.add_execution(exe)
        self.spawn(run, exe)
        return exe

    def spawn(self, run: FlowRun, exe: Execution) -> None:
        """Starts the task that drives an execution."""
        rt = run.rt
        rt.wake[exe.exe_id] = asyncio.Event()
        if self.closing:
            return  # persisted with its run; it starts when the devserver starts again
        task = asyncio.get_running_loop().create_task(
            steps.run_execution(self, run, exe), name=f"{run.flow_id}/{exe.exe_id}"
        )
        rt.tasks[exe.exe_id] = task

    def cancel_executions(self, run: FlowRun, selected: list[Execution]) -> None:
        """Removes executions and cancels their tasks (except the caller's own)."""
        rt = run.rt
        current = asyncio.current_task()
        for exe in selected:
            run.remove_execution(exe.exe_id)
            rt.wake.pop(exe.exe_id, None)
            task = rt.tasks.pop(exe.exe_id, None)
            if task is not None and task is not current:
                task.cancel()

    def cancel_by_type(
        self, run: FlowRun, types: Iterable[str], siblings: Iterable[str], current: Execution | None
    ) -> None:
        """Cancels executions of `types` anywhere, and of `siblings` that share `current`'s predecessor."""
        global_types = set(types)
        sibling_types = set(siblings) - global_types
        if not global_types and not sibling_types:
            return
        selected = [
            exe
            for exe in run.executions.values()
            if exe is not current
            and (
                exe.step_type in global_types
                or (current is not None and exe.step_type in sibling_types and exe.from_id == current.from_id)
            )
        ]
        self.cancel_executions(run, selected)

    def close_run(
        self,
        run: FlowRun,
        status: pb.FlowStatus,
        error_type: pb.FlowErrorType = pb.FLOW_ERROR_TYPE_UNSPECIFIED,
        message: str = "",
    ) -> None:
        """Closes a running run: cancels its executions and callbacks and records `FlowClosed`."""
        if not run.is_running:
            return
        run.status = status
        run.error_type = error_type
        run.error_message = message
        run.close_time = time.time()
        run.delayed_start = None
        self.cancel_executions(run, list(run.executions.values()))
        rt = run.rt
        for handle in rt.handles:
            handle.cancel()
        rt.handles.clear()

        def closed(event: pb.FlowHistoryEvent) -> None:
            payload = event.flow_closed
            payload.flow_status = status
            payload.error_type = error_type
            payload.error_message = message
            if status == pb.FLOW_STATUS_COMPLETED:
                payload.results.extend(run.results)

        self.journal.record(run, closed)
