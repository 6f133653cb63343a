"""Reading runs: history, state, summary, blobs, results, and the long-polls that wait for a change."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _errors as errors
from . import _requests as requests
from ._model import FlowRun, Phase

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = [
    "flow_state",
    "history",
    "load_blobs",
    "summary",
    "wait_for_attribute",
    "wait_for_flow",
    "wait_for_history_event",
    "wait_for_step_completion",
]


def _flow_result(run: FlowRun, needs_results: bool) -> pb.FlowResult:
    """Returns the result of a closed run."""
    result = pb.FlowResult(flow_status=run.status, error_type=run.error_type, error_message=run.error_message)
    if needs_results and run.status == pb.FLOW_STATUS_COMPLETED:
        result.results.extend(run.results)
    return result


async def wait_for_flow(engine: Engine, request: pb.WaitForFlowRequest) -> pb.FlowResult:
    """Long-polls until the Flow closes.

    Raises:
        ServiceError: ``FLOW_NOT_EXISTS`` or ``LONG_POLL_TIME_OUT``.
    """
    deadline = time.monotonic() + requests.long_poll(request.wait_time_seconds)
    while True:
        run = engine.run_of(request.flow_id, request.run_id)
        if not run.is_running:
            await engine.journal.durable()
            return _flow_result(run, request.needs_results)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"Flow {request.flow_id!r} is still running")
        await engine.wait_change(run, remaining, until_closed=True)


async def wait_for_history_event(
    engine: Engine, request: pb.WaitForHistoryEventRequest
) -> pb.WaitForHistoryEventResponse:
    """Long-polls until a run has an event with ID at least `next_internal_event_id`, or is closed.

    Raises:
        ServiceError: ``FLOW_NOT_EXISTS`` for an unknown Flow or run.
    """
    deadline = time.monotonic() + requests.long_poll(0)
    while True:
        run = engine.run_of(request.flow_id, request.run_id)
        available = run.next_event_id - 1
        if available >= request.next_internal_event_id or not run.is_running:
            await engine.journal.durable()
            return pb.WaitForHistoryEventResponse(
                event_available=available >= request.next_internal_event_id,
                available_internal_event_id=available,
                flow_status=run.status,
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"no history event {request.next_internal_event_id} yet")
        await engine.wait_change(run, remaining)


async def wait_for_step_completion(engine: Engine, request: pb.WaitForStepCompletionRequest) -> None:
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
        run = engine.run_of(request.flow_id)
        started = run.counters.get(request.step_type, 0) >= number
        if started and exe_id not in run.executions:
            await engine.journal.durable()
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
        await engine.wait_change(run, remaining)


async def wait_for_attribute(engine: Engine, request: pb.WaitForAttributeRequest) -> pb.Value:
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
    expected = engine.blobs.hydrate(match.operand)
    timeout = request.request_timeout_seconds
    deadline = time.monotonic() + (requests.long_poll(timeout) if timeout > 0 else 0)
    while True:
        run = engine.run_of(request.flow_id)
        stored = run.attributes.get(match.key)
        current = engine.blobs.hydrate(stored) if stored is not None else pb.Value()
        if (requests.is_null(expected) and requests.is_null(current)) or (
            stored is not None and current == expected
        ):
            await engine.journal.durable()
            return stored if stored is not None else pb.Value(null_value="NULL_VALUE")
        if not run.is_running:
            raise errors.flow_not_found(request.flow_id)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"attribute {match.key!r} does not match yet")
        await engine.wait_change(run, remaining)


def history(
    engine: Engine, flow_id: str, run_id: str, first_id: int = 1, limit: int = -1
) -> list[pb.FlowHistoryEvent]:
    """Returns up to `limit` (-1: all) of a run's history events from `first_id` on, in order."""
    run = engine.run_of(flow_id, run_id)
    events = dict(engine.store.load_history(run.flow_id, run.run_id, first_id, limit))
    for event_id, data in engine.runtimes.of(run).pending_events:
        if event_id >= first_id:
            events[event_id] = data
    ids = sorted(events)
    if limit >= 0:
        ids = ids[:limit]
    return [pb.FlowHistoryEvent.FromString(events[event_id]) for event_id in ids]


def flow_state(engine: Engine, flow_id: str, run_id: str) -> pb.GetFlowStateResponse:
    """Returns a run's current state."""
    run = engine.run_of(flow_id, run_id)
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
            phase=pb.ACTIVE_STEP_PHASE_WAITING if exe.phase == Phase.WAITING else pb.ACTIVE_STEP_PHASE_ACTIVE,
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


def load_blobs(engine: Engine, request: pb.LoadBlobsRequest) -> pb.LoadBlobsResponse:
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
        resolved = engine.blobs.resolve(blob_id)
        if resolved is not None:
            response.values[blob_id].CopyFrom(resolved)
    return response


def summary(engine: Engine, flow_id: str, run_id: str) -> pb.GetFlowSummaryResponse:
    """Returns a run's summary."""
    run = engine.run_of(flow_id, run_id)
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
