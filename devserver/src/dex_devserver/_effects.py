"""A method's or a client's effects on a run: offloading their values, then applying them to its state.

Values are ingested (offloaded to blobs and checked) before anything is applied, so a refused value refuses
the whole result and never leaves a run half-changed.
"""

from __future__ import annotations

from collections.abc import Iterable

from dex.dexpb import dex_pb2 as pb

from . import _requests as requests
from ._blobs import Blobs, Owner
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


def ingest(blobs: Blobs, value: pb.Value, what: str, owner: Owner) -> None:
    """Checks a value and offloads it in place when it is large.

    Args:
        blobs: The blob store.
        value: The value, replaced by a blob reference when it is large.
        what: Names the value in the error.
        owner: The run the value belongs to.

    Raises:
        ValueRefusedError: When the value is above the size limit or is a blob reference.
    """
    stored = blobs.ingest(value, what, owner)
    if stored is not value:
        value.CopyFrom(stored)


def ingest_effects(
    blobs: Blobs,
    owner: Owner,
    writes: Iterable[pb.AttributeWrite],
    publishes: Iterable[pb.ChannelMessage],
    events: Iterable[pb.KV],
    locals_: Iterable[pb.KV] = (),
    decision: pb.StepDecision | None = None,
) -> None:
    """Ingests every value of a result: Attributes, messages, events, locals, next inputs, Flow output.

    Raises:
        ValueRefusedError: Naming the first value above the size limit or that is a blob reference.
    """
    for write in writes:
        ingest(blobs, write.value, f"attribute {write.key!r}", owner)
    for message in publishes:
        ingest(blobs, message.value, f"a message published to channel {message.channel_name!r}", owner)
    for kv in events:
        ingest(blobs, kv.value, f"recorded event {kv.key!r}", owner)
    for kv in locals_:
        ingest(blobs, kv.value, f"Step execution local {kv.key!r}", owner)
    if decision is not None:
        for movement in decision.next_steps:
            ingest(blobs, movement.step_input, f"the input of next Step {movement.step_type!r}", owner)
        if decision.HasField("close_decision") and decision.close_decision.HasField("close_input"):
            ingest(blobs, decision.close_decision.close_input, "the Flow output", owner)


def apply_effects(run: FlowRun, result: MethodResult) -> None:
    """Applies a method's or an RPC's Attribute writes, then its publishes, then its deletes."""
    apply_writes(run, result.upsert_attributes)
    apply_publishes(run, result.publish_to_channel)
    apply_deletes(run, result.delete_from_channel)


def apply_writes(run: FlowRun, writes: Iterable[pb.AttributeWrite]) -> None:
    """Writes Attributes (a null value deletes one)."""
    for write in writes:
        run.set_attribute(write.key, None if requests.is_null(write.value) else write.value)


def apply_publishes(run: FlowRun, publishes: Iterable[pb.ChannelMessage]) -> None:
    """Queues messages with new IDs, also stamped on the given messages so history shows them."""
    for message in publishes:
        stored = pb.ChannelMessage(channel_name=message.channel_name, message_id=requests.new_message_id())
        stored.value.CopyFrom(message.value)
        message.message_id = stored.message_id
        run.push_message(stored)


def apply_deletes(run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]) -> None:
    """Removes queued messages by ID; a message that is not queued is ignored."""
    for deletion in deletions:
        run.remove_message(deletion.channel_name, deletion.message_id)


def missing_deletion(
    run: FlowRun, deletions: Iterable[pb.ChannelMessageDeletion]
) -> pb.ChannelMessageDeletion | None:
    """Returns the first deletion whose message is not queued, or None when all are."""
    for deletion in deletions:
        queue = run.channels.get(deletion.channel_name, ())
        if not any(message.message_id == deletion.message_id for message in queue):
            return deletion
    return None
