"""Reading stored messages: the index, the chunks a movement loads, ranges, pages, and a turn's reply count.

A sequence in a chunk range is in that chunk; any other sequence from the index's ``window_first_sequence``
on is in the `AgentMessages` window. A Step reads only what its movement loaded (`chunk_loads` lists the
chunks), and a reader checks that each chunk holds exactly its range. Readers of pages (the snapshot and
listing RPCs) load the window and only the chunks their caller named, and stop by bytes as well as by
count: `read_page` says which chunks it lacked, so the caller can name them.

A session without an index (every session dex-agents 0.1.0 stored) has every message in the window from
sequence 1, and readers handle a half-moved session through the index.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from dex import AttributeMapLoad, AttributeMapNotLoadedError, Context

from dex_agents.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    TURN_REPLY_SEQUENCE,
    message_sequence_key,
)
from dex_agents.session._errors import SessionStateError
from dex_agents.values import (
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    MessageRole,
    TurnReplySequence,
)

__all__ = [
    "ChunkLoads",
    "MessagePage",
    "MessagesNotLoadedError",
    "chunk_loads",
    "first_stored_sequence",
    "read_index",
    "read_messages",
    "read_page",
    "reply_count",
    "scan_reply_start",
    "window_first_sequence",
    "window_keys",
]

_logger = logging.getLogger("dex_agents")


class MessagesNotLoadedError(SessionStateError):
    """A Step reads messages that its movement did not load.

    Either a Worker of an earlier release scheduled the Step, or the index lists a chunk the movement left
    out.
    """


def read_index(context: Context) -> AgentMessageIndex | None:
    """Return the message index, or `None` for a session that never wrote a chunk."""
    return cast(AgentMessageIndex | None, AGENT_MESSAGE_INDEX.get(context))


def first_stored_sequence(index: AgentMessageIndex | None) -> int:
    return 1 if index is None else index.first_sequence


def window_first_sequence(index: AgentMessageIndex | None) -> int:
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


def window_keys(context: Context) -> tuple[str, ...]:
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
        window_first = window_first_sequence(index)
        window: dict[int, str] = {}
        for key in window_keys(context):
            sequence = int(key)
            if sequence >= window_first:
                window[sequence] = key
        # A sequence in a chunk range is in that chunk, even when the window has an instance for it.
        for span in chunks:
            if span.last_sequence >= window_first:
                for sequence in range(span.first_sequence, span.last_sequence + 1):
                    window.pop(sequence, None)
        return cls(first_stored_sequence(index), chunks, window)


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


def scan_reply_start(context: Context, turn_id: str, next_sequence: int) -> int:
    """Find where ``turn_id``'s replies start by reading its messages back from the newest one.

    Only a turn that another release started lacks its `TurnReplySequence`; such a turn stored every
    message in the window.
    """
    try:
        keys = window_keys(context)
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
    return scan_reply_start(context, turn_id, next_sequence)


def reply_count(context: Context, turn_id: str, next_sequence: int) -> int:
    """Return how many messages ``turn_id`` stored after its user messages, up to ``next_sequence``."""
    return next_sequence - _reply_start(context, turn_id, next_sequence)


# Writes.
