"""Client writes to a running Flow: Channel publishes and deletes, Attributes, and Stream writes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex.dexpb import dex_pb2 as pb

from . import _effects as effects
from . import _errors as errors
from ._blobs import ValueRefusedError

if TYPE_CHECKING:
    from ._engine import Engine


__all__ = ["delete_channel_message", "publish", "set_attributes", "write_stream"]


def set_attributes(engine: Engine, request: pb.SetAttributesRequest) -> None:
    """Writes Attributes from a client, ignoring locks as the real server does.

    Raises:
        ServiceError: When the Flow is not running, a key is empty or repeated, or a value is too large.
    """
    run = engine.running_run(request.flow_id, request.run_id)
    writes = [pb.AttributeWrite(key=w.key, value=w.value) for w in request.attributes]
    keys = [write.key for write in writes]
    if any(not key for key in keys) or len(keys) != len(set(keys)):
        raise errors.invalid_argument("attribute keys must be non-empty and unique")
    try:
        effects.ingest_effects(engine.blobs, (run.flow_id, run.run_id), writes, (), ())
    except ValueRefusedError as error:
        raise errors.invalid_argument(str(error)) from None
    effects.apply_writes(run, writes)

    def written(event: pb.FlowHistoryEvent) -> None:
        event.rpc_execution_completed.is_set_attribute_api = True
        event.rpc_execution_completed.upsert_attributes.extend(writes)

    engine.journal.record(run, written)
    engine.transition(run, durable=True)


def delete_channel_message(engine: Engine, request: pb.DeleteChannelMessageRequest) -> None:
    """Deletes one queued message from a client.

    Raises:
        ServiceError: When the Flow is not running or the message is not queued.
    """
    run = engine.running_run(request.flow_id, request.run_id)
    deletion = pb.ChannelMessageDeletion(channel_name=request.channel_name, message_id=request.message_id)
    if effects.missing_deletion(run, [deletion]) is not None:
        raise errors.channel_message_not_found(request.channel_name, request.message_id)
    effects.apply_deletes(run, [deletion])

    def deleted(event: pb.FlowHistoryEvent) -> None:
        event.channel_external_delete.messages.append(deletion)

    engine.journal.record(run, deleted)
    engine.transition(run, durable=True)


def publish(engine: Engine, request: pb.PublishToChannelRequest) -> None:
    """Publishes client messages to a running Flow, atomically and in order.

    Raises:
        ServiceError: For a closed Flow or invalid messages.
    """
    run = engine.running_run(request.flow_id, request.run_id)
    messages = [pb.ChannelMessage(channel_name=m.channel_name, value=m.value) for m in request.messages]
    if not messages:
        return
    if any(not message.channel_name for message in messages):
        raise errors.invalid_argument("every message needs a channel_name")
    try:
        effects.ingest_effects(engine.blobs, (run.flow_id, run.run_id), (), messages, ())
    except ValueRefusedError as error:
        raise errors.invalid_argument(str(error)) from None
    effects.apply_publishes(run, messages)

    def published(event: pb.FlowHistoryEvent) -> None:
        event.channel_external_publish.messages.extend(messages)

    engine.journal.record(run, published)
    engine.transition(run, durable=True)


def write_stream(engine: Engine, request: pb.WriteStreamRequest) -> None:
    """Appends a client message to a Stream (acknowledge it once `Journal.durable` returns).

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
        engine.blobs.check(request.value, f"a write to Stream {request.stream_name!r}")
    except ValueRefusedError as error:
        raise errors.invalid_argument(str(error)) from None
    engine.streams.append(
        (request.flow_type, request.flow_id, request.stream_name),
        request.stream_capacity_bytes,
        request.value,
        request.source,
    )
    engine.journal.request_commit()
