"""Streams: append-only message logs per ``(flow_type, flow_id, stream_name)`` with capacity trimming."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from dex.dexpb import dex_pb2 as pb

from ._store import Store, StreamRow

__all__ = ["StreamMessage", "Streams"]

_MAX_PAGE = 1000

StreamKey = tuple[str, str, str]


@dataclass(frozen=True)
class StreamMessage:
    """One retained Stream message."""

    seq: int
    created: float
    source: str
    value: pb.Value
    size: int

    def to_proto(self) -> pb.StreamMessage:
        """Returns the wire form; the resume token is the message's sequence number."""
        message = pb.StreamMessage(value=self.value, resume_token=str(self.seq), source=self.source)
        message.created_time.FromNanoseconds(int(self.created * 1e9))
        return message


@dataclass
class _Log:
    messages: deque[StreamMessage]
    next_seq: int = 1
    size: int = 0


class Streams:
    """All Streams, kept in memory and written through to the store.

    Args:
        store: Where messages are persisted.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._logs: dict[StreamKey, _Log] = {}
        self._waiters: dict[StreamKey, list[asyncio.Future[None]]] = {}

    def restore(self) -> None:
        """Loads the stored messages."""
        for row in self._store.load_streams():
            log = self._logs.setdefault((row.flow_type, row.flow_id, row.stream_name), _Log(deque()))
            value = pb.Value.FromString(row.value)
            log.messages.append(StreamMessage(row.seq, row.created, row.source, value, len(row.value)))
            log.size += len(row.value)
            log.next_seq = row.seq + 1

    def append(self, key: StreamKey, capacity: int, value: pb.Value, source: str) -> None:
        """Appends a message, then trims the oldest messages until the Stream fits its capacity.

        The newest message is always kept, even when it alone is above the capacity, so a reader sees it.
        """
        log = self._logs.setdefault(key, _Log(deque()))
        data = value.SerializeToString()
        message = StreamMessage(log.next_seq, time.time(), source, value, len(data))
        log.next_seq += 1
        log.messages.append(message)
        log.size += message.size
        self._store.append_stream(
            StreamRow(key[0], key[1], key[2], message.seq, message.created, source, data)
        )
        trimmed = False
        while capacity > 0 and log.size > capacity and len(log.messages) > 1:
            oldest = log.messages.popleft()
            log.size -= oldest.size
            trimmed = True
        if trimmed:
            self._store.trim_stream(key[0], key[1], key[2], log.messages[0].seq)
        for waiter in self._waiters.pop(key, []):
            if not waiter.done():
                waiter.set_result(None)

    def next_after(self, key: StreamKey, resume_token: str) -> StreamMessage | None:
        """Returns the first retained message after a resume token (the oldest one for ``""``)."""
        log = self._logs.get(key)
        if log is None:
            return None
        after = int(resume_token) if resume_token else 0
        for message in log.messages:
            if message.seq > after:
                return message
        return None

    async def wait_for_message(
        self, key: StreamKey, resume_token: str, wait_seconds: float
    ) -> StreamMessage | None:
        """Long-polls for the first message after a resume token; None when the wait expires."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            message = self.next_after(key, resume_token)
            if message is not None:
                return message
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.setdefault(key, []).append(waiter)
            try:
                await asyncio.wait_for(waiter, remaining)
            except TimeoutError:
                return self.next_after(key, resume_token)

    def page(self, key: StreamKey, page_size: int, before_token: str) -> tuple[list[StreamMessage], str]:
        """Returns a page of messages newest first and the token of the next (older) page, or ``""``."""
        log = self._logs.get(key)
        if log is None:
            return [], ""
        size = _MAX_PAGE if page_size <= 0 else min(page_size, _MAX_PAGE)
        before = int(before_token) if before_token else None
        older = [message for message in reversed(log.messages) if before is None or message.seq < before]
        page = older[:size]
        next_token = str(page[-1].seq) if len(older) > size else ""
        return page, next_token
