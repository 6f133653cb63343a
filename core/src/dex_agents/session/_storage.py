"""Storing messages: the window, immutable chunks, the index's writes, and retention.

The newest messages live in the `AgentMessages` window, one instance per message, so storing a message is
one blind write. When a Step leaves more than ``message_window_size`` messages, or more than
``message_window_max_bytes`` of them, there, the same commit moves the oldest into `AgentMessageChunks`
instances that are never rewritten, and records their ranges and sizes in `AgentMessageIndex`; a Step then
loads only the chunks it reads (`_message_reads`), and a Worker decodes each chunk once (see
`dex_agents._decoded_value_cache`). A message too large to share a chunk skips the window and gets a chunk
of its own. With compaction, chunks entirely behind the summary are deleted while enough messages stay after
them, and so are the tool outputs stored apart for the turns they held.

A session without an index (every session dex-agents 0.1.0 stored) has every message in the window from
sequence 1; the rollover of each Step that stores messages drains it, a few chunks per commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from dex import Context

from dex_agents.limits import MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT, MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT
from dex_agents.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    AGENT_TOOL_OUTPUTS,
    TURN_REPLY_SEQUENCE,
    message_sequence_key,
    tool_output_key,
)
from dex_agents.session._message_reads import (
    MessagesNotLoadedError,
    first_stored_sequence,
    read_index,
    scan_reply_start,
    window_first_sequence,
    window_keys,
)
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._state import (
    format_time,
    now,
    read_context_summary,
    stored_message,
    stored_size,
)
from dex_agents.values import (
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    AgentState,
    AgentToolCall,
    StoredToolOutput,
    TurnReplySequence,
)

__all__ = [
    "CHUNK_ENCODING_OVERHEAD_BYTES",
    "RolloverPlan",
    "append_messages",
    "plan_rollover",
    "register_stored_tool_outputs",
    "settle_storage",
]

#: The stored size of a chunk without messages, ``{"messages":[]}``; each message adds its own size and,
#: after the first, a comma.
CHUNK_ENCODING_OVERHEAD_BYTES = 15


@dataclass(frozen=True)
class RolloverPlan:
    """The chunks one commit moves out of the window: each as a list of positions in the window.

    Attributes:
        chunks: For each chunk, the positions (into the window's sequence-ordered messages) it takes.
        sizes: Each chunk's stored size in bytes.
    """

    chunks: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]


def plan_rollover(
    sequences: Sequence[int], sizes: Sequence[int], options: AgentSessionOptions
) -> RolloverPlan:
    """Decide which window messages one commit moves into chunks.

    While more than ``message_window_size`` messages, or more than ``message_window_max_bytes`` of them,
    would stay, the oldest form the next chunk: it closes at ``message_chunk_size`` messages, before a
    message that would take its stored size past ``message_chunk_max_bytes``, and before a gap (an
    oversized message's own chunk sits there). One commit moves at most
    `MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT` chunks and `MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT` bytes,
    unless its first chunk alone is larger.

    Args:
        sequences: The window's sequences, ascending.
        sizes: Each message's stored size in bytes.
        options: The storage options.

    Returns:
        The plan; empty when the window is small enough.
    """
    chunks: list[tuple[int, ...]] = []
    chunk_sizes: list[int] = []
    position = 0
    total = 0
    window_bytes = sum(sizes)

    def window_too_large() -> bool:
        staying = len(sequences) - position
        return staying > options.message_window_size or (
            staying > 0 and window_bytes > options.message_window_max_bytes
        )

    while window_too_large() and len(chunks) < MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT:
        taken = [position]
        size = CHUNK_ENCODING_OVERHEAD_BYTES + sizes[position]
        following = position + 1
        while following < len(sequences) and len(taken) < options.message_chunk_size:
            if sequences[following] != sequences[following - 1] + 1:
                break
            grown = size + 1 + sizes[following]
            if grown > options.message_chunk_max_bytes:
                break
            taken.append(following)
            size = grown
            following += 1
        if chunks and total + size > MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT:
            break
        chunks.append(tuple(taken))
        chunk_sizes.append(size)
        total += size
        window_bytes -= sum(sizes[index] for index in taken)
        position = following
    return RolloverPlan(tuple(chunks), tuple(chunk_sizes))


def _with_chunks(
    index: AgentMessageIndex | None, added: Sequence[AgentMessageChunkRange], window_first: int | None = None
) -> AgentMessageIndex:
    chunks = sorted((*(() if index is None else index.chunks), *added), key=lambda span: span.first_sequence)
    first_in_window = window_first_sequence(index) if window_first is None else window_first
    # The window starts after any chunk that sits right at its start: rollover steps over such chunks.
    for span in chunks:
        if span.first_sequence == first_in_window:
            first_in_window = span.last_sequence + 1
    return AgentMessageIndex(
        chunks=tuple(chunks),
        first_sequence=first_stored_sequence(index),
        window_first_sequence=first_in_window,
        tool_outputs=() if index is None else index.tool_outputs,
    )


def _roll_over(
    context: Context, options: AgentSessionOptions, index: AgentMessageIndex | None
) -> AgentMessageIndex | None:
    try:
        keys = window_keys(context)
    except MessagesNotLoadedError:
        # Scheduled by an earlier release without the window: a later Step that loads it rolls over.
        return index
    messages = [AGENT_MESSAGES.get(context, key) for key in keys]
    plan = plan_rollover(
        [message.sequence for message in messages],
        [stored_size(message) for message in messages],
        options,
    )
    if not plan.chunks:
        return index
    added: list[AgentMessageChunkRange] = []
    for positions, size in zip(plan.chunks, plan.sizes, strict=True):
        chunk = tuple(messages[position] for position in positions)
        AGENT_MESSAGE_CHUNKS.set(context, message_sequence_key(chunk[0].sequence), AgentMessageChunk(chunk))
        for message in chunk:
            AGENT_MESSAGES.delete(context, message_sequence_key(message.sequence))
        added.append(AgentMessageChunkRange(chunk[0].sequence, chunk[-1].sequence, size))
    return _with_chunks(index, added, window_first=added[-1].last_sequence + 1)


def _apply_retention(
    context: Context, options: AgentSessionOptions, index: AgentMessageIndex | None, next_sequence: int
) -> AgentMessageIndex | None:
    """Delete the oldest chunks behind the summary while enough messages stay after them.

    The tool outputs stored apart for turns that ended before the first message left are deleted with
    them.
    """
    if not _has_retention(options) or index is None:
        return index
    limit = cast(int, options.retained_message_limit)
    summary = read_context_summary(context)
    if summary is None:
        return index
    chunks = list(index.chunks)
    first = index.first_sequence
    while chunks:
        oldest = chunks[0]
        archived = oldest.first_sequence == first and oldest.last_sequence < index.window_first_sequence
        if not archived or oldest.last_sequence > summary.last_sequence:
            break
        if next_sequence - 1 - oldest.last_sequence < limit:
            break
        AGENT_MESSAGE_CHUNKS.delete(context, message_sequence_key(oldest.first_sequence))
        chunks.pop(0)
        first = oldest.last_sequence + 1
    if first == index.first_sequence:
        return index
    kept: list[StoredToolOutput] = []
    for output in index.tool_outputs:
        if output.last_sequence < first:
            AGENT_TOOL_OUTPUTS.delete(context, tool_output_key(output.turn_id, output.tool_call_id))
        else:
            kept.append(output)
    return replace(index, chunks=tuple(chunks), first_sequence=first, tool_outputs=tuple(kept))


def _has_retention(options: AgentSessionOptions) -> bool:
    return options.compaction is not None and options.retained_message_limit is not None


def register_stored_tool_outputs(
    context: Context, options: AgentSessionOptions, state: AgentState, records: Sequence[AgentToolCall]
) -> None:
    """List an ending turn's tool outputs that are stored apart in the index, so retention deletes them.

    Only a session with retention lists them: one without keeps every output, as it keeps every message.
    ``state`` is the session state once the turn's last message is stored.
    """
    if not _has_retention(options):
        return
    stored = [
        StoredToolOutput(record.turn_id, record.tool_call_id, state.next_message_sequence - 1)
        for record in records
        if record.stored_output_bytes is not None
    ]
    if not stored:
        return
    index = read_index(context) or AgentMessageIndex(chunks=(), first_sequence=1, window_first_sequence=1)
    AGENT_MESSAGE_INDEX.set(context, replace(index, tool_outputs=(*index.tool_outputs, *stored)))


def settle_storage(context: Context, options: AgentSessionOptions, next_sequence: int) -> None:
    """Roll the window over and apply retention; writes the index only when a chunk was written or deleted.

    Every Step that stores messages calls it through `append_messages`; `CompactContext` calls it after it
    writes the summary.
    """
    index = read_index(context)
    settled = _apply_retention(context, options, _roll_over(context, options, index), next_sequence)
    if settled is not None and settled != index:
        AGENT_MESSAGE_INDEX.set(context, settled)


def _record_reply_sequence(context: Context, turn_id: str, next_sequence: int) -> None:
    """Give a turn that another release started its `TurnReplySequence` before anything rolls over."""
    recorded = cast(TurnReplySequence | None, TURN_REPLY_SEQUENCE.get(context))
    if recorded is not None and recorded.turn_id == turn_id:
        return
    TURN_REPLY_SEQUENCE.set(
        context, TurnReplySequence(turn_id, scan_reply_start(context, turn_id, next_sequence))
    )


def append_messages(
    context: Context,
    options: AgentSessionOptions,
    state: AgentState,
    turn_id: str,
    messages: Sequence[object],
    *,
    user_message_count: int | None = None,
) -> tuple[AgentState, list[AgentMessage]]:
    """Store runner messages after the last stored one and return the advanced state.

    A message whose chunk of its own would exceed ``message_chunk_max_bytes`` gets that chunk instead of a
    window instance; then the window rolls over and retention applies (`settle_storage`). Appending nothing
    writes nothing.

    Args:
        context: The Step's context, with the window loaded.
        options: The storage options.
        state: The session state before the append.
        turn_id: The turn the messages belong to.
        messages: The runner's `FrameworkMessage` values.
        user_message_count: For the Step that starts ``turn_id``: how many of ``messages`` are its user
            messages, so the turn's `TurnReplySequence` starts after them.

    Raises:
        InvalidRunnerOutput: If any message cannot be stored; nothing is written then.
    """
    if not messages:
        return state, []
    created_at = format_time(now())
    checked = [
        stored_message(message, state.next_message_sequence + offset, turn_id, created_at)
        for offset, message in enumerate(messages)
    ]
    if user_message_count is not None:
        TURN_REPLY_SEQUENCE.set(
            context, TurnReplySequence(turn_id, state.next_message_sequence + user_message_count)
        )
    else:
        _record_reply_sequence(context, turn_id, state.next_message_sequence)
    own_chunks: list[AgentMessageChunkRange] = []
    for item in checked:
        message = item.message
        key = message_sequence_key(message.sequence)
        chunk_size = CHUNK_ENCODING_OVERHEAD_BYTES + item.size
        if chunk_size > options.message_chunk_max_bytes:
            AGENT_MESSAGE_CHUNKS.set(context, key, AgentMessageChunk((message,)))
            own_chunks.append(AgentMessageChunkRange(message.sequence, message.sequence, chunk_size))
        else:
            AGENT_MESSAGES.set(context, key, message)
    if own_chunks:
        AGENT_MESSAGE_INDEX.set(context, _with_chunks(read_index(context), own_chunks))
    advanced = replace(state, next_message_sequence=state.next_message_sequence + len(checked))
    settle_storage(context, options, advanced.next_message_sequence)
    return advanced, [item.message for item in checked]
