"""Message storage: the window, immutable chunks, the index, retention, reads, and a turn's reply count.

The newest messages live in the `AgentMessages` window, one instance per message, so storing a message is
one blind write. When a Step leaves more than ``message_window_size`` messages, or more than
``message_window_max_bytes`` of them, there, the same commit moves the oldest into `AgentMessageChunks`
instances that are never rewritten, and records their ranges and sizes in `AgentMessageIndex`; a Step then
loads only the chunks it reads, and a Worker decodes each chunk once (see
`dex_agents._decoded_value_cache`). A message too large to share a chunk skips the window and gets a chunk
of its own. With compaction, chunks entirely behind the summary are deleted while enough messages stay after
them, and so are the tool outputs stored apart for the turns they held.

Readers of pages (the snapshot and listing RPCs) load the window and only the chunks their caller named,
and stop by bytes as well as by count: `read_page` says which chunks it lacked, so the caller can name them.

A session without an index (every session dex-agents 0.1.0 stored) has every message in the window from
sequence 1; the rollover of each Step that stores messages drains it, a few chunks per commit, and readers
handle the half-moved session through the index.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

from dex import AttributeMapLoad, AttributeMapNotLoadedError, Context

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
from dex_agents.session._errors import SessionStateError
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
    MessageRole,
    StoredToolOutput,
    TurnReplySequence,
)

__all__ = [
    "CHUNK_ENCODING_OVERHEAD_BYTES",
    "ChunkLoads",
    "MessagePage",
    "MessagesNotLoadedError",
    "RolloverPlan",
    "append_messages",
    "chunk_loads",
    "plan_rollover",
    "read_index",
    "read_messages",
    "read_page",
    "register_stored_tool_outputs",
    "reply_count",
    "settle_storage",
]

_logger = logging.getLogger("dex_agents")

#: The stored size of a chunk without messages, ``{"messages":[]}``; each message adds its own size and,
#: after the first, a comma.
CHUNK_ENCODING_OVERHEAD_BYTES = 15


class MessagesNotLoadedError(SessionStateError):
    """A Step reads messages that its movement did not load.

    Either a Worker of an earlier release scheduled the Step, or the index lists a chunk the movement left
    out.
    """


def read_index(context: Context) -> AgentMessageIndex | None:
    """Return the message index, or `None` for a session that never wrote a chunk."""
    return cast(AgentMessageIndex | None, AGENT_MESSAGE_INDEX.get(context))


def _first_sequence(index: AgentMessageIndex | None) -> int:
    return 1 if index is None else index.first_sequence


def _window_first_sequence(index: AgentMessageIndex | None) -> int:
    return 1 if index is None else index.window_first_sequence


@dataclass(frozen=True)
class ChunkLoads:
    """The chunks a movement loads: every one (a whole-map load), or the listed instances.

    Attributes:
        whole_map: Load every chunk; listing hundreds of instances would only cost bytes on every request.
        instances: The chunks to load, when not all of them.
    """

    whole_map: bool = False
    instances: tuple[AttributeMapLoad, ...] = ()


def chunk_loads(context: Context, after: int, through: int | None = None) -> ChunkLoads:
    """Return the loads of the chunks holding messages after ``after`` (through ``through``, if given).

    A movement lists them in its load options, so a Step loads only the chunks it reads; when it reads
    every chunk, one whole-map load replaces the list. The index the Step itself is about to write counts,
    so a rollover in the same commit is seen.
    """
    index = read_index(context)
    if index is None or not index.chunks:
        return ChunkLoads()
    if through is None and index.chunks[0].last_sequence > after:
        return ChunkLoads(whole_map=True)
    return ChunkLoads(
        instances=tuple(
            AGENT_MESSAGE_CHUNKS.load(message_sequence_key(span.first_sequence))
            for span in index.chunks
            if span.last_sequence > after and (through is None or span.first_sequence <= through)
        )
    )


# Reads.


def _window_keys(context: Context) -> tuple[str, ...]:
    try:
        return AGENT_MESSAGES.get_all_instance_keys(context)
    except AttributeMapNotLoadedError as error:
        raise MessagesNotLoadedError(
            "the AgentMessages window is not loaded: a Worker of an earlier release scheduled this Step"
        ) from error


def _read_chunk(context: Context, span: AgentMessageChunkRange) -> tuple[AgentMessage, ...]:
    key = message_sequence_key(span.first_sequence)
    try:
        chunk = cast(AgentMessageChunk | None, AGENT_MESSAGE_CHUNKS.get(context, key))
    except AttributeMapNotLoadedError as error:
        raise MessagesNotLoadedError(f"message chunk {key} is not loaded for this Step") from error
    if chunk is None:
        raise SessionStateError(
            f"message chunk {key} ({span.first_sequence}-{span.last_sequence}) is in the index but not stored"
        )
    # A chunk holds consecutive messages (AgentMessageChunk checks it once, when it is decoded), so its
    # first and last sequence tell its whole range.
    messages = chunk.messages
    first, last = messages[0].sequence, messages[-1].sequence
    if (first, last) != (span.first_sequence, span.last_sequence):
        raise SessionStateError(
            f"message chunk {key} must hold messages {span.first_sequence}-{span.last_sequence}, "
            f"it holds {first}-{last}"
        )
    return messages


@dataclass(frozen=True)
class _Layout:
    """Where each stored sequence is: the chunk ranges, and the window's keys by sequence."""

    first_sequence: int
    chunks: tuple[AgentMessageChunkRange, ...]
    window: dict[int, str]

    @classmethod
    def of(cls, context: Context) -> _Layout:
        index = read_index(context)
        chunks = () if index is None else index.chunks
        window_first = _window_first_sequence(index)
        window: dict[int, str] = {}
        for key in _window_keys(context):
            sequence = int(key)
            if sequence >= window_first:
                window[sequence] = key
        # A sequence in a chunk range is in that chunk, even when the window has an instance for it.
        for span in chunks:
            if span.last_sequence >= window_first:
                for sequence in range(span.first_sequence, span.last_sequence + 1):
                    window.pop(sequence, None)
        return cls(_first_sequence(index), chunks, window)


def read_messages(context: Context, after: int, through: int) -> list[AgentMessage]:
    """Return the stored messages with a sequence above ``after`` and at most ``through``, in order.

    Needs the whole window and the chunks of that range loaded (`chunk_loads`). Messages that retention
    deleted are left out; any other missing message is an error.

    Raises:
        MessagesNotLoadedError: If the window or a chunk of the range is not loaded.
        SessionStateError: If a message of the range is missing or a chunk does not hold its range.
    """
    layout = _Layout.of(context)
    found: list[AgentMessage] = []
    firsts = [span.first_sequence for span in layout.chunks]
    sequence = max(after + 1, layout.first_sequence)
    while sequence <= through:
        position = bisect.bisect_right(firsts, sequence) - 1
        span = layout.chunks[position] if position >= 0 else None
        if span is not None and span.last_sequence >= sequence:
            messages = _read_chunk(context, span)
            found.extend(messages[sequence - span.first_sequence : through - span.first_sequence + 1])
            sequence = span.last_sequence + 1
            continue
        key = layout.window.get(sequence)
        if key is None:
            raise SessionStateError(f"stored message {sequence} is neither in a chunk nor in the window")
        found.append(AGENT_MESSAGES.get(context, key))
        sequence += 1
    return found


@dataclass(frozen=True)
class MessagePage:
    """Messages read back from the newest one, within a count and a byte budget.

    Attributes:
        messages: The messages, oldest first.
        first_sequence: The oldest stored sequence (`AgentMessageIndex.first_sequence`, 1 without one).
        next_before_sequence: Where the page before this one ends: the first message's sequence, or
            `None` when the page starts at the oldest stored message or holds nothing.
        missing_chunks: The first sequences of the chunks the page needed and the Context did not load;
            empty when the page is whole.
    """

    messages: tuple[AgentMessage, ...]
    first_sequence: int
    next_before_sequence: int | None
    missing_chunks: tuple[int, ...] = ()


def _chunks_to_load(
    chunks: Sequence[AgentMessageChunkRange], position: int, count_left: int, bytes_left: int
) -> tuple[int, ...]:
    """The chunks from ``position`` back whose messages and stored bytes cover what the page still needs.

    A chunk whose size an earlier release did not record counts as filling the rest of the budget, so such
    chunks are asked for one at a time.
    """
    needed: list[int] = []
    while position >= 0 and count_left > 0 and bytes_left > 0:
        span = chunks[position]
        needed.append(span.first_sequence)
        count_left -= span.last_sequence - span.first_sequence + 1
        bytes_left -= span.stored_bytes or bytes_left
        position -= 1
    return tuple(needed)


def read_page(
    context: Context,
    next_sequence: int,
    *,
    limit: int,
    byte_budget: int,
    size_of: Callable[[AgentMessage], int],
    before_sequence: int | None = None,
    at_least_one: bool = True,
) -> MessagePage:
    """Read the newest messages before ``before_sequence``, at most ``limit`` and ``byte_budget`` bytes.

    The page ends before the message that would take it past the budget (with ``at_least_one``, the
    first message is taken whatever its size, so a page always moves on). Only the chunks it returns
    messages from are read. Needs the whole window loaded; a chunk the Context did not load ends the page
    there, and `MessagePage.missing_chunks` names it and the older chunks the page would still need.

    Args:
        context: An RPC or Step context with the window loaded.
        next_sequence: `AgentState.next_message_sequence`.
        limit: The most messages.
        byte_budget: The most bytes of messages, each measured with ``size_of``.
        size_of: A message's size as the page will hold it.
        before_sequence: Return messages before this one; `None` starts after the newest.
        at_least_one: Take the newest message even when it alone exceeds the budget.

    Returns:
        The page.
    """
    layout = _Layout.of(context)
    top = next_sequence - 1 if before_sequence is None else min(before_sequence - 1, next_sequence - 1)
    found: list[AgentMessage] = []
    used = 0
    missing: tuple[int, ...] = ()
    firsts = [span.first_sequence for span in layout.chunks]

    def take(message: AgentMessage) -> bool:
        nonlocal used
        if len(found) >= limit:
            return False
        size = size_of(message)
        if used + size > byte_budget and (found or not at_least_one):
            return False
        found.append(message)
        used += size
        return True

    sequence = top
    while sequence >= layout.first_sequence and len(found) < limit:
        position = bisect.bisect_right(firsts, sequence) - 1
        span = layout.chunks[position] if position >= 0 else None
        if span is not None and span.last_sequence >= sequence:
            try:
                chunk = _read_chunk(context, span)
            except MessagesNotLoadedError:
                missing = _chunks_to_load(layout.chunks, position, limit - len(found), byte_budget - used)
                break
            if not all(take(message) for message in reversed(chunk) if message.sequence <= sequence):
                break
            sequence = span.first_sequence - 1
            continue
        key = layout.window.get(sequence)
        if key is None:
            raise SessionStateError(f"stored message {sequence} is neither in a chunk nor in the window")
        if not take(AGENT_MESSAGES.get(context, key)):
            break
        sequence -= 1
    found.reverse()
    next_before = found[0].sequence if found and found[0].sequence > layout.first_sequence else None
    return MessagePage(tuple(found), layout.first_sequence, next_before, missing)


# Turn reply counts.


def _scan_reply_start(context: Context, turn_id: str, next_sequence: int) -> int:
    """Find where ``turn_id``'s replies start by reading its messages back from the newest one.

    Only a turn that another release started lacks its `TurnReplySequence`; such a turn stored every
    message in the window.
    """
    try:
        keys = _window_keys(context)
    except MessagesNotLoadedError:
        _logger.warning("turn %s has no reply sequence and the window is not loaded; counting 0", turn_id)
        return next_sequence
    roles: list[tuple[int, MessageRole]] = []
    for key in reversed(keys):
        message = AGENT_MESSAGES.get(context, key)
        if message.turn_id != turn_id:
            break
        roles.append((message.sequence, message.role))
    roles.reverse()
    for sequence, role in roles:
        if role is not MessageRole.USER:
            return sequence
    return next_sequence


def _reply_start(context: Context, turn_id: str, next_sequence: int) -> int:
    recorded = cast(TurnReplySequence | None, TURN_REPLY_SEQUENCE.get(context))
    if recorded is not None and recorded.turn_id == turn_id:
        return recorded.sequence
    return _scan_reply_start(context, turn_id, next_sequence)


def reply_count(context: Context, turn_id: str, next_sequence: int) -> int:
    """Return how many messages ``turn_id`` stored after its user messages, up to ``next_sequence``."""
    return next_sequence - _reply_start(context, turn_id, next_sequence)


# Writes.


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
    first_in_window = _window_first_sequence(index) if window_first is None else window_first
    # The window starts after any chunk that sits right at its start: rollover steps over such chunks.
    for span in chunks:
        if span.first_sequence == first_in_window:
            first_in_window = span.last_sequence + 1
    return AgentMessageIndex(
        chunks=tuple(chunks),
        first_sequence=_first_sequence(index),
        window_first_sequence=first_in_window,
        tool_outputs=() if index is None else index.tool_outputs,
    )


def _roll_over(
    context: Context, options: AgentSessionOptions, index: AgentMessageIndex | None
) -> AgentMessageIndex | None:
    try:
        keys = _window_keys(context)
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
        context, TurnReplySequence(turn_id, _scan_reply_start(context, turn_id, next_sequence))
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
