"""Step method attempts: one logical wait_for or execute call with its locks, retries and progress frames."""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _conditions as conditions
from . import _effects as effects
from . import _requests as requests
from ._blobs import ValueRefusedError
from ._dispatch import INVALID_WORKER_RESPONSE, MethodResult, ProgressFrame, WorkerFailure
from ._fit import ResponseTooLargeError, fit
from ._model import Execution, FlowRun, detached
from ._sizes import WORKER_REQUEST

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = ["invoke_method"]


def _on_progress(engine: Engine, run: FlowRun, exe: Execution, frame: ProgressFrame) -> str | None:
    """Keeps a heartbeat for the next attempt, or appends a Stream write from the running method.

    Returns:
        Why the frame is refused (the attempt then fails), or None.
    """
    if isinstance(frame, pb.StepMethodHeartbeat):
        exe.heartbeat = detached(frame.value) if frame.HasField("value") else None
        if run.executions.get(exe.exe_id) is exe:
            engine.journal.persist(run, durable=False)
        return None
    try:
        engine.blobs.check(frame.value, f"a write to Stream {frame.stream_name!r}")
    except ValueRefusedError as error:
        return str(error)
    engine.streams.append(
        (run.flow_type, run.flow_id, frame.stream_name),
        frame.stream_capacity_bytes,
        frame.value,
        f"#{exe.exe_id}",
    )
    engine.journal.request_commit()
    return None


def _build_request(
    engine: Engine, run: FlowRun, exe: Execution, method: requests.Method
) -> pb.InvokeWaitForMethodRequest | pb.InvokeExecuteMethodRequest | WorkerFailure:
    """Builds a method request that fits what the SDK can receive, or the failure that it cannot."""
    request = requests.method_request(run, exe, method)
    try:
        fit(
            request,
            lambda value: engine.blobs.offload(value, (run.flow_id, run.run_id)),
            f"the {method} request of {exe.exe_id}",
        )
    except ResponseTooLargeError as error:
        return WorkerFailure(str(error), INVALID_WORKER_RESPONSE)
    engine.blobs.sizes.saw(WORKER_REQUEST, request.ByteSize())
    return request


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
    await run.rt.lock(keys)
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
                if (
                    failure.is_final
                    or (retry.maximum_attempts and exe.attempt >= retry.maximum_attempts)
                    or elapsed + delay > retry.total_duration
                ):
                    return failure, requests.attributes_of(request)
                exe.retry_at = time.time() + delay
                engine.journal.persist(run, durable=False)
                failure = None
            wait = exe.retry_at - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if engine.closing:
                await engine.parked()
            if request is None:
                built = _build_request(engine, run, exe, method)
                if isinstance(built, WorkerFailure):
                    exe.attempt += 1
                    failure = built
                    continue
                request = built
            await _start_attempt(engine, run, exe, durable=durable)
            request.context.attempt = exe.attempt
            request.context.first_attempt_timestamp = exe.first_attempt_time
            request.context.ClearField("last_heartbeat_value")
            if exe.heartbeat is not None:
                request.context.last_heartbeat_value.CopyFrom(exe.heartbeat)
            try:
                outcome = await engine.dispatcher.invoke(
                    run.worker_target,
                    run.flow_type,
                    method,
                    request,
                    attempt_timeout=float(method_options.timeout_seconds),
                    heartbeat_timeout=float(method_options.heartbeat_timeout_seconds),
                    on_sent=lambda: _sent(exe),
                    on_progress=lambda frame: _on_progress(engine, run, exe, frame),
                )
            except asyncio.CancelledError:
                if exe.in_flight and not exe.dispatched:
                    _give_back(exe)
                raise
            exe.in_flight = False
            if isinstance(outcome, WorkerFailure):
                failure = outcome
                continue
            failure = _check_method_result(engine, run, outcome)
            if failure is None:
                return outcome, requests.attributes_of(request)
    finally:
        run.rt.unlock(keys)


async def _start_attempt(engine: Engine, run: FlowRun, exe: Execution, *, durable: bool) -> None:
    """Counts a new attempt and, for SYNC, commits that it may run before the Worker can see it."""
    exe.attempt += 1
    if not exe.first_attempt_time:
        exe.first_attempt_time = int(time.time())
        exe.method_started = time.time()
    exe.in_flight = True
    exe.dispatched = False
    engine.journal.persist(run, durable=durable)
    if durable:
        try:
            await engine.journal.committed()
        except asyncio.CancelledError:
            _give_back(exe)
            raise


def _sent(exe: Execution) -> None:
    exe.dispatched = True


def _give_back(exe: Execution) -> None:
    """Uncounts an attempt that never reached a Worker (cancelled while waiting for one)."""
    exe.in_flight = False
    exe.attempt = max(0, exe.attempt - 1)
    if exe.attempt == 0:
        exe.first_attempt_time = 0
        exe.method_started = 0.0


def _check_method_result(engine: Engine, run: FlowRun, result: MethodResult) -> WorkerFailure | None:
    """Validates a Step method's result and ingests its values.

    Returns:
        Why the result is refused (it then fails the attempt, as a Worker error would), or None.
    """
    decision: pb.StepDecision | None = None
    if isinstance(result, pb.InvokeWaitForMethodResponse):
        if result.HasField("waiting_condition"):
            if result.waiting_condition.sub_flow_conditions:
                # Another attempt would return the same condition: fail the method now, not in 4 hours.
                return WorkerFailure(conditions.SUB_FLOWS_UNSUPPORTED, INVALID_WORKER_RESPONSE, is_final=True)
            problem = conditions.validate(result.waiting_condition)
            if problem is not None:
                return WorkerFailure(f"invalid waiting condition: {problem}", INVALID_WORKER_RESPONSE)
    elif isinstance(result, pb.InvokeExecuteMethodResponse):
        problem = requests.check_decision(result)
        if problem is not None:
            return WorkerFailure(f"invalid step decision: {problem}", INVALID_WORKER_RESPONSE)
        decision = result.step_decision
    else:
        return None
    try:
        effects.ingest_effects(
            engine.blobs,
            (run.flow_id, run.run_id),
            result.upsert_attributes,
            result.publish_to_channel,
            result.record_events,
            result.upsert_step_exe_locals,
            decision,
        )
    except ValueRefusedError as error:
        return WorkerFailure(str(error), INVALID_WORKER_RESPONSE)
    return None
