"""A method's or a client's effects on a run: offloading their values, then applying them to its state.

Values are ingested (offloaded to blobs and size-checked) before anything is applied, so an oversized value
refuses the whole result and never leaves a run half-changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex.dexpb import dex_pb2 as pb

from . import _requests as requests
from ._blobs import Blobs
from ._dispatch import MethodResult
from ._model import FlowRun

__all__ = [
    "apply_deletes",
    "apply_effects",
    "apply_publishes",
    "apply_writes",
    "ingest",
    "ingest_effects",
    "missing_deletion",
]


def ingest(blobs: Blobs, value: pb.Value, what: str) -> None:
    """Offloads a large value in place.

    Args:
        blobs: The blob store.
        value: The value, replaced by a blob reference when it is large.
        what: Names the value in the error.

    Raises:
        ValueTooLargeError: When the value is above the size limit.
    """
    if value.WhichOneof("kind") in ("string_value", "obj_value"):
        stored = blobs.ingest(value, what)
        if stored is not value:
            value.CopyFrom(stored)


def ingest_effects(
    blobs: Blobs,
    writes: Iterable[pb.AttributeWrite],
    publishes: Iterable[pb.ChannelMessage],
    events: Iterable[pb.KV],
    locals_: Iterable[pb.KV] = (),
    decision: pb.StepDecision | None = None,
) -> None:
    """Ingests every value of a result: Attributes, messages, events, locals, next inputs, Flow output.

    Raises:
        ValueTooLargeError: Naming the first value above the size limit.
    """
    for write in writes:
        ingest(blobs, write.value, f"attribute {write.key!r}")
    for message in publishes:
        ingest(blobs, message.value, f"a message published to channel {message.channel_name!r}")
    for kv in events:
        ingest(blobs, kv.value, f"recorded event {kv.key!r}")
    for kv in locals_:
        ingest(blobs, kv.value, f"Step execution local {kv.key!r}")
    if decision is not None:
        for movement in decision.next_steps:
            ingest(blobs, movement.step_input, f"the input of next Step {movement.step_type!r}")
        if decision.HasField("close_decision") and decision.close_decision.HasField("close_input"):
            ingest(blobs, decision.close_decision.close_input, "the Flow output")


def apply_effects(run: FlowRun, result: MethodResult, changed: set[str]) -> None:
    """Applies a method's or an RPC's Attribute writes, then its publishes, then its deletes."""
    apply_writes(run, result.upsert_attributes, changed)
    apply_publishes(run, result.publish_to_channel)
    apply_deletes(run, result.delete_from_channel)


def apply_writes(run: FlowRun, writes: Iterable[pb.AttributeWrite], changed: set[str]) -> None:
    """Writes Attributes (a null value deletes one) and adds their keys to `changed` for the next commit."""
    for write in writes:
        changed.add(write.key)
        if requests.is_null(write.value):
            run.attributes.pop(write.key, None)
        else:
            run.attributes[write.key] = write.value


def apply_publishes(run: FlowRun, publishes: Iterable[pb.ChannelMessage]) -> None:
    """Queues messages with new IDs, also stamped on the given messages so history shows them."""
    for message in publishes:
        stored = pb.ChannelMessage(channel_name=message.channel_name, message_id=requests.new_message_id())
        stored.value.CopyFrom(message.value)
        message.message_id = stored.message_id
        run.channels.setdefault(message.channel_name, []).append(stored)


def apply_deletes(run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]) -> None:
    """Removes queued messages by ID; a message that is not queued is ignored."""
    for deletion in deletions:
        queue = run.channels.get(deletion.channel_name, [])
        run.channels[deletion.channel_name] = [m for m in queue if m.message_id != deletion.message_id]
        if not run.channels[deletion.channel_name]:
            del run.channels[deletion.channel_name]


def missing_deletion(
    run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]
) -> pb.ChannelMessageDeletion | None:
    """Returns the first deletion whose message is not queued, or None when all are."""
    for deletion in deletions:
        queue = run.channels.get(deletion.channel_name, [])
        if not any(message.message_id == deletion.message_id for message in queue):
            return deletion
    return None
