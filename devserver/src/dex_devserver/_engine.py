"""The Flow interpreter: runs, Step executions, conditions, RPCs, persistence and recovery.

All state changes run on one event loop without awaiting in between, so each transition of a Flow is atomic;
a transition that must be durable is committed to the store before the caller is answered or the next
Worker task is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dex.dexpb import dex_pb2 as pb

from . import _conditions as conditions
from . import _errors as errors
from . import _requests as requests
from ._blobs import Blobs, ValueTooLargeError
from ._dispatch import Dispatcher, MethodResult, ProgressFrame, WorkerFailure
from ._history import new_event
from ._model import START_FROM, Execution, FlowRun, Phase, is_reserved_name
from ._snapshot import dump_run, load_run
from ._store import RunRow, Store
from ._streams import Streams

__all__ = ["Engine", "EngineOptions"]

_LOG = logging.getLogger("dex_devserver")
_RPC_TIMEOUT_CAP = 60.0
_ASYNC_FLUSH_DELAY = 2.0
_TIMEOUT_STEP = f"{requests.TIMEOUT_HANDLER}-1"


@dataclass
class EngineOptions:
    """Engine settings.

    Attributes:
        default_worker_target: Push address for Flows started without a worker target; None means pull mode.
        async_flush_delay: Seconds before an ASYNC-durability result is committed.
    """

    default_worker_target: str | None = None
    async_flush_delay: float = _ASYNC_FLUSH_DELAY


@dataclass
class _Runtime:
    """What a live run keeps in memory only."""

    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict[str, "asyncio.Task[None]"])
    wake: dict[str, asyncio.Event] = field(default_factory=dict[str, asyncio.Event])
    locks: set[str] = field(default_factory=set[str])
    lock_waiters: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    watchers: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    close_watchers: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    pending_events: list[tuple[int, bytes]] = field(default_factory=list[tuple[int, bytes]])
    handles: list[asyncio.TimerHandle] = field(default_factory=list[asyncio.TimerHandle])
    flush_handle: asyncio.TimerHandle | None = None
    changed_attributes: set[str] = field(default_factory=set[str])


class Engine:
    """Owns every Flow run and drives its Steps.

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
        self._runs: dict[str, list[FlowRun]] = {}
        self._rt: dict[tuple[str, str], _Runtime] = {}
        self._next_run_seq = 1
        self._closing = False
        self._dirty: dict[tuple[str, str], FlowRun] = {}
        self._commit_done: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    def restore(self) -> None:
        """Loads stored runs and resumes every running one; call on the event loop before serving."""
        self.streams.restore()
        for row in self.store.load_runs():
            run = load_run(row.state)
            run.attributes = {
                key: pb.Value.FromString(value)
                for key, value in self.store.load_attributes(run.flow_id, run.run_id).items()
            }
            self._runs.setdefault(run.flow_id, []).append(run)
            self._next_run_seq = max(self._next_run_seq, run.seq + 1)
        for runs in self._runs.values():
            run = runs[-1]
            if not run.is_running:
                continue
            rt = self._runtime(run)
            for exe in sorted(run.executions.values(), key=lambda e: e.seq):
                self._spawn(run, rt, exe)
            if run.delayed_start is not None:
                self._schedule_delayed_start(run, rt)
            if run.timeout_at:
                self._schedule_timeout(run, rt)
            self._arm_timers(run, rt)
            self._transition(run, durable=True)

    async def close(self) -> None:
        """Stops every execution task and commits pending state."""
        self._closing = True
        tasks: list[asyncio.Task[None]] = []
        for key, rt in self._rt.items():
            for handle in rt.handles:
                handle.cancel()
            if rt.flush_handle is not None:
                rt.flush_handle.cancel()
                rt.flush_handle = None
                run = self._find_run(*key)
                if run is not None:
                    self._dirty[key] = run
            tasks.extend(rt.tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._group_commit()

    # ------------------------------------------------------------------ lookup helpers

    def _runtime(self, run: FlowRun) -> _Runtime:
        key = (run.flow_id, run.run_id)
        rt = self._rt.get(key)
        if rt is None:
            rt = _Runtime()
            self._rt[key] = rt
        return rt

    def _find_run(self, flow_id: str, run_id: str = "") -> FlowRun | None:
        runs = self._runs.get(flow_id)
        if not runs:
            return None
        if not run_id:
            return runs[-1]
        return next((run for run in runs if run.run_id == run_id), None)

    def run_of(self, flow_id: str, run_id: str = "") -> FlowRun:
        """Returns a run (the current one when `run_id` is empty).

        Raises:
            ServiceError: ``FLOW_NOT_EXISTS`` when there is no such Flow or run.
        """
        run = self._find_run(flow_id, run_id)
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

    # ------------------------------------------------------------------ persistence

    def _event(self, run: FlowRun, fill: Callable[[pb.FlowHistoryEvent], None]) -> None:
        event = new_event(run.next_event_id)
        run.next_event_id += 1
        fill(event)
        self._runtime(run).pending_events.append((event.event_id, event.SerializeToString()))

    def _save(self, run: FlowRun, rt: _Runtime) -> None:
        rt.flush_handle = None
        events, rt.pending_events = rt.pending_events, []
        changed, rt.changed_attributes = rt.changed_attributes, set()
        attributes: list[tuple[str, bytes | None]] = []
        for key in changed:
            value = run.attributes.get(key)
            attributes.append((key, None if value is None else value.SerializeToString()))
        # Memory mode never restores a snapshot; it only needs the history and Attributes it serves.
        state = dump_run(run) if self.store.is_persistent else b""
        self.store.save_run(RunRow(run.flow_id, run.run_id, run.seq, state), events, attributes)

    def _persist(self, run: FlowRun, *, durable: bool) -> None:
        """Marks a run for the next group commit (durable) or for a commit after the ASYNC delay."""
        rt = self._runtime(run)
        if durable:
            if rt.flush_handle is not None:
                rt.flush_handle.cancel()
                rt.flush_handle = None
            self._dirty[(run.flow_id, run.run_id)] = run
            self._request_commit()
        elif rt.flush_handle is None and not self._closing:
            rt.flush_handle = asyncio.get_running_loop().call_later(
                self.options.async_flush_delay, functools.partial(self._persist, run, durable=True)
            )

    def _request_commit(self) -> None:
        # Every transition made while the loop runs its ready callbacks shares one commit, run right after.
        if self._commit_done is None:
            loop = asyncio.get_running_loop()
            self._commit_done = loop.create_future()
            loop.call_soon(self._group_commit)

    def _group_commit(self) -> None:
        done, self._commit_done = self._commit_done, None
        dirty, self._dirty = self._dirty, {}
        try:
            for run in dirty.values():
                self._save(run, self._runtime(run))
            self.store.commit()
        except Exception as error:
            _LOG.exception("commit failed")
            if done is not None and not done.done():
                done.set_exception(error)
            raise
        if done is not None and not done.done():
            done.set_result(None)

    async def durable(self) -> None:
        """Returns once every transition made so far is committed; await it before acknowledging one."""
        if self._commit_done is not None:
            await asyncio.shield(self._commit_done)

    def _transition(self, run: FlowRun, *, durable: bool) -> None:
        """Re-evaluates waits and completion after a change, persists, and wakes long-polls."""
        if run.is_running:
            self._evaluate(run)
        self._persist(run, durable=durable or not run.is_running)
        rt = self._runtime(run)
        watchers, rt.watchers = rt.watchers, []
        if not run.is_running:
            watchers += rt.close_watchers
            rt.close_watchers = []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)

    async def _wait_change(self, run: FlowRun, seconds: float, *, until_closed: bool = False) -> None:
        """Waits for the next transition of a run (or only for it to close), at most `seconds`."""
        rt = self._runtime(run)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (rt.close_watchers if until_closed else rt.watchers).append(waiter)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(waiter, seconds)

    # ------------------------------------------------------------------ values

    def _ingest(self, value: pb.Value, what: str) -> None:
        """Offloads a large value in place (raises `ValueTooLargeError`)."""
        if value.WhichOneof("kind") in ("string_value", "obj_value"):
            stored = self.blobs.ingest(value, what)
            if stored is not value:
                value.CopyFrom(stored)

    def _ingest_effects(
        self,
        writes: Iterable[pb.AttributeWrite],
        publishes: Iterable[pb.ChannelMessage],
        events: Iterable[pb.KV],
        locals_: Iterable[pb.KV] = (),
        decision: pb.StepDecision | None = None,
    ) -> None:
        for write in writes:
            self._ingest(write.value, f"attribute {write.key!r}")
        for message in publishes:
            self._ingest(message.value, f"a message published to channel {message.channel_name!r}")
        for kv in events:
            self._ingest(kv.value, f"recorded event {kv.key!r}")
        for kv in locals_:
            self._ingest(kv.value, f"Step execution local {kv.key!r}")
        if decision is not None:
            for movement in decision.next_steps:
                self._ingest(movement.step_input, f"the input of next Step {movement.step_type!r}")
            if decision.HasField("close_decision") and decision.close_decision.HasField("close_input"):
                self._ingest(decision.close_decision.close_input, "the Flow output")

    def _apply_writes(self, run: FlowRun, writes: Iterable[pb.AttributeWrite]) -> None:
        changed = self._runtime(run).changed_attributes
        for write in writes:
            changed.add(write.key)
            if requests.is_null(write.value):
                run.attributes.pop(write.key, None)
            else:
                run.attributes[write.key] = write.value

    def _apply_publishes(self, run: FlowRun, publishes: Iterable[pb.ChannelMessage]) -> None:
        for message in publishes:
            stored = pb.ChannelMessage(
                channel_name=message.channel_name, message_id=requests.new_message_id()
            )
            stored.value.CopyFrom(message.value)
            message.message_id = stored.message_id
            run.channels.setdefault(message.channel_name, []).append(stored)

    def _apply_deletes(self, run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]) -> None:
        for deletion in deletions:
            queue = run.channels.get(deletion.channel_name, [])
            run.channels[deletion.channel_name] = [m for m in queue if m.message_id != deletion.message_id]
            if not run.channels[deletion.channel_name]:
                del run.channels[deletion.channel_name]

    def _missing_deletion(
        self, run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]
    ) -> pb.ChannelMessageDeletion | None:
        for deletion in deletions:
            queue = run.channels.get(deletion.channel_name, [])
            if not any(message.message_id == deletion.message_id for message in queue):
                return deletion
        return None

    # ------------------------------------------------------------------ start

    def start_flow(self, request: pb.StartFlowRequest) -> str:
        """Starts a Flow run (or returns the existing run of an idempotent retry).

        Returns:
            The run ID.

        Raises:
            ServiceError: For invalid input or a duplicate start.
        """
        if not request.flow_id:
            raise errors.invalid_argument("flow_id is required")
        if is_reserved_name(request.flow_id):
            raise errors.invalid_argument(f"flow_id {request.flow_id!r} must not contain '/', '$' or ':'")
        if not request.flow_type:
            raise errors.invalid_argument("flow_type is required")
        if not request.request_id:
            raise errors.invalid_argument("request_id is required")
        if request.start_step_type and is_reserved_name(request.start_step_type):
            raise errors.invalid_argument(
                f"start Step type {request.start_step_type!r} must not contain '/', '$' or ':'"
            )
        if not request.start_step_type and not requests.is_null(request.step_input):
            raise errors.invalid_argument("a Flow without a start Step takes no input")
        if request.flow_timeout_seconds < 0:
            raise errors.invalid_argument("flow_timeout_seconds must be >= 0")
        policy = request.flow_timeout_policy
        if policy != pb.FLOW_TIMEOUT_POLICY_UNSPECIFIED and request.flow_timeout_seconds == 0:
            raise errors.invalid_argument("a flow timeout policy needs a positive flow_timeout_seconds")
        options = request.flow_start_options
        if options.flow_start_delay_seconds < 0:
            raise errors.invalid_argument("flow_start_delay_seconds must be >= 0")
        if options.id_reuse_policy not in pb.IdReusePolicy.values():
            raise errors.invalid_argument(f"unknown id_reuse_policy {options.id_reuse_policy}")
        step_options = request.step_options
        self._check_step_options(step_options, request.start_step_type or "start")
        keys: set[str] = set()
        for write in options.attributes:
            if not write.key:
                raise errors.invalid_argument("initial attributes need non-empty keys")
            if write.key in keys:
                raise errors.invalid_argument(f"initial attribute {write.key!r} is given twice")
            keys.add(write.key)
            if write.value.WhichOneof("kind") is None:
                raise errors.invalid_argument(f"initial attribute {write.key!r} has no value")

        existing = self._find_run(request.flow_id)
        if existing is not None:
            reuse = options.id_reuse_policy or pb.ID_REUSE_POLICY_ALLOW_IF_NO_RUNNING
            if existing.is_running:
                rejects = reuse != pb.ID_REUSE_POLICY_ALLOW_TERMINATE_IF_RUNNING
            else:
                rejects = reuse == pb.ID_REUSE_POLICY_DISALLOW_REUSE or (
                    reuse == pb.ID_REUSE_POLICY_ALLOW_IF_PREVIOUS_EXISTS_ABNORMALLY
                    and existing.status == pb.FLOW_STATUS_COMPLETED
                )
            if rejects:
                # The request ID matters only when the policy rejects the start (SDK StartFlowOptions).
                same_request = existing.request_id == request.request_id
                if same_request and options.flow_already_started_options.ignore_already_started_error:
                    return existing.run_id
                raise errors.already_started(request.flow_id)
            if existing.is_running:
                self._close(
                    existing,
                    pb.FLOW_STATUS_TERMINATED,
                    message="terminated by a start with ALLOW_TERMINATE_IF_RUNNING",
                )
                self._transition(existing, durable=True)

        config = pb.FlowConfig()
        override = options.flow_config_override
        config.MergeFrom(override)
        target = pb.WorkerTarget()
        if override.HasField("worker_target") and (
            override.worker_target.address or override.worker_target.is_pull_mode
        ):
            target.CopyFrom(override.worker_target)
        elif self.options.default_worker_target:
            target.address = self.options.default_worker_target
        else:
            target.is_pull_mode = True
        config.worker_target.CopyFrom(target)

        try:
            step_input = pb.Value()
            step_input.CopyFrom(request.step_input)
            self._ingest(step_input, "the start input")
            initial: list[pb.AttributeWrite] = []
            for write in options.attributes:
                copy = pb.AttributeWrite()
                copy.CopyFrom(write)
                self._ingest(copy.value, f"initial attribute {write.key!r}")
                initial.append(copy)
        except ValueTooLargeError as error:
            raise errors.invalid_argument(str(error)) from None

        now = time.time()
        run = FlowRun(
            flow_id=request.flow_id,
            run_id=str(uuid.uuid4()),
            seq=self._next_run_seq,
            flow_type=request.flow_type,
            request_id=request.request_id,
            start_time=now,
            worker_target=target,
            config=config,
            timeout_seconds=request.flow_timeout_seconds,
            timeout_policy=policy,
            timeout_handler=options.timeout_handler_options
            if options.HasField("timeout_handler_options")
            else None,
        )
        self._next_run_seq += 1
        self._runs.setdefault(run.flow_id, []).append(run)
        rt = self._runtime(run)
        self._apply_writes(run, initial)

        def started(event: pb.FlowHistoryEvent) -> None:
            payload = event.flow_started_or_continued
            payload.flow_execution_id.flow_id = run.flow_id
            payload.flow_execution_id.run_id = run.run_id
            payload.flow_type = run.flow_type
            payload.flow_config.CopyFrom(config)
            payload.flow_timeout.seconds = request.flow_timeout_seconds
            payload.flow_timeout_policy = policy
            start = payload.initial_start
            start.start_step_type = request.start_step_type
            start.step_input.CopyFrom(step_input)
            start.step_options.CopyFrom(step_options)
            for write in initial:
                if not requests.is_null(write.value):
                    start.initial_attributes.add(key=write.key, value=write.value)

        self._event(run, started)
        if request.flow_timeout_seconds > 0:
            run.timeout_at = math.ceil(now + request.flow_timeout_seconds)
            self._schedule_timeout(run, rt)
        if request.start_step_type:
            movement = pb.StepMovement(step_type=request.start_step_type, step_input=step_input)
            movement.step_options.CopyFrom(step_options)
            if options.flow_start_delay_seconds > 0:
                run.delayed_start = movement
                run.start_at = now + options.flow_start_delay_seconds
                self._schedule_delayed_start(run, rt)
            else:
                self._queue(run, movement, START_FROM, None)
        self._transition(run, durable=True)
        return run.run_id

    def _check_step_options(self, options: pb.StepOptions, where: str) -> None:
        proceed = options.execute_failure_proceed_step_type
        if proceed and is_reserved_name(proceed):
            raise errors.invalid_argument(
                f"recovery Step type {proceed!r} of {where} must not contain '/', '$' or ':'"
            )

    def _schedule_delayed_start(self, run: FlowRun, rt: _Runtime) -> None:
        def fire() -> None:
            if run.is_running and run.delayed_start is not None:
                movement, run.delayed_start = run.delayed_start, None
                self._queue(run, movement, START_FROM, None)
                self._transition(run, durable=True)

        delay = max(0.0, run.start_at - time.time())
        rt.handles.append(asyncio.get_running_loop().call_later(delay, fire))

    def _schedule_timeout(self, run: FlowRun, rt: _Runtime) -> None:
        delay = max(0.0, run.timeout_at - time.time())
        rt.handles.append(asyncio.get_running_loop().call_later(delay, self._on_flow_timeout, run))

    def _on_flow_timeout(self, run: FlowRun) -> None:
        if not run.is_running:
            return
        message = f"Flow timed out after {run.timeout_seconds} seconds"
        if run.timeout_policy == pb.FLOW_TIMEOUT_POLICY_HANDLER:
            if run.counters.get(requests.TIMEOUT_HANDLER, 0) == 0:
                self._queue(run, requests.timeout_handler_movement(run.timeout_handler), START_FROM, None)
        elif run.timeout_policy == pb.FLOW_TIMEOUT_POLICY_CANCEL:
            self._close(run, pb.FLOW_STATUS_CANCELED, message=message)
        else:
            self._close(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT, message)
        self._transition(run, durable=True)

    # ------------------------------------------------------------------ scheduling

    def _queue(
        self, run: FlowRun, movement: pb.StepMovement, from_id: str, recovery: pb.RecoveryErrorInfo | None
    ) -> Execution:
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
        run.executions[exe.exe_id] = exe
        self._spawn(run, self._runtime(run), exe)
        return exe

    def _spawn(self, run: FlowRun, rt: _Runtime, exe: Execution) -> None:
        rt.wake[exe.exe_id] = asyncio.Event()
        if self._closing:
            return  # persisted with its run; it starts when the devserver starts again
        task = asyncio.get_running_loop().create_task(
            self._run_execution(run, exe), name=f"{run.flow_id}/{exe.exe_id}"
        )
        rt.tasks[exe.exe_id] = task

    def _cancel_executions(self, run: FlowRun, selected: list[Execution]) -> None:
        rt = self._runtime(run)
        current = asyncio.current_task()
        for exe in selected:
            run.executions.pop(exe.exe_id, None)
            rt.wake.pop(exe.exe_id, None)
            task = rt.tasks.pop(exe.exe_id, None)
            if task is not None and task is not current:
                task.cancel()

    def _cancel_by_type(
        self, run: FlowRun, types: Iterable[str], siblings: Iterable[str], current: Execution | None
    ) -> None:
        global_types = set(types)
        sibling_types = set(siblings) - global_types
        selected = [
            exe
            for exe in run.executions.values()
            if exe is not current
            and (
                exe.step_type in global_types
                or (current is not None and exe.step_type in sibling_types and exe.from_id == current.from_id)
            )
        ]
        self._cancel_executions(run, selected)

    def _close(
        self,
        run: FlowRun,
        status: pb.FlowStatus,
        error_type: pb.FlowErrorType = pb.FLOW_ERROR_TYPE_UNSPECIFIED,
        message: str = "",
    ) -> None:
        if not run.is_running:
            return
        run.status = status
        run.error_type = error_type
        run.error_message = message
        run.close_time = time.time()
        run.delayed_start = None
        self._cancel_executions(run, list(run.executions.values()))
        rt = self._runtime(run)
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

        self._event(run, closed)

    # ------------------------------------------------------------------ conditions and timers

    def _evaluate(self, run: FlowRun) -> None:
        now = math.floor(time.time())
        rt = self._runtime(run)
        for exe in sorted(run.executions.values(), key=lambda e: e.seq):
            if exe.phase != Phase.WAITING or exe.condition is None:
                continue
            for index, fire_at in enumerate(exe.timer_fire_at):
                if exe.timer_status[index] == pb.INTERNAL_TIMER_STATUS_PENDING and now >= fire_at:
                    exe.timer_status[index] = pb.INTERNAL_TIMER_STATUS_FIRED
            timer_done = [status != pb.INTERNAL_TIMER_STATUS_PENDING for status in exe.timer_status]
            sizes = {name: len(queue) for name, queue in run.channels.items()}
            chosen = conditions.plan(exe.condition, timer_done, sizes)
            if chosen is None:
                continue
            consumed: dict[int, list[pb.ChannelMessage]] = {}
            for index in sorted(chosen):
                name = exe.condition.channel_conditions[index].channel_name
                queue = run.channels.get(name, [])
                count = chosen[index]
                consumed[index], rest = queue[:count], queue[count:]
                if rest:
                    run.channels[name] = rest
                else:
                    run.channels.pop(name, None)
            exe.condition_results = conditions.build_results(exe.condition, timer_done, consumed)
            exe.phase = Phase.EXECUTE
            exe.reset_method()
            event = rt.wake.get(exe.exe_id)
            if event is not None:
                event.set()
        # The timeout handler is not a user Step: it never holds back a graceful completion.
        user_steps = any(exe.step_type != requests.TIMEOUT_HANDLER for exe in run.executions.values())
        if run.graceful and not user_steps and run.delayed_start is None:
            self._close(run, pb.FLOW_STATUS_COMPLETED)

    def _arm_timers(self, run: FlowRun, rt: _Runtime) -> None:
        loop = asyncio.get_running_loop()
        now = time.time()
        for exe in run.executions.values():
            if exe.phase != Phase.WAITING:
                continue
            for index, fire_at in enumerate(exe.timer_fire_at):
                if exe.timer_status[index] == pb.INTERNAL_TIMER_STATUS_PENDING:
                    rt.handles.append(loop.call_later(max(0.0, fire_at - now), self._on_timer, run))

    def _on_timer(self, run: FlowRun) -> None:
        if run.is_running:
            self._transition(run, durable=True)

    def skip_timer(self, request: pb.SkipTimerRequest) -> None:
        """Marks a pending Timer of a waiting Step as skipped.

        Raises:
            ServiceError: When the Flow is not running or the Timer is not pending.
        """
        run = self.running_run(request.flow_id, request.run_id)
        if request.step_execution_id == _TIMEOUT_STEP and run.timeout_at:
            self._on_flow_timeout(run)
            return
        exe = run.executions.get(request.step_execution_id)
        missing = errors.invalid_argument("requested timer condition does not exist or is not pending")
        if exe is None or exe.phase != Phase.WAITING or exe.condition is None:
            raise missing
        index: int | None = None
        if request.timer_condition_id:
            index = next(
                (
                    i
                    for i, t in enumerate(exe.condition.timer_conditions)
                    if t.condition_id == request.timer_condition_id
                ),
                None,
            )
        elif request.HasField("timer_condition_index"):
            index = request.timer_condition_index
        if index is None or not 0 <= index < len(exe.timer_status):
            raise missing
        if exe.timer_status[index] != pb.INTERNAL_TIMER_STATUS_PENDING:
            raise missing
        exe.timer_status[index] = pb.INTERNAL_TIMER_STATUS_SKIPPED
        self._transition(run, durable=True)

    # ------------------------------------------------------------------ requests to Workers

    async def _lock(self, run: FlowRun, keys: list[str]) -> None:
        rt = self._runtime(run)
        while any(key in rt.locks for key in keys):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            rt.lock_waiters.append(waiter)
            await waiter
        rt.locks.update(keys)

    def _unlock(self, run: FlowRun, keys: list[str]) -> None:
        if not keys:
            return
        rt = self._runtime(run)
        rt.locks.difference_update(keys)
        waiters, rt.lock_waiters = rt.lock_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _on_progress(self, run: FlowRun, exe: Execution, frame: ProgressFrame) -> None:
        if isinstance(frame, pb.StepMethodHeartbeat):
            exe.heartbeat = frame.value if frame.HasField("value") else None
            if run.executions.get(exe.exe_id) is exe:
                self._persist(run, durable=False)
            return
        try:
            self.blobs.ingest(frame.value, f"a write to Stream {frame.stream_name!r}")
        except ValueTooLargeError as error:
            _LOG.warning("dropped a Stream write of %s: %s", exe.exe_id, error)
            return
        self.streams.append(
            (run.flow_type, run.flow_id, frame.stream_name),
            frame.stream_capacity_bytes,
            frame.value,
            f"#{exe.exe_id}",
        )
        self._request_commit()

    async def _invoke_method(
        self, run: FlowRun, exe: Execution, method: requests.Method
    ) -> tuple[MethodResult | WorkerFailure, list[pb.KV]]:
        """Runs one logical method call with its locks and retries.

        Returns:
            The final outcome and the Attributes the method received (for history).
        """
        options = exe.movement.step_options
        method_options = requests.method_options(options, method)
        retry = requests.Retry.of(method_options.retry_policy)
        durable = requests.durability(run, options, method) == pb.STEP_DURABILITY_SYNC
        keys = sorted(
            set(
                options.wait_for_lock_attribute_keys
                if method == "wait_for"
                else options.execute_lock_attribute_keys
            )
        )
        await self._lock(run, keys)
        try:
            failure: WorkerFailure | None = None
            if exe.in_flight:
                exe.in_flight = False
                if durable:
                    failure = WorkerFailure(
                        f"attempt {exe.attempt} was in flight when the devserver stopped; it counts as used",
                        "DEVSERVER_RESTARTED",
                    )
                else:
                    exe.attempt = max(0, exe.attempt - 1)
            request: pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | None = None
            while True:
                if failure is not None:
                    exe.last_failure = pb.StepMethodFailure(
                        backend_error=failure.detail,
                        details=pb.ServiceErrorResponse(
                            detail=failure.detail,
                            sub_status=pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
                            original_worker_error_detail=failure.worker_error.detail
                            if failure.worker_error
                            else "",
                            original_worker_error_type=failure.error_type,
                        ),
                        attempt=exe.attempt,
                    )
                    exe.last_error = pb.RecoveryErrorInfo(
                        detail=failure.detail,
                        error_type=failure.error_type or "FLOW_ERROR_TYPE_WORKER_API_FAIL",
                    )
                    elapsed = time.time() - (exe.first_attempt_time or time.time())
                    delay = failure.retry_after_seconds or retry.delay(exe.attempt)
                    if (retry.maximum_attempts and exe.attempt >= retry.maximum_attempts) or (
                        elapsed + delay > retry.total_duration
                    ):
                        return failure, requests.attributes_of(request)
                    exe.retry_at = time.time() + delay
                    self._persist(run, durable=False)
                    failure = None
                wait = exe.retry_at - time.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if request is None:
                    request = requests.method_request(run, exe, method)
                exe.attempt += 1
                if not exe.first_attempt_time:
                    exe.first_attempt_time = int(time.time())
                    exe.method_started = time.time()
                exe.in_flight = True
                self._persist(run, durable=durable)
                if durable:
                    await self.durable()
                request.context.attempt = exe.attempt
                request.context.first_attempt_timestamp = exe.first_attempt_time
                request.context.ClearField("last_heartbeat_value")
                if exe.heartbeat is not None:
                    request.context.last_heartbeat_value.CopyFrom(exe.heartbeat)
                outcome = await self.dispatcher.invoke(
                    run.worker_target,
                    run.flow_type,
                    method,
                    request,
                    attempt_timeout=float(method_options.timeout_seconds),
                    heartbeat_timeout=float(method_options.heartbeat_timeout_seconds),
                    on_progress=lambda frame: self._on_progress(run, exe, frame),
                )
                exe.in_flight = False
                if isinstance(outcome, WorkerFailure):
                    failure = outcome
                    continue
                problem = self._check_method_result(outcome)
                if problem is not None:
                    failure = WorkerFailure(problem, "dex_devserver.InvalidWorkerResponse")
                    continue
                return outcome, requests.attributes_of(request)
        finally:
            self._unlock(run, keys)

    def _check_method_result(self, result: MethodResult) -> str | None:
        try:
            if isinstance(result, pb.InvokeWaitForMethodResponse):
                if result.HasField("waiting_condition"):
                    problem = conditions.validate(result.waiting_condition)
                    if problem is not None:
                        return f"invalid waiting condition: {problem}"
                self._ingest_effects(
                    result.upsert_attributes,
                    result.publish_to_channel,
                    result.record_events,
                    result.upsert_step_exe_locals,
                )
                return None
            if isinstance(result, pb.InvokeExecuteMethodResponse):
                problem = requests.check_decision(result)
                if problem is not None:
                    return f"invalid step decision: {problem}"
                self._ingest_effects(
                    result.upsert_attributes,
                    result.publish_to_channel,
                    result.record_events,
                    result.upsert_step_exe_locals,
                    result.step_decision,
                )
        except ValueTooLargeError as error:
            return str(error)
        return None

    # ------------------------------------------------------------------ the Step lifecycle

    def _is_current(self, run: FlowRun, exe: Execution) -> bool:
        return not self._closing and run.is_running and run.executions.get(exe.exe_id) is exe

    def _method_event_context(
        self, run: FlowRun, exe: Execution, method: requests.Method
    ) -> pb.StepMethodEventContext:
        options = exe.movement.step_options
        context = pb.StepMethodEventContext(
            step_execution_id=exe.exe_id,
            from_step_execution_id=exe.from_id,
            step_type=exe.step_type,
            durability=requests.durability(run, options, method),
            final_attempt=exe.attempt,
            method_options=requests.method_options(options, method),
        )
        started = exe.method_started or time.time()
        context.started_time.FromNanoseconds(int(started * 1e9))
        context.duration.FromNanoseconds(int((time.time() - started) * 1e9))
        if exe.last_failure is not None:
            context.last_failure_info.CopyFrom(exe.last_failure)
        return context

    async def _run_execution(self, run: FlowRun, exe: Execution) -> None:
        rt = self._runtime(run)
        try:
            if exe.phase == Phase.WAIT_FOR:
                outcome, attributes = await self._invoke_method(run, exe, "wait_for")
                if not self._is_current(run, exe):
                    return
                self._after_wait_for(run, exe, outcome, attributes)
            if exe.phase == Phase.WAITING:
                event = rt.wake.get(exe.exe_id)
                if event is not None:
                    await event.wait()
                if not self._is_current(run, exe):
                    return
            if exe.phase == Phase.EXECUTE:
                outcome, attributes = await self._invoke_method(run, exe, "execute")
                if not self._is_current(run, exe):
                    return
                self._after_execute(run, exe, outcome, attributes)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # a bug must fail the Flow visibly, never hang it
            _LOG.exception("internal error in %s of Flow %s", exe.exe_id, run.flow_id)
            if run.is_running:
                self._close(
                    run,
                    pb.FLOW_STATUS_FAILED,
                    pb.FLOW_ERROR_TYPE_INTERNAL,
                    f"devserver internal error: {error}",
                )
                self._transition(run, durable=True)
        finally:
            if rt.tasks.get(exe.exe_id) is asyncio.current_task():
                del rt.tasks[exe.exe_id]

    def _after_wait_for(
        self,
        run: FlowRun,
        exe: Execution,
        outcome: MethodResult | WorkerFailure,
        attributes: list[pb.KV],
    ) -> None:
        options = exe.movement.step_options
        inputs = pb.StepMethodEventInput(step_input=exe.movement.step_input, attributes=attributes)
        if isinstance(outcome, WorkerFailure):
            context = self._method_event_context(run, exe, "wait_for")
            failure = exe.last_failure or pb.StepMethodFailure(backend_error=outcome.detail)

            def failed(event: pb.FlowHistoryEvent) -> None:
                event.step_wait_for_failed.input.CopyFrom(inputs)
                event.step_wait_for_failed.output.failure.CopyFrom(failure)
                event.step_wait_for_failed.context.CopyFrom(context)

            self._event(run, failed)
            if options.wait_for_failure_policy == pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE:
                exe.execute_recovery = exe.last_error
                exe.condition_results = pb.ConditionResults(wait_for_failed=True)
                exe.locals = []
                exe.phase = Phase.EXECUTE
                exe.reset_method()
                self._transition(run, durable=True)
                return
            self._close(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_WORKER_API_FAIL, outcome.detail)
            self._transition(run, durable=True)
            return
        assert isinstance(outcome, pb.InvokeWaitForMethodResponse)
        self._apply_writes(run, outcome.upsert_attributes)
        self._apply_publishes(run, outcome.publish_to_channel)
        self._apply_deletes(run, outcome.delete_from_channel)
        exe.locals = list(outcome.upsert_step_exe_locals)
        context = self._method_event_context(run, exe, "wait_for")
        durable = context.durability == pb.STEP_DURABILITY_SYNC

        def completed(event: pb.FlowHistoryEvent) -> None:
            payload = event.step_wait_for_completed
            payload.input.CopyFrom(inputs)
            out = payload.output
            if outcome.HasField("waiting_condition"):
                out.wait_for_condition.CopyFrom(outcome.waiting_condition)
            out.upsert_attributes.extend(outcome.upsert_attributes)
            out.publish_to_channel.extend(outcome.publish_to_channel)
            out.record_events.extend(outcome.record_events)
            out.upsert_step_execution_locals.extend(outcome.upsert_step_exe_locals)
            out.delete_from_channel.extend(outcome.delete_from_channel)
            payload.context.CopyFrom(context)

        self._event(run, completed)
        condition = outcome.waiting_condition if outcome.HasField("waiting_condition") else None
        if condition is None or not (condition.timer_conditions or condition.channel_conditions):
            exe.condition_results = pb.ConditionResults()
            exe.phase = Phase.EXECUTE
            exe.reset_method()
        else:
            now = math.floor(time.time())
            exe.condition = condition
            exe.timer_fire_at = [now + int(timer.duration_seconds) for timer in condition.timer_conditions]
            exe.timer_status = [pb.INTERNAL_TIMER_STATUS_PENDING for _ in condition.timer_conditions]
            exe.phase = Phase.WAITING
            exe.reset_method()
            loop = asyncio.get_running_loop()
            rt = self._runtime(run)
            # Fired timers' handles are dropped here so a long-lived Flow does not accumulate them.
            rt.handles = [h for h in rt.handles if not h.cancelled() and h.when() > loop.time()]
            for fire_at in exe.timer_fire_at:
                rt.handles.append(loop.call_later(max(0.0, fire_at - time.time()), self._on_timer, run))
        self._transition(run, durable=durable)

    def _after_execute(
        self,
        run: FlowRun,
        exe: Execution,
        outcome: MethodResult | WorkerFailure,
        attributes: list[pb.KV],
    ) -> None:
        options = exe.movement.step_options
        inputs = pb.StepMethodEventInput(
            step_input=exe.movement.step_input, attributes=attributes, step_execution_locals=exe.locals
        )
        if exe.condition_results is not None:
            inputs.condition_results.CopyFrom(exe.condition_results)
        context = self._method_event_context(run, exe, "execute")
        if isinstance(outcome, WorkerFailure):
            failure = exe.last_failure or pb.StepMethodFailure(backend_error=outcome.detail)

            def failed(event: pb.FlowHistoryEvent) -> None:
                event.step_execute_failed.input.CopyFrom(inputs)
                event.step_execute_failed.output.failure.CopyFrom(failure)
                event.step_execute_failed.context.CopyFrom(context)

            self._event(run, failed)
            run.executions.pop(exe.exe_id, None)
            proceed = options.execute_failure_proceed_step_type
            if (
                options.execute_failure_policy == pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP
                and proceed
            ):
                movement = pb.StepMovement(step_type=proceed, step_input=exe.movement.step_input)
                movement.step_options.CopyFrom(options.execute_failure_proceed_step_options)
                recovery = exe.last_error or pb.RecoveryErrorInfo(
                    detail=outcome.detail, error_type=outcome.error_type or "FLOW_ERROR_TYPE_WORKER_API_FAIL"
                )
                self._queue(run, movement, exe.exe_id, recovery)
            else:
                self._close(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_WORKER_API_FAIL, outcome.detail)
            self._transition(run, durable=True)
            return
        assert isinstance(outcome, pb.InvokeExecuteMethodResponse)
        decision = outcome.step_decision
        for movement in decision.next_steps:
            movement.from_step_execution_id_internal_only = exe.exe_id
            movement.ClearField("recovery_error_internal_only")
        self._apply_writes(run, outcome.upsert_attributes)
        self._apply_publishes(run, outcome.publish_to_channel)
        self._apply_deletes(run, outcome.delete_from_channel)
        run.executions.pop(exe.exe_id, None)
        self._cancel_by_type(run, decision.cancel_step_types, decision.cancel_sibling_step_types, exe)

        def completed(event: pb.FlowHistoryEvent) -> None:
            payload = event.step_execute_completed
            payload.input.CopyFrom(inputs)
            out = payload.output
            out.step_decision.CopyFrom(decision)
            out.upsert_attributes.extend(outcome.upsert_attributes)
            out.publish_to_channel.extend(outcome.publish_to_channel)
            out.record_events.extend(outcome.record_events)
            out.upsert_step_execution_locals.extend(outcome.upsert_step_exe_locals)
            out.delete_from_channel.extend(outcome.delete_from_channel)
            payload.context.CopyFrom(context)

        self._event(run, completed)
        close = decision.close_decision if decision.HasField("close_decision") else None
        close_type = close.close_decision_type if close is not None else pb.CLOSE_DECISION_TYPE_UNSPECIFIED

        def collect() -> None:
            if (
                close is not None
                and close.HasField("close_input")
                and not requests.is_null(close.close_input)
            ):
                run.results.append(
                    pb.StepCompletionOutput(
                        completed_step_type=exe.step_type,
                        completed_step_execution_id=exe.exe_id,
                        completed_step_output=close.close_input,
                    )
                )

        if close is None:
            for movement in decision.next_steps:
                self._queue(run, movement, exe.exe_id, None)
        elif close_type == pb.CLOSE_DECISION_TYPE_GRACEFUL_COMPLETE:
            collect()
            run.graceful = True
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE:
            collect()
            self._close(run, pb.FLOW_STATUS_COMPLETED)
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_FAIL:
            reason = self.blobs.hydrate(close.close_input).string_value
            self._close(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_STEP_DECISION_FAILING_FLOW, reason)
        elif close_type == pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE_ON_CHANNELS_EMPTY:
            assert close is not None
            if all(not run.channels.get(name) for name in close.conditional_channel_names):
                collect()
                self._close(run, pb.FLOW_STATUS_COMPLETED)
            else:
                for movement in decision.next_steps:
                    self._queue(run, movement, exe.exe_id, None)
        durable = context.durability == pb.STEP_DURABILITY_SYNC
        self._transition(run, durable=durable)

    # ------------------------------------------------------------------ client operations

    def stop_flow(self, request: pb.StopFlowRequest) -> None:
        """Cancels, terminates or fails a running Flow.

        Raises:
            ServiceError: When the Flow is not running.
        """
        run = self.running_run(request.flow_id, request.run_id)
        if request.stop_type == pb.STOP_TYPE_FAIL:
            self._close(
                run,
                pb.FLOW_STATUS_FAILED,
                pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW,
                request.reason or "fail by client",
            )
        elif request.stop_type == pb.STOP_TYPE_TERMINATE:
            self._close(run, pb.FLOW_STATUS_TERMINATED, message=request.reason)
        elif request.stop_type in (pb.STOP_TYPE_CANCEL, pb.STOP_TYPE_UNSPECIFIED):
            self._close(run, pb.FLOW_STATUS_CANCELED, message=request.reason)
        else:
            raise errors.invalid_argument(f"unknown stop_type {request.stop_type}")
        self._transition(run, durable=True)

    def set_attributes(self, request: pb.SetAttributesRequest) -> None:
        """Writes Attributes from a client, ignoring locks as the real server does.

        Raises:
            ServiceError: When the Flow is not running, a key is empty or repeated, or a value is too large.
        """
        run = self.running_run(request.flow_id, request.run_id)
        writes = [pb.AttributeWrite(key=w.key, value=w.value) for w in request.attributes]
        keys = [write.key for write in writes]
        if any(not key for key in keys) or len(keys) != len(set(keys)):
            raise errors.invalid_argument("attribute keys must be non-empty and unique")
        try:
            self._ingest_effects(writes, (), ())
        except ValueTooLargeError as error:
            raise errors.invalid_argument(str(error)) from None
        self._apply_writes(run, writes)

        def written(event: pb.FlowHistoryEvent) -> None:
            event.rpc_execution_completed.is_set_attribute_api = True
            event.rpc_execution_completed.upsert_attributes.extend(writes)

        self._event(run, written)
        self._transition(run, durable=True)

    def delete_channel_message(self, request: pb.DeleteChannelMessageRequest) -> None:
        """Deletes one queued message from a client.

        Raises:
            ServiceError: When the Flow is not running or the message is not queued.
        """
        run = self.running_run(request.flow_id, request.run_id)
        deletion = pb.ChannelMessageDeletion(channel_name=request.channel_name, message_id=request.message_id)
        if self._missing_deletion(run, [deletion]) is not None:
            raise errors.channel_message_not_found(request.channel_name, request.message_id)
        self._apply_deletes(run, [deletion])

        def deleted(event: pb.FlowHistoryEvent) -> None:
            event.channel_external_delete.messages.append(deletion)

        self._event(run, deleted)
        self._transition(run, durable=True)

    def update_flow_config(self, request: pb.UpdateFlowConfigRequest) -> None:
        """Merges the fields present in a FlowConfig into a running Flow's config.

        A worker target given with an address or pull mode takes effect for the next Worker task.

        Raises:
            ServiceError: When the Flow is not running.
        """
        run = self.running_run(request.flow_id, request.run_id)
        update = request.flow_config
        target = update.worker_target if update.HasField("worker_target") else None
        merged = pb.FlowConfig()
        merged.CopyFrom(run.config)
        merged.MergeFrom(update)
        if target is not None and (target.address or target.is_pull_mode):
            merged.worker_target.CopyFrom(target)
            run.worker_target = pb.WorkerTarget()
            run.worker_target.CopyFrom(target)
        else:
            merged.worker_target.CopyFrom(run.worker_target)
        run.config = merged
        self._transition(run, durable=True)

    def flow_result(self, run: FlowRun, needs_results: bool) -> pb.FlowResult:
        """Returns the result of a closed run."""
        result = pb.FlowResult(
            flow_status=run.status, error_type=run.error_type, error_message=run.error_message
        )
        if needs_results and run.status == pb.FLOW_STATUS_COMPLETED:
            result.results.extend(run.results)
        return result

    async def wait_for_flow(self, request: pb.WaitForFlowRequest) -> pb.FlowResult:
        """Long-polls until the Flow closes.

        Raises:
            ServiceError: ``FLOW_NOT_EXISTS`` or ``LONG_POLL_TIME_OUT``.
        """
        deadline = time.monotonic() + requests.long_poll(request.wait_time_seconds)
        while True:
            run = self.run_of(request.flow_id, request.run_id)
            if not run.is_running:
                await self.durable()
                return self.flow_result(run, request.needs_results)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout(f"Flow {request.flow_id!r} is still running")
            await self._wait_change(run, remaining, until_closed=True)

    async def wait_for_history_event(
        self, request: pb.WaitForHistoryEventRequest
    ) -> pb.WaitForHistoryEventResponse:
        """Long-polls until a run has an event with ID at least `next_internal_event_id`, or is closed.

        Raises:
            ServiceError: ``FLOW_NOT_EXISTS`` for an unknown Flow or run.
        """
        deadline = time.monotonic() + requests.long_poll(0)
        while True:
            run = self.run_of(request.flow_id, request.run_id)
            available = run.next_event_id - 1
            if available >= request.next_internal_event_id or not run.is_running:
                await self.durable()
                return pb.WaitForHistoryEventResponse(
                    event_available=available >= request.next_internal_event_id,
                    available_internal_event_id=available,
                    flow_status=run.status,
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout(f"no history event {request.next_internal_event_id} yet")
            await self._wait_change(run, remaining)

    async def wait_for_step_completion(self, request: pb.WaitForStepCompletionRequest) -> None:
        """Long-polls until a Step execution is no longer active.

        Raises:
            ServiceError: For unknown Flows, a bad number, or when the wait expires.
        """
        try:
            number = int(request.step_execution_number)
        except ValueError:
            raise errors.invalid_argument(
                f"step_execution_number {request.step_execution_number!r} is not a number"
            ) from None
        exe_id = f"{request.step_type}-{number}"
        timeout = request.request_timeout_seconds
        deadline = time.monotonic() + (requests.long_poll(timeout) if timeout > 0 else 0)
        while True:
            run = self.run_of(request.flow_id)
            started = run.counters.get(request.step_type, 0) >= number
            if started and exe_id not in run.executions:
                await self.durable()
                return
            if not run.is_running:
                raise errors.ServiceError(
                    errors.flow_not_found(request.flow_id).code,
                    pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS,
                    f"Step execution {exe_id!r} never completed in Flow {request.flow_id!r}, which is closed",
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout(f"Step execution {exe_id!r} is still active or not started")
            await self._wait_change(run, remaining)

    async def wait_for_attribute(self, request: pb.WaitForAttributeRequest) -> pb.Value:
        """Long-polls until an Attribute equals a value.

        Raises:
            ServiceError: For unknown Flows, unsupported operators, or when the wait expires.
        """
        match = request.match
        if match.operator not in (pb.ATTRIBUTE_MATCH_OPERATOR_UNSPECIFIED, pb.ATTRIBUTE_MATCH_OPERATOR_EQUAL):
            raise errors.unimplemented(
                f"WaitForAttribute with operator {pb.AttributeMatchOperator.Name(match.operator)}"
            )
        if not match.key:
            raise errors.invalid_argument("the attribute key is required")
        expected = self.blobs.hydrate(match.operand)
        timeout = request.request_timeout_seconds
        deadline = time.monotonic() + (requests.long_poll(timeout) if timeout > 0 else 0)
        while True:
            run = self.run_of(request.flow_id)
            stored = run.attributes.get(match.key)
            current = self.blobs.hydrate(stored) if stored is not None else pb.Value()
            if (requests.is_null(expected) and requests.is_null(current)) or (
                stored is not None and current == expected
            ):
                await self.durable()
                return stored if stored is not None else pb.Value(null_value="NULL_VALUE")
            if not run.is_running:
                raise errors.flow_not_found(request.flow_id)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise errors.long_poll_timeout(f"attribute {match.key!r} does not match yet")
            await self._wait_change(run, remaining)

    def publish(self, request: pb.PublishToChannelRequest) -> None:
        """Publishes client messages to a running Flow, atomically and in order.

        Raises:
            ServiceError: For a closed Flow or invalid messages.
        """
        run = self.running_run(request.flow_id, request.run_id)
        messages = [pb.ChannelMessage(channel_name=m.channel_name, value=m.value) for m in request.messages]
        if not messages:
            return
        if any(not message.channel_name for message in messages):
            raise errors.invalid_argument("every message needs a channel_name")
        try:
            self._ingest_effects((), messages, ())
        except ValueTooLargeError as error:
            raise errors.invalid_argument(str(error)) from None
        self._apply_publishes(run, messages)

        def published(event: pb.FlowHistoryEvent) -> None:
            event.channel_external_publish.messages.extend(messages)

        self._event(run, published)
        self._transition(run, durable=True)

    async def invoke_rpc(self, request: pb.InvokeRPCRequest) -> pb.Value:
        """Runs an RPC handler on a Worker and applies its effects atomically.

        Returns:
            The RPC output.

        Raises:
            ServiceError: For closed Flows with effects, lock conflicts, Worker failures, missing messages
                of a transactional delete, or oversized values.
        """
        if not request.rpc_name:
            raise errors.invalid_argument("rpc_name is required")
        if request.timeout_seconds < 0:
            raise errors.invalid_argument("timeout_seconds must be >= 0")
        if any(not key for key in request.lock_attribute_keys):
            raise errors.invalid_argument("lock_attribute_keys must not contain an empty key")
        run = self.run_of(request.flow_id, request.run_id)
        keys = sorted(set(request.lock_attribute_keys))
        transactional = request.is_transactional or bool(keys)
        if not run.is_running and transactional:
            raise errors.flow_not_found(request.flow_id, request.run_id)
        rt = self._runtime(run)
        held = [key for key in keys if key in rt.locks]
        if held:
            raise errors.lock_conflict(held)
        rpc_input = pb.Value()
        rpc_input.CopyFrom(request.input)
        try:
            self._ingest(rpc_input, f"the input of RPC {request.rpc_name!r}")
        except ValueTooLargeError as error:
            raise errors.invalid_argument(str(error)) from None
        attributes, infos, loaded = requests.state_inputs(
            run,
            request.load_attribute_map_instances,
            request.load_channel_names,
            request.load_channel_map_instances,
        )
        worker_request = pb.InvokeWorkerRPCRequest(
            context=requests.context_for(run, None),
            flow_type=run.flow_type,
            rpc_name=request.rpc_name,
            input=rpc_input,
            attributes=attributes,
            channel_infos=infos,
            loaded_channel_messages=loaded,
            loaded_attribute_map_instances=request.load_attribute_map_instances,
            loaded_channel_names=request.load_channel_names,
            loaded_channel_map_instances=request.load_channel_map_instances,
        )
        timeout = min(float(request.timeout_seconds) or _RPC_TIMEOUT_CAP, _RPC_TIMEOUT_CAP)
        rt.locks.update(keys)
        try:
            outcome = await self.dispatcher.invoke(
                run.worker_target,
                run.flow_type,
                "rpc",
                worker_request,
                attempt_timeout=timeout,
                heartbeat_timeout=None,
                on_progress=lambda _frame: None,
            )
        finally:
            self._unlock(run, keys)
        if isinstance(outcome, WorkerFailure):
            raise errors.worker_api_error(
                f"RPC {request.rpc_name!r} failed: {outcome.detail}",
                outcome.worker_error
                or pb.WorkerErrorResponse(detail=outcome.detail, error_type=outcome.error_type),
            )
        assert isinstance(outcome, pb.InvokeWorkerRPCResponse)
        decision = outcome.step_decision if outcome.HasField("step_decision") else None
        has_effects = bool(
            outcome.upsert_attributes
            or outcome.record_events
            or outcome.publish_to_channel
            or outcome.delete_from_channel
            or (decision is not None and (decision.next_steps or decision.cancel_step_types))
        )
        output = pb.Value()
        output.CopyFrom(outcome.output)
        try:
            self._ingest(output, f"the output of RPC {request.rpc_name!r}")
            self._ingest_effects(
                outcome.upsert_attributes, outcome.publish_to_channel, outcome.record_events, (), decision
            )
        except ValueTooLargeError as error:
            raise errors.invalid_argument(f"RPC {request.rpc_name!r}: {error}") from None
        if not has_effects and not transactional:
            return output
        run = self.run_of(request.flow_id, request.run_id or run.run_id)
        if not run.is_running:
            raise errors.flow_not_found(request.flow_id, request.run_id)
        if decision is not None:
            if decision.HasField("close_decision"):
                raise errors.worker_api_error(
                    f"RPC {request.rpc_name!r} returned a close decision;"
                    " closing a Flow from an RPC is not supported",
                    None,
                )
            if decision.cancel_sibling_step_types:
                raise errors.worker_api_error(
                    f"RPC {request.rpc_name!r} cancels sibling Steps; RPCs have no siblings", None
                )
        if transactional:
            missing = self._missing_deletion(run, outcome.delete_from_channel)
            if missing is not None:
                raise errors.channel_message_not_found(missing.channel_name, missing.message_id)
        self._apply_writes(run, outcome.upsert_attributes)
        self._apply_publishes(run, outcome.publish_to_channel)
        self._apply_deletes(run, outcome.delete_from_channel)
        from_id = f"__rpc/{request.rpc_name}"
        if decision is not None:
            for movement in decision.next_steps:
                movement.from_step_execution_id_internal_only = from_id
            self._cancel_by_type(run, decision.cancel_step_types, (), None)
            for movement in decision.next_steps:
                self._queue(run, movement, from_id, None)

        def completed(event: pb.FlowHistoryEvent) -> None:
            payload = event.rpc_execution_completed
            payload.rpc_name = request.rpc_name
            payload.input.CopyFrom(rpc_input)
            payload.output.CopyFrom(output)
            if decision is not None:
                payload.step_decision.CopyFrom(decision)
            payload.upsert_attributes.extend(outcome.upsert_attributes)
            payload.record_events.extend(outcome.record_events)
            payload.publish_to_channel.extend(outcome.publish_to_channel)
            payload.delete_from_channel.extend(outcome.delete_from_channel)

        self._event(run, completed)
        self._transition(run, durable=True)
        await self.durable()
        return output

    def write_stream(self, request: pb.WriteStreamRequest) -> None:
        """Appends a client message to a Stream.

        Raises:
            ServiceError: For missing fields or an oversized value.
        """
        if not request.flow_id or not request.flow_type or not request.stream_name:
            raise errors.invalid_argument("flow_id, flow_type and stream_name are required")
        if not request.source:
            raise errors.invalid_argument("source is required")
        if request.stream_capacity_bytes <= 0:
            raise errors.invalid_argument("stream_capacity_bytes must be positive")
        try:
            self.blobs.ingest(request.value, f"a write to Stream {request.stream_name!r}")
        except ValueTooLargeError as error:
            raise errors.invalid_argument(str(error)) from None
        self.streams.append(
            (request.flow_type, request.flow_id, request.stream_name),
            request.stream_capacity_bytes,
            request.value,
            request.source,
        )
        self.store.commit()

    # ------------------------------------------------------------------ inspection

    def history(
        self, flow_id: str, run_id: str, first_id: int = 1, limit: int = -1
    ) -> list[pb.FlowHistoryEvent]:
        """Returns up to `limit` (-1: all) of a run's history events from `first_id` on, in order."""
        run = self.run_of(flow_id, run_id)
        events = dict(self.store.load_history(run.flow_id, run.run_id, first_id, limit))
        for event_id, data in self._runtime(run).pending_events:
            if event_id >= first_id:
                events[event_id] = data
        ids = sorted(events)
        if limit >= 0:
            ids = ids[:limit]
        return [pb.FlowHistoryEvent.FromString(events[event_id]) for event_id in ids]

    def flow_state(self, flow_id: str, run_id: str) -> pb.GetFlowStateResponse:
        """Returns a run's current state."""
        run = self.run_of(flow_id, run_id)
        response = pb.GetFlowStateResponse(flow_config=run.config)
        for key in sorted(run.attributes):
            response.attributes.add(key=key, value=run.attributes[key])
        for name, queue in run.channels.items():
            response.pending_channel_messages[name].messages.extend(queue)
        response.completed_steps.extend(run.results)
        if run.delayed_start is not None:
            response.queued_steps.append(run.delayed_start)
        for exe in sorted(run.executions.values(), key=lambda e: e.seq):
            state = response.active_step_executions.add(
                step_execution_id=exe.exe_id,
                from_step_execution_id=exe.from_id,
                step_type=exe.step_type,
                phase=pb.ACTIVE_STEP_PHASE_WAITING
                if exe.phase == Phase.WAITING
                else pb.ACTIVE_STEP_PHASE_ACTIVE,
                movement=exe.movement,
                step_execution_locals=exe.locals,
            )
            if exe.condition is not None:
                state.waiting_condition.waiting_condition_type = exe.condition.waiting_condition_type
                state.waiting_condition.timer_conditions.extend(exe.condition.timer_conditions)
                state.waiting_condition.channel_conditions.extend(exe.condition.channel_conditions)
                state.waiting_condition.condition_combinations.extend(exe.condition.condition_combinations)
                for index, timer in enumerate(exe.condition.timer_conditions):
                    state.timers.add(
                        condition_id=timer.condition_id,
                        firing_unix_timestamp_seconds=exe.timer_fire_at[index],
                        status=exe.timer_status[index],
                    )
            if exe.last_failure is not None:
                state.last_failure_info.CopyFrom(exe.last_failure)
        return response

    def load_blobs(self, request: pb.LoadBlobsRequest) -> pb.LoadBlobsResponse:
        """Resolves blob references; unknown ones are omitted."""
        response = pb.LoadBlobsResponse()
        for entry in request.entries:
            value = entry.blob_value
            kind = value.WhichOneof("kind")
            if kind == "internal_blob_id_for_string_value":
                blob_id = value.internal_blob_id_for_string_value
            elif kind == "internal_blob_id_for_obj_value":
                blob_id = value.internal_blob_id_for_obj_value
            else:
                raise errors.invalid_argument("LoadBlobs accepts only blob references")
            resolved = self.blobs.resolve(blob_id)
            if resolved is not None:
                response.values[blob_id].CopyFrom(resolved)
        return response

    def summary(self, flow_id: str, run_id: str) -> pb.GetFlowSummaryResponse:
        """Returns a run's summary."""
        run = self.run_of(flow_id, run_id)
        response = pb.GetFlowSummaryResponse(
            first_run_id=run.run_id,
            request_id=run.request_id,
            flow_type=run.flow_type,
            flow_status=run.status,
        )
        response.flow_execution_id.flow_id = run.flow_id
        response.flow_execution_id.run_id = run.run_id
        response.start_time.FromNanoseconds(int(run.start_time * 1e9))
        if run.close_time:
            response.close_time.FromNanoseconds(int(run.close_time * 1e9))
        return response
