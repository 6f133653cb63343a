"""Flow lifecycle: starting a run, its delayed start and Flow timeout, and client stops and changes."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _effects as effects
from . import _errors as errors
from . import _requests as requests
from ._blobs import ValueRefusedError
from ._model import START_FROM, FlowRun, Phase, is_reserved_name
from ._runtime import Runtime

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = [
    "on_flow_timeout",
    "schedule_delayed_start",
    "schedule_timeout",
    "skip_timer",
    "start_flow",
    "stop_flow",
    "update_flow_config",
]

# SkipTimer on this execution ID fires the Flow timeout at once (the handler runs as this execution).
_TIMEOUT_STEP = f"{requests.TIMEOUT_HANDLER}-1"


def start_flow(engine: Engine, request: pb.StartFlowRequest) -> str:
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
    _check_step_options(step_options, request.start_step_type or "start")
    keys: set[str] = set()
    for write in options.attributes:
        if not write.key:
            raise errors.invalid_argument("initial attributes need non-empty keys")
        if write.key in keys:
            raise errors.invalid_argument(f"initial attribute {write.key!r} is given twice")
        keys.add(write.key)
        if write.value.WhichOneof("kind") is None:
            raise errors.invalid_argument(f"initial attribute {write.key!r} has no value")

    existing = engine.find_run(request.flow_id)
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
            engine.close_run(
                existing,
                pb.FLOW_STATUS_TERMINATED,
                message="terminated by a start with ALLOW_TERMINATE_IF_RUNNING",
            )
            engine.transition(existing, durable=True)

    config = pb.FlowConfig()
    override = options.flow_config_override
    config.MergeFrom(override)
    target = pb.WorkerTarget()
    if override.HasField("worker_target") and (
        override.worker_target.address or override.worker_target.is_pull_mode
    ):
        target.CopyFrom(override.worker_target)
    elif engine.options.default_worker_target:
        target.address = engine.options.default_worker_target
    else:
        target.is_pull_mode = True
    config.worker_target.CopyFrom(target)

    run_id = str(uuid.uuid4())
    owner = (request.flow_id, run_id)
    try:
        step_input = pb.Value()
        step_input.CopyFrom(request.step_input)
        effects.ingest(engine.blobs, step_input, "the start input", owner)
        initial: list[pb.AttributeWrite] = []
        for write in options.attributes:
            copy = pb.AttributeWrite()
            copy.CopyFrom(write)
            effects.ingest(engine.blobs, copy.value, f"initial attribute {write.key!r}", owner)
            initial.append(copy)
    except ValueRefusedError as error:
        raise errors.invalid_argument(str(error)) from None

    now = time.time()
    run = FlowRun(
        flow_id=request.flow_id,
        run_id=run_id,
        seq=engine.next_run_seq,
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
    engine.next_run_seq += 1
    engine.live[run.flow_id] = run
    rt = run.rt
    effects.apply_writes(run, initial)

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

    engine.journal.record(run, started)
    if request.flow_timeout_seconds > 0:
        run.timeout_at = math.ceil(now + request.flow_timeout_seconds)
        schedule_timeout(engine, run, rt)
    if request.start_step_type:
        movement = pb.StepMovement(step_type=request.start_step_type, step_input=step_input)
        movement.step_options.CopyFrom(step_options)
        if options.flow_start_delay_seconds > 0:
            run.delayed_start = movement
            run.start_at = now + options.flow_start_delay_seconds
            schedule_delayed_start(engine, run, rt)
        else:
            engine.queue(run, movement, START_FROM, None)
    engine.transition(run, durable=True)
    return run.run_id


def _check_step_options(options: pb.StepOptions, where: str) -> None:
    """Refuses a recovery Step type with a reserved character."""
    proceed = options.execute_failure_proceed_step_type
    if proceed and is_reserved_name(proceed):
        raise errors.invalid_argument(
            f"recovery Step type {proceed!r} of {where} must not contain '/', '$' or ':'"
        )


def schedule_delayed_start(engine: Engine, run: FlowRun, rt: Runtime) -> None:
    """Queues the start Step of a delayed start when its delay has passed."""

    def fire() -> None:
        if run.is_running and run.delayed_start is not None:
            movement, run.delayed_start = run.delayed_start, None
            engine.queue(run, movement, START_FROM, None)
            engine.transition(run, durable=True)

    delay = max(0.0, run.start_at - time.time())
    rt.handles.append(asyncio.get_running_loop().call_later(delay, fire))


def schedule_timeout(engine: Engine, run: FlowRun, rt: Runtime) -> None:
    """Fires the Flow timeout at its deadline."""
    delay = max(0.0, run.timeout_at - time.time())
    rt.handles.append(asyncio.get_running_loop().call_later(delay, on_flow_timeout, engine, run))


def on_flow_timeout(engine: Engine, run: FlowRun) -> None:
    """Applies the Flow timeout policy: runs the handler (once), cancels, or fails the run."""
    if not run.is_running:
        return
    message = f"Flow timed out after {run.timeout_seconds} seconds"
    if run.timeout_policy == pb.FLOW_TIMEOUT_POLICY_HANDLER:
        if run.counters.get(requests.TIMEOUT_HANDLER, 0) == 0:
            engine.queue(run, requests.timeout_handler_movement(run.timeout_handler), START_FROM, None)
    elif run.timeout_policy == pb.FLOW_TIMEOUT_POLICY_CANCEL:
        engine.close_run(run, pb.FLOW_STATUS_CANCELED, message=message)
    else:
        engine.close_run(run, pb.FLOW_STATUS_FAILED, pb.FLOW_ERROR_TYPE_FLOW_TIMEOUT, message)
    engine.transition(run, durable=True)


def skip_timer(engine: Engine, request: pb.SkipTimerRequest) -> None:
    """Marks a pending Timer of a waiting Step as skipped.

    Raises:
        ServiceError: When the Flow is not running or the Timer is not pending.
    """
    run = engine.running_run(request.flow_id, request.run_id)
    if request.step_execution_id == _TIMEOUT_STEP and run.timeout_at:
        on_flow_timeout(engine, run)
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
    exe.set_timer_status(index, pb.INTERNAL_TIMER_STATUS_SKIPPED)
    engine.transition(run, durable=True)


def stop_flow(engine: Engine, request: pb.StopFlowRequest) -> None:
    """Cancels, terminates or fails a running Flow.

    Raises:
        ServiceError: When the Flow is not running.
    """
    run = engine.running_run(request.flow_id, request.run_id)
    if request.stop_type == pb.STOP_TYPE_FAIL:
        engine.close_run(
            run,
            pb.FLOW_STATUS_FAILED,
            pb.FLOW_ERROR_TYPE_CLIENT_API_FAILING_FLOW,
            request.reason or "fail by client",
        )
    elif request.stop_type == pb.STOP_TYPE_TERMINATE:
        engine.close_run(run, pb.FLOW_STATUS_TERMINATED, message=request.reason)
    elif request.stop_type in (pb.STOP_TYPE_CANCEL, pb.STOP_TYPE_UNSPECIFIED):
        engine.close_run(run, pb.FLOW_STATUS_CANCELED, message=request.reason)
    else:
        raise errors.invalid_argument(f"unknown stop_type {request.stop_type}")
    engine.transition(run, durable=True)


def update_flow_config(engine: Engine, request: pb.UpdateFlowConfigRequest) -> None:
    """Merges the fields present in a FlowConfig into a running Flow's config.

    A worker target given with an address or pull mode takes effect for the next Worker task.

    Raises:
        ServiceError: When the Flow is not running.
    """
    run = engine.running_run(request.flow_id, request.run_id)
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
    engine.transition(run, durable=True)
