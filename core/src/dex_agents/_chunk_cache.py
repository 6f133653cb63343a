"""Decoded message chunks and index, kept per process so a long session's history is decoded once.

Message chunks are immutable: a chunk's stored JSON never changes, and every Step that loads it gets the same
bytes. The message index changes only when a chunk is written or deleted. Decoding them was most of a
Worker's CPU on a long session (a model call reads every chunk after the summary, and several functions
read the index), so their codecs keep each decoded value under its stored JSON text, its stored identity
(two values with the same bytes are the same value, whichever session or run they belong to). A lookup
costs one hash of the text and, on a hit, one comparison, instead of parsing JSON and building every
message. The cache is a least-recently-used map bounded by the stored size of what it keeps.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["DEFAULT_DECODED_CHUNK_CACHE_BYTES", "DecodedValueCache"]

#: The default bound of a codec registry's decoded-value cache, in bytes of stored JSON. Each entry keeps its
#: stored JSON as the key and the decoded value, which together take about four times that in memory.
DEFAULT_DECODED_CHUNK_CACHE_BYTES = 32 * 1024 * 1024


class DecodedValueCache:
    """Decoded immutable values by their stored JSON text, least recently used first out.

    The bound counts the stored JSON of each entry. Safe to use from several threads.

    Args:
        max_bytes: The most stored bytes to keep; 0 keeps nothing.

    Raises:
        ValueError: If ``max_bytes`` is negative.
    """

    def __init__(self, max_bytes: int = DEFAULT_DECODED_CHUNK_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"the decoded-value cache bound must not be negative, got {max_bytes}")
        self._max_bytes = max_bytes
        self._entries: OrderedDict[str, object] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def max_bytes(self) -> int:
        """The bound, in stored bytes."""
        return self._max_bytes

    @property
    def size(self) -> int:
        """The stored bytes of the values kept now."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, payload: str) -> object | None:
        """Return the decoded value whose stored JSON is ``payload``, or `None` when it is not kept."""
        with self._lock:
            value = self._entries.get(payload)
            if value is None:
                self.misses += 1
                return None
            self._entries.move_to_end(payload)
            self.hits += 1
            return value

    def put(self, payload: str, value: object) -> None:
        """Keep ``value`` as the decoded ``payload``, dropping the least recently used entries to fit."""
        size = len(payload)
        if size > self._max_bytes:
            return
        with self._lock:
            if self._entries.pop(payload, None) is not None:
                self._size -= size
            self._entries[payload] = value
            self._size += size
            while self._size > self._max_bytes:
                dropped, _ = self._entries.popitem(last=False)
                self._size -= len(dropped)
