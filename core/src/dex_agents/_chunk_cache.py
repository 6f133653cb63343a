"""Decoded message chunks, kept per process so a long session's history is decoded once, not on every Step.

Message chunks are immutable: a chunk's stored JSON never changes, and a Step that loads it gets the same
bytes every time. Decoding them is most of a Worker's CPU on a long session (a model call loads every chunk
after the summary), so the chunk codec keeps the decoded value under the SHA-256 digest of its stored JSON,
the same identity a content-addressed blob store gives it. The digest is about twenty times cheaper than
decoding, two chunks with the same bytes hold the same messages, and nothing has to know which session or
run a chunk belongs to. The cache is a least-recently-used map bounded by the stored size of its chunks.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from dex_agents.values import AgentMessageChunk

__all__ = ["DEFAULT_DECODED_CHUNK_CACHE_BYTES", "DecodedChunkCache"]

#: The default bound of a codec registry's decoded-chunk cache: the stored (JSON) size of the chunks it keeps.
DEFAULT_DECODED_CHUNK_CACHE_BYTES = 64 * 1024 * 1024


def _identity(payload: str) -> bytes:
    return hashlib.sha256(payload.encode("utf-8", errors="surrogatepass")).digest()


class DecodedChunkCache:
    """Decoded `AgentMessageChunk` values by the digest of their stored JSON, least recently used first out.

    The bound counts each chunk's stored JSON size; the decoded objects take a few times that in memory.
    Safe to use from several threads.

    Args:
        max_bytes: The most stored bytes of chunks to keep; 0 keeps none.

    Raises:
        ValueError: If ``max_bytes`` is negative.
    """

    def __init__(self, max_bytes: int = DEFAULT_DECODED_CHUNK_CACHE_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError(f"the decoded-chunk cache bound must not be negative, got {max_bytes}")
        self._max_bytes = max_bytes
        self._entries: OrderedDict[bytes, tuple[AgentMessageChunk, int]] = OrderedDict()
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
        """The stored bytes of the chunks kept now."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, payload: str) -> AgentMessageChunk | None:
        """Return the decoded chunk whose stored JSON is ``payload``, or `None` when it is not kept."""
        key = _identity(payload)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, payload: str, chunk: AgentMessageChunk) -> None:
        """Keep ``chunk`` as the decoded value of ``payload``, dropping the least recently used to fit."""
        size = len(payload)
        if size > self._max_bytes:
            return
        key = _identity(payload)
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._size -= previous[1]
            self._entries[key] = (chunk, size)
            self._size += size
            while self._size > self._max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._size -= dropped
