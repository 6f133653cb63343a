"""The Flows of the long-session tests (storage, compaction, settings, sizes), as test and Worker build them.

Their windows and chunks are tiny so a few turns roll messages over. ``StorageTestFlow`` adds one RPC a real
session does not have: ``storage_layout`` reads the raw storage (index, chunks, window, reply sequence), so
a test can check where each message is stored.
"""

from dataclasses import dataclass, replace
from typing import cast

from dex import Context, RPCResult, rpc

from dex_agents import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    TURN_REPLY_SEQUENCE,
    AgentMessageIndex,
    AgentSessionFlow,
    AgentSessionOptions,
    CompactionPolicy,
    TurnReplySequence,
)
from dex_agents.testing import ScriptedRunner, matrix_session_options

#: Four messages in the window, two per chunk, and a chunk of at most 8 KiB.
TINY_STORAGE = {"message_window_size": 4, "message_chunk_size": 2, "message_chunk_max_bytes": 8 * 1024}
#: The compacting Flow's context window, in ScriptedRunner tokens (a token per 4 characters).
CONTEXT_WINDOW_TOKENS = 1000
#: The compacting Flow keeps at least this many messages when it deletes chunks behind the summary.
RETAINED_MESSAGES = 6
#: The largest tool output the large-outputs Flow keeps inline; larger ones are stored apart.
INLINE_TOOL_OUTPUT_BYTES = 2048


@dataclass(frozen=True)
class StorageLayout:
    """Where a session's messages are stored.

    Attributes:
        has_index: Whether `AgentMessageIndex` is set.
        first_sequence: The index's oldest stored message (1 without an index).
        window_first_sequence: The index's oldest window message (1 without an index).
        index_ranges: The index's chunk ranges as (first, last).
        chunks: Each stored chunk's message sequences, by chunk key.
        window: The sequences stored one per `AgentMessages` instance.
        reply_turn_id: `TurnReplySequence.turn_id`, or ``""``.
        reply_sequence: `TurnReplySequence.sequence`, or 0.
    """

    has_index: bool
    first_sequence: int
    window_first_sequence: int
    index_ranges: tuple[tuple[int, int], ...]
    chunks: tuple[tuple[int, ...], ...]
    window: tuple[int, ...]
    reply_turn_id: str
    reply_sequence: int

    @property
    def stored(self) -> list[int]:
        """Every stored sequence, chunks and window together, sorted (duplicates kept)."""
        return sorted([*(sequence for chunk in self.chunks for sequence in chunk), *self.window])


class StorageTestFlow(AgentSessionFlow):
    @rpc(load_attribute_maps=(AGENT_MESSAGES, AGENT_MESSAGE_CHUNKS))
    def storage_layout(self, context: Context) -> RPCResult[StorageLayout]:
        index = cast(AgentMessageIndex | None, AGENT_MESSAGE_INDEX.get(context))
        reply = cast(TurnReplySequence | None, TURN_REPLY_SEQUENCE.get(context))
        chunks = [
            AGENT_MESSAGE_CHUNKS.get(context, key)
            for key in AGENT_MESSAGE_CHUNKS.get_all_instance_keys(context)
        ]
        return RPCResult(
            StorageLayout(
                has_index=index is not None,
                first_sequence=1 if index is None else index.first_sequence,
                window_first_sequence=1 if index is None else index.window_first_sequence,
                index_ranges=()
                if index is None
                else tuple((span.first_sequence, span.last_sequence) for span in index.chunks),
                chunks=tuple(tuple(message.sequence for message in chunk.messages) for chunk in chunks),
                window=tuple(int(key) for key in AGENT_MESSAGES.get_all_instance_keys(context)),
                reply_turn_id="" if reply is None else reply.turn_id,
                reply_sequence=0 if reply is None else reply.sequence,
            )
        )


@dataclass(frozen=True)
class LongSessionFlows:
    """Tiny storage; the same with compaction and retention; the Flow type a previous release served first."""

    storage: StorageTestFlow
    compacting: StorageTestFlow
    upgrade: StorageTestFlow
    large_outputs: StorageTestFlow

    @property
    def all(self) -> tuple[StorageTestFlow, ...]:
        return (self.storage, self.compacting, self.upgrade, self.large_outputs)


def tiny_storage_options() -> AgentSessionOptions:
    return replace(matrix_session_options(), **TINY_STORAGE)


def build_long_session_flows() -> LongSessionFlows:
    compacting = replace(
        tiny_storage_options(),
        retained_message_limit=RETAINED_MESSAGES,
        compaction=CompactionPolicy(context_window_tokens=CONTEXT_WINDOW_TOKENS),
    )
    return LongSessionFlows(
        storage=StorageTestFlow(ScriptedRunner(), flow_type="CoreStorage", options=tiny_storage_options()),
        compacting=StorageTestFlow(ScriptedRunner(), flow_type="CoreCompacting", options=compacting),
        upgrade=StorageTestFlow(ScriptedRunner(), flow_type="CoreUpgrade", options=tiny_storage_options()),
        # Compacting with retention, and tool outputs above 2 KiB stored apart.
        large_outputs=StorageTestFlow(
            ScriptedRunner(),
            flow_type="CoreLargeOutputs",
            options=replace(compacting, max_inline_tool_output_bytes=INLINE_TOOL_OUTPUT_BYTES),
        ),
    )
