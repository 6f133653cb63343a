"""An in-memory BlobCache that records every hydration, so a test can see what reached a process.

The SDK calls ``put`` only after it hydrated a blob reference through ``LoadBlobs``; a value sent
inline never touches the cache. So a ``blob_put`` event proves the request carried a reference.
"""

from __future__ import annotations

import threading

from dex import BlobCacheConfig

from .sandbox import Sandbox


def split_cache_key(key: str) -> tuple[str, str]:
    """Split the SDK's ``f"{len(flow_id)}:{flow_id}{blob_id}"`` cache key into (flow_id, blob_id)."""
    length, _, rest = key.partition(":")
    size = int(length)
    return rest[:size], rest[size:]


class RecordingBlobCache:
    """Satisfies ``dex.BlobCache``; ``owner`` says which process recorded the event."""

    def __init__(self, sandbox: Sandbox, owner: str) -> None:
        self._sandbox = sandbox
        self._owner = owner
        self._entries: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._config = BlobCacheConfig(
            directory=str(sandbox.root / "blob-cache"), max_bytes=256 * 1024 * 1024
        )

    @property
    def config(self) -> BlobCacheConfig:
        return self._config

    def get(self, blob_id: str) -> bytes | None:
        with self._lock:
            payload = self._entries.get(blob_id)
        flow_id, blob = split_cache_key(blob_id)
        self._sandbox.record(flow_id, "blob_get", owner=self._owner, blob=blob, hit=payload is not None)
        return payload

    def put(self, blob_id: str, payload: bytes) -> bool:
        with self._lock:
            self._entries[blob_id] = bytes(payload)
        flow_id, blob = split_cache_key(blob_id)
        self._sandbox.record(flow_id, "blob_put", owner=self._owner, blob=blob, size=len(payload))
        return True

    def delete(self, blob_id: str) -> None:
        with self._lock:
            self._entries.pop(blob_id, None)

    def delete_all(self) -> None:
        with self._lock:
            self._entries.clear()

    def close(self) -> None:
        self.delete_all()
