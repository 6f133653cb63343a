"""Reading runs: history, state, summary, blobs, results, and the long-polls that wait for a change.

Every answer reports committed state only: a query builds its answer, then settles the run (commits what it
has pending, ASYNC results included) before replying, so a devserver killed right after cannot take back
what a client was told. Answers that could exceed the SDK's 4 MiB receive limit are paged by bytes or have
their largest values offloaded to blobs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from . import _errors as errors
from . import _requests as requests
from . import _rows as rows
from ._blobs import BLOB_REFERENCE_KINDS
from ._fit import RESPONSE_BUDGET, ResponseTooLargeError, fit
from ._model import FlowRun, Phase
from ._sizes import LOAD_BLOBS_RESPONSE, QUERY_RESPONSE

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = [
    "attributes",
    "channel_messages",
    "flow_state",
    "history",
    "history_page",
    "load_blobs",
    "summary",
    "wait_for_attribute",
    "wait_for_flow",
    "wait_for_history_event",
    "wait_for_step_completion",
]

_DEFAULT_HISTORY_PAGE = 100
_MAX_HISTORY_PAGE = 1000
# What an event costs in a page beyond its own bytes (the repeated field's tag and length).
_EVENT_OVERHEAD = 8
# What a LoadBlobs map entry costs beyond its key and value: the tags and lengths of both and the entry's.
_MAP_ENTRY_OVERHEAD = 16


async def _reply(engine: Engine, run: FlowRun, response: Message, what: str) -> None:
    """Fits a response built from a run's state and commits that state (and any offloaded value)."""
    try:
        fit(response, lambda value: engine.blobs.offload(value, (run.flow_id, run.run_id)), what)
    except ResponseTooLargeError as error:
        raise errors.response_too_large(str(error)) from None
    engine.blobs.sizes.saw(QUERY_RESPONSE, response.ByteSize())
    await engine.journal.settle(run)


async def wait_for_flow(engine: Engine, request: pb.WaitForFlowRequest) -> pb.FlowResult:
    """Long-polls until the Flow closes.

    Raises:
        ServiceError: ``FLOW_NOT_EXISTS`` or ``LONG_POLL_TIME_OUT``.
    """
    deadline = time.monotonic() + requests.long_poll(request.wait_time_seconds)
    while True:
        run = engine.run_of(request.flow_id, request.run_id)
        if not run.is_running:
            result = pb.FlowResult(
                flow_status=run.status, error_type=run.error_type, error_message=run.error_message
            )
            if request.needs_results and run.status == pb.FLOW_STATUS_COMPLETED:
                result.results.extend(run.results)
            await _reply(engine, run, result, f"the result of Flow {run.flow_id!r}")
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"Flow {request.flow_id!r} is still running")
        await run.rt.wait_change(remaining, until_closed=True)


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
            response = pb.WaitForHistoryEventResponse(
                event_available=available >= request.next_internal_event_id,
                available_internal_event_id=available,
                flow_status=run.status,
            )
            await engine.journal.settle(run)
            return response
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"no history event {request.next_internal_event_id} yet")
        await run.rt.wait_change(remaining)


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
            await engine.journal.settle(run)
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
        await run.rt.wait_change(remaining)


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
    if match.operand.WhichOneof("kind") in BLOB_REFERENCE_KINDS:
        raise errors.invalid_argument("the operand is a blob reference; send the value itself")
    expected = match.operand
    timeout = request.request_timeout_seconds
    deadline = time.monotonic() + (requests.long_poll(timeout) if timeout > 0 else 0)
    while True:
        run = engine.run_of(request.flow_id)
        stored = run.attributes.get(match.key)
        current = engine.blobs.hydrate(run.flow_id, stored) if stored is not None else pb.Value()
        if (requests.is_null(expected) and requests.is_null(current)) or (
            stored is not None and current == expected
        ):
            await engine.journal.settle(run)
            return stored if stored is not None else pb.Value(null_value="NULL_VALUE")
        if not run.is_running:
            raise errors.flow_not_found(request.flow_id)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.long_poll_timeout(f"attribute {match.key!r} does not match yet")
        await run.rt.wait_change(remaining)


def history(engine: Engine, flow_id: str, run_id: str = "") -> list[pb.FlowHistoryEvent]:
    """Returns every committed history event of a run, in order (for tools; clients page)."""
    run = engine.run_of(flow_id, run_id)
    return [
        pb.FlowHistoryEvent.FromString(data)
        for data in rows.load_history(engine.store, run.flow_id, run.run_id, 1, -1)
    ]


async def history_page(engine: Engine, request: pb.GetHistoryEventsRequest) -> pb.GetHistoryEventsResponse:
    """Returns a page of committed history events: at most 1,000, and under the SDK's receive limit.

    Raises:
        ServiceError: For an unknown run or a token the devserver did not issue.
    """
    start = max(request.start_internal_event_id, 1)
    if request.next_page_token:
        start = requests.parse_token(request.next_page_token.decode(errors="replace"), "next_page_token")
    size = min(request.estimate_page_size, _MAX_HISTORY_PAGE) if request.estimate_page_size > 0 else 0
    size = size or _DEFAULT_HISTORY_PAGE
    run = engine.run_of(request.flow_id, request.run_id)
    await engine.journal.settle(run)
    stored = rows.load_history(engine.store, run.flow_id, run.run_id, start, size + 1)
    page: list[bytes] = []
    total = 0
    for data in stored[:size]:
        cost = len(data) + _EVENT_OVERHEAD
        if page and total + cost > RESPONSE_BUDGET:
            break
        page.append(data)
        total += cost
    response = pb.GetHistoryEventsResponse(events=[pb.FlowHistoryEvent.FromString(data) for data in page])
    if len(page) == 1 and total > RESPONSE_BUDGET:
        (event,) = response.events
        await _reply(engine, run, response, f"history event {event.event_id} of Flow {run.flow_id!r}")
    next_id = response.events[-1].event_id + 1 if page else start
    response.next_internal_event_id = next_id
    if len(stored) > len(page):
        response.next_page_token = str(next_id).encode()
    return response


async def flow_state(engine: Engine, flow_id: str, run_id: str) -> pb.GetFlowStateResponse:
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
    for exe in run.executions.values():
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
    await _reply(engine, run, response, f"the state of Flow {run.flow_id!r}")
    return response


async def attributes(engine: Engine, request: pb.GetAttributesRequest) -> pb.GetAttributesResponse:
    """Returns a run's Attributes (all of them, or the keys asked for)."""
    run = engine.run_of(request.flow_id, request.run_id)
    keys = sorted(run.attributes) if request.all_keys else list(request.keys)
    response = pb.GetAttributesResponse()
    for key in keys:
        if key in run.attributes:
            response.attributes.add(key=key, value=run.attributes[key])
    await _reply(engine, run, response, f"the Attributes of Flow {run.flow_id!r}")
    return response


async def channel_messages(
    engine: Engine, request: pb.GetChannelMessagesRequest
) -> pb.GetChannelMessagesResponse:
    """Returns the messages queued in one of a run's Channels, oldest first."""
    run = engine.run_of(request.flow_id, request.run_id)
    response = pb.GetChannelMessagesResponse(messages=run.channels.get(request.channel_name, ()))
    await _reply(engine, run, response, f"Channel {request.channel_name!r} of Flow {run.flow_id!r}")
    return response


async def load_blobs(engine: Engine, request: pb.LoadBlobsRequest) -> pb.LoadBlobsResponse:
    """Resolves blob references of the Flows named in the request; blobs of other Flows are omitted.

    Raises:
        ServiceError: For an entry that is not a blob reference, or a response the SDK could not receive.
    """
    # A reference may have been issued moments ago; its blob is committed before it is served.
    await engine.journal.durable()
    response = pb.LoadBlobsResponse()
    size = 0
    for position, entry in enumerate(request.entries, start=1):
        value = entry.blob_value
        kind = value.WhichOneof("kind")
        if kind == "internal_blob_id_for_string_value":
            blob_id = value.internal_blob_id_for_string_value
        elif kind == "internal_blob_id_for_obj_value":
            blob_id = value.internal_blob_id_for_obj_value
        else:
            raise errors.invalid_argument("LoadBlobs accepts only blob references")
        resolved = engine.blobs.resolve(entry.flow_id, blob_id)
        if resolved is None:
            continue
        # A map entry costs its key and its value, each with a tag and a length.
        size += resolved.ByteSize() + len(blob_id) + _MAP_ENTRY_OVERHEAD
        if size > RESPONSE_BUDGET:
            # Refused before the rest is read: a caller that splits its request should not make the server
            # build a response of every blob first.
            raise errors.response_too_large(
                f"the {len(request.entries)} blobs asked for in one LoadBlobs call are more than {size} bytes"
                f" together (counted {position} of them), above the 4 MiB the SDK can receive; ask for fewer"
                " at a time, or keep fewer large values in the Flow's Attributes"
            )
        response.values[blob_id].CopyFrom(resolved)
    engine.blobs.sizes.saw(LOAD_BLOBS_RESPONSE, response.ByteSize())
    return response


async def summary(engine: Engine, flow_id: str, run_id: str) -> pb.GetFlowSummaryResponse:
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
    await engine.journal.settle(run)
    return response
