"""Streams: append-only message logs per ``(flow_type, flow_id, stream_name)`` with capacity trimming.

Messages live in the store only. Memory holds, per Stream in use, the sequence numbers and sizes that
capacity trimming needs; a Stream's bookkeeping is dropped when its Flow closes (or when too many Streams
are in use) and read back from the store when it is used again. Readers see a message once it is committed.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from dex.dexpb import dex_pb2 as pb

from ._fit import RESPONSE_BUDGET
from ._runtime import wait_for_wake
from ._store import Store

__all__ = ["StreamKey", "StreamMessage", "Streams"]

_MAX_PAGE = 1000
# Stream bookkeeping kept in memory at most (Streams of running Flows stay regardless).
_MAX_LOGS = 4096
# What a message costs in a response beyond its value (resume token, source, timestamp, framing).
_MESSAGE_OVERHEAD = 64

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
    next_seq: int = 1
    size: int = 0
    # (sequence number, size) of every retained message, oldest first.
    retained: deque[tuple[int, int]] = field(default_factory=deque[tuple[int, int]])


def _message(row: tuple[Any, ...]) -> StreamMessage:
    seq, created, source, size, value = row
    return StreamMessage(int(seq), float(created), str(source), pb.Value.FromString(bytes(value)), int(size))


class Streams:
    """All Streams, stored in the store, with waiters woken when a write to theirs is committed.

    Args:
        store: Where messages are kept.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._logs: OrderedDict[StreamKey, _Log] = OrderedDict()
        self._waiters: dict[StreamKey, list[asyncio.Future[None]]] = {}
        self._uncommitted: set[StreamKey] = set()

    def _log(self, key: StreamKey) -> _Log:
        log = self._logs.get(key)
        if log is not None:
            self._logs.move_to_end(key)
            return log
        log = _Log()
        rows = self._store.query(
            "SELECT seq, size FROM streams WHERE flow_type = ? AND flow_id = ? AND stream_name = ?"
            " ORDER BY seq",
            key,
        )
        for seq, size in rows:
            log.retained.append((int(seq), int(size)))
            log.size += int(size)
        if log.retained:
            log.next_seq = log.retained[-1][0] + 1
        self._logs[key] = log
        return log

    def append(self, key: StreamKey, capacity: int, value: pb.Value, source: str) -> None:
        """Appends a message (committed with the next commit), then trims the oldest past the capacity.

        The newest message is always kept, even when it alone is above the capacity, so a reader sees it.
        """
        log = self._log(key)
        data = value.SerializeToString()
        seq = log.next_seq
        log.next_seq += 1
        log.retained.append((seq, len(data)))
        log.size += len(data)
        self._store.stage(
            "INSERT INTO streams (flow_type, flow_id, stream_name, seq, created, source, size, value)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [(*key, seq, time.time(), source, len(data), data)],
        )
        trimmed = False
        while capacity > 0 and log.size > capacity and len(log.retained) > 1:
            _, size = log.retained.popleft()
            log.size -= size
            trimmed = True
        if trimmed:
            self._store.stage(
                "DELETE FROM streams WHERE flow_type = ? AND flow_id = ? AND stream_name = ? AND seq < ?",
                [(*key, log.retained[0][0])],
            )
        self._uncommitted.add(key)

    def on_committed(self) -> None:
        """Wakes the readers of Streams written in the commit that just ended, and trims the bookkeeping."""
        keys, self._uncommitted = self._uncommitted, set()
        for key in keys:
            for waiter in self._waiters.pop(key, []):
                if not waiter.done():
                    waiter.set_result(None)
        while len(self._logs) > _MAX_LOGS:
            self._logs.popitem(last=False)

    def forget_flow(self, flow_type: str, flow_id: str) -> None:
        """Drops the bookkeeping of a closed Flow's Streams (it is read back if one is used again)."""
        for key in [key for key in self._logs if key[0] == flow_type and key[1] == flow_id]:
            if key not in self._uncommitted:
                del self._logs[key]

    def next_after(self, key: StreamKey, after: int) -> StreamMessage | None:
        """Returns the first committed message after sequence number `after` (the oldest one for 0)."""
        rows = self._store.query(
            "SELECT seq, created, source, size, value FROM streams"
            " WHERE flow_type = ? AND flow_id = ? AND stream_name = ? AND seq > ? ORDER BY seq LIMIT 1",
            (*key, after),
        )
        return _message(rows[0]) if rows else None

    async def wait_for_message(self, key: StreamKey, after: int, wait_seconds: float) -> StreamMessage | None:
        """Long-polls for the first message after sequence number `after`; None when the wait expires."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            message = self.next_after(key, after)
            if message is not None:
                return message
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            waiters = self._waiters.setdefault(key, [])
            try:
                await wait_for_wake(waiters, remaining)
            finally:
                if not waiters and self._waiters.get(key) is waiters:
                    del self._waiters[key]

    def page(self, key: StreamKey, page_size: int, before: int | None) -> tuple[list[StreamMessage], str]:
        """Returns a page of committed messages, newest first, and the next (older) page's token or ``""``.

        A page holds at most 1,000 messages and stops before the SDK's 4 MiB response limit; it always holds
        at least one message when there is one (a message is never above the value size limit).
        """
        size = _MAX_PAGE if page_size <= 0 else min(page_size, _MAX_PAGE)
        rows = self._store.query(
            "SELECT seq, created, source, size, value FROM streams"
            " WHERE flow_type = ? AND flow_id = ? AND stream_name = ? AND seq < ? ORDER BY seq DESC LIMIT ?",
            (*key, before if before is not None else 2**63 - 1, size + 1),
        )
        page: list[StreamMessage] = []
        total = 0
        for row in rows[:size]:
            message = _message(row)
            cost = message.size + len(message.source) + _MESSAGE_OVERHEAD
            if page and total + cost > RESPONSE_BUDGET:
                break
            page.append(message)
            total += cost
        more = len(rows) > len(page)
        return page, (str(page[-1].seq) if more and page else "")

    def log_count(self) -> int:
        """How many Streams have bookkeeping in memory."""
        return len(self._logs)
