"""History event shapes and the `dexcli flow history` JSON rendering."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, cast

from dex.dexpb import dex_pb2 as pb
from google.protobuf import json_format

__all__ = [
    "EVENT_TYPES",
    "blob_values",
    "event_json",
    "event_type",
    "new_event",
    "retry_policy_with_defaults",
    "values_in",
]

EVENT_TYPES = {
    "flow_started_or_continued": "FlowStartedOrContinued",
    "flow_closed": "FlowClosed",
    "step_wait_for_completed": "StepWaitForCompleted",
    "step_wait_for_failed": "StepWaitForFailed",
    "step_execute_completed": "StepExecuteCompleted",
    "step_execute_failed": "StepExecuteFailed",
    "rpc_execution_completed": "RpcExecutionCompleted",
    "channel_external_publish": "ChannelExternalPublish",
    "channel_external_delete": "ChannelExternalDelete",
}


def new_event(event_id: int) -> pb.FlowHistoryEvent:
    """Returns an empty event stamped with its ID and the current time."""
    event = pb.FlowHistoryEvent(event_id=event_id)
    event.event_time.FromNanoseconds(time.time_ns())
    return event


def retry_policy_with_defaults(policy: pb.RetryPolicy) -> pb.RetryPolicy:
    """Returns a retry policy with the server defaults filled in, as history shows it."""
    return pb.RetryPolicy(
        initial_interval_seconds=policy.initial_interval_seconds or 1,
        backoff_coefficient=policy.backoff_coefficient or 2.0,
        maximum_interval_seconds=policy.maximum_interval_seconds or 100,
        maximum_attempts=policy.maximum_attempts,
        total_duration_seconds=policy.total_duration_seconds or 4 * 3600,
    )


def event_type(event: pb.FlowHistoryEvent) -> str:
    """Returns an event's type as `dexcli flow history` prints it (``Unspecified`` for unknown kinds)."""
    return EVENT_TYPES.get(event.WhichOneof("payload") or "", "Unspecified")


def event_json(event: pb.FlowHistoryEvent) -> dict[str, Any]:
    """Renders an event as ``{eventId, eventTime, type, payload}``."""
    kind = event.WhichOneof("payload") or ""
    payload: dict[str, Any] = (
        json_format.MessageToDict(getattr(event, kind), preserving_proto_field_name=False) if kind else {}
    )
    return {
        "eventId": str(event.event_id),
        "eventTime": event.event_time.ToJsonString(),
        "type": event_type(event),
        "payload": payload,
    }


def values_in(message: Any) -> Iterator[pb.Value]:
    """Yields every `Value` inside a message (the message itself when it is one), depth first."""
    if isinstance(message, pb.Value):
        yield message
        return
    # The protobuf runtime has no type stubs; ListFields yields (descriptor, value) pairs.
    for descriptor, value in cast("list[tuple[Any, Any]]", message.ListFields()):
        if descriptor.message_type is None:
            continue
        if descriptor.message_type.GetOptions().map_entry:
            for item in cast("dict[Any, Any]", value).values():
                if hasattr(item, "ListFields"):
                    yield from values_in(item)
        elif descriptor.is_repeated:
            for item in cast("list[Any]", value):
                yield from values_in(item)
        else:
            yield from values_in(value)


def blob_values(message: Any) -> Iterator[pb.Value]:
    """Yields every `Value` inside a message that is a blob reference, so a caller can hydrate them."""
    return (
        value
        for value in values_in(message)
        if value.WhichOneof("kind") in ("internal_blob_id_for_string_value", "internal_blob_id_for_obj_value")
    )
