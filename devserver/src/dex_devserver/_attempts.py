"""Step method attempts: one logical wait_for or execute call with its locks, retries and progress frames."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _conditions as conditions
from . import _effects as effects
from . import _requests as requests
from ._blobs import ValueTooLargeError
from ._dispatch import MethodResult, ProgressFrame, WorkerFailure
from ._model import Execution, FlowRun

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = ["invoke_method"]

_LOG = logging.getLogger("dex_devserver")


def _on_progress(engine: Engine, run: FlowRun, exe: Execution, frame: ProgressFrame) -> None:
    """Keeps a heartbeat for the next attempt, or appends a Stream write from the running method."""
    if isinstance(frame, pb.StepMethodHeartbeat):
        exe.heartbeat = frame.value if frame.HasField("value") else None
        if run.executions.get(exe.exe_id) is exe:
            engine.journal.persist(run, durable=False)
        return
    try:
        engine.blobs.check_size(frame.value, f"a write to Stream {frame.stream_name!r}")
    except ValueTooLargeError as error:
        _LOG.warning("dropped a Stream write of %s: %s", exe.exe_id, error)
        return
    engine.streams.append(
        (run.flow_type, run.flow_id, frame.stream_name),
        frame.stream_capacity_bytes,
        frame.value,
        f"#{exe.exe_id}",
    )
    engine.journal.request_commit()


async def invoke_method(
    engine: Engine, run: FlowRun, exe: Execution, method: requests.Method
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
    await engine.runtimes.of(run).lock(keys)
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
                engine.journal.persist(run, durable=False)
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
            engine.journal.persist(run, durable=durable)
            if durable:
                await engine.journal.durable()
            request.context.attempt = exe.attempt
            request.context.first_attempt_timestamp = exe.first_attempt_time
            request.context.ClearField("last_heartbeat_value")
            if exe.heartbeat is not None:
                request.context.last_heartbeat_value.CopyFrom(exe.heartbeat)
            outcome = await engine.dispatcher.invoke(
                run.worker_target,
                run.flow_type,
                method,
                request,
                attempt_timeout=float(method_options.timeout_seconds),
                heartbeat_timeout=float(method_options.heartbeat_timeout_seconds),
                on_progress=lambda frame: _on_progress(engine, run, exe, frame),
            )
            exe.in_flight = False
            if isinstance(outcome, WorkerFailure):
                failure = outcome
                continue
            problem = _check_method_result(engine, outcome)
            if problem is not None:
                failure = WorkerFailure(problem, "dex_devserver.InvalidWorkerResponse")
                continue
            return outcome, requests.attributes_of(request)
    finally:
        engine.runtimes.of(run).unlock(keys)


def _check_method_result(engine: Engine, result: MethodResult) -> str | None:
    """Validates a Step method's result and ingests its values.

    Returns:
        Why the result is refused (it then fails the attempt, as a Worker error would), or None.
    """
    decision: pb.StepDecision | None = None
    if isinstance(result, pb.InvokeWaitForMethodResponse):
        if result.HasField("waiting_condition"):
            problem = conditions.validate(result.waiting_condition)
            if problem is not None:
                return f"invalid waiting condition: {problem}"
    elif isinstance(result, pb.InvokeExecuteMethodResponse):
        problem = requests.check_decision(result)
        if problem is not None:
            return f"invalid step decision: {problem}"
        decision = result.step_decision
    else:
        return None
    try:
        effects.ingest_effects(
            engine.blobs,
            result.upsert_attributes,
            result.publish_to_channel,
            result.record_events,
            result.upsert_step_exe_locals,
            decision,
        )
    except ValueTooLargeError as error:
        return str(error)
    return None
