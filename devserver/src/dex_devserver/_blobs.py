"""Blob offload: large string and object values are stored once per Flow and travel as blob references.

A blob belongs to the Flow whose value it holds: `LoadBlobs` serves it only to that Flow. Blob references
are the server's to issue, so a value from a client or a Worker that is a reference is refused. Recently
used blobs are cached in memory up to a byte budget.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from dex.dexpb import dex_pb2 as pb

from ._sizes import STORED_VALUE, SizeRecord
from ._store import Store

__all__ = [
    "BLOB_REFERENCE_KINDS",
    "DEFAULT_BLOB_CACHE_BYTES",
    "DEFAULT_BLOB_THRESHOLD",
    "DEFAULT_MAX_VALUE_BYTES",
    "BlobReferenceError",
    "Blobs",
    "Owner",
    "ValueRefusedError",
    "ValueTooLargeError",
    "value_size",
]

DEFAULT_BLOB_THRESHOLD = 1024
# Safely under the SDK's 4 MiB gRPC receive limit, so a value that is accepted can always be delivered.
DEFAULT_MAX_VALUE_BYTES = 2 * 1024 * 1024
DEFAULT_BLOB_CACHE_BYTES = 64 * 1024 * 1024
BLOB_REFERENCE_KINDS = ("internal_blob_id_for_string_value", "internal_blob_id_for_obj_value")

_STRING_PREFIX = "s-"
_OBJ_PREFIX = "o-"
# The cost of a cache entry beyond its payload (key, message object, bookkeeping), roughly.
_ENTRY_OVERHEAD = 200

# (flow ID, run ID) of the run a value belongs to.
Owner = tuple[str, str]


class ValueRefusedError(Exception):
    """A value from a client or a Worker is refused; the message names the value and why."""


class ValueTooLargeError(ValueRefusedError):
    """A value is above the devserver's `--max-value-bytes` limit.

    Args:
        what: Names the value, such as ``attribute 'transcript'``.
        size: The value's size in bytes.
        limit: The limit in bytes.
    """

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(
            f"value of {what} is {size} bytes, above the devserver limit of {limit} bytes"
            " (--max-value-bytes); store large data outside the Flow and keep a reference"
        )
        self.what = what
        self.size = size
        self.limit = limit


class BlobReferenceError(ValueRefusedError):
    """A value from a client or a Worker is a blob reference, which only the server may issue."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"value of {what} is a blob reference (internal_blob_id_*); blob references are issued by the"
            " server, so send the value itself"
        )


def value_size(value: pb.Value) -> int:
    """Returns the payload size of a value in bytes (0 for scalars and references)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return len(value.string_value.encode())
    if kind == "obj_value":
        return len(value.obj_value.payload)
    return 0


class Blobs:
    """Offloads values to the store and hydrates references, per owning Flow.

    Args:
        store: Where blobs are kept.
        threshold: Values with a payload above this many bytes are offloaded.
        max_value_bytes: Values above this many bytes are refused.
        cache_bytes: How many bytes of blob content to keep in memory.
        sizes: Where the largest value accepted is noted.
    """

    def __init__(
        self,
        store: Store,
        threshold: int,
        max_value_bytes: int,
        cache_bytes: int = DEFAULT_BLOB_CACHE_BYTES,
        sizes: SizeRecord | None = None,
    ) -> None:
        self._store = store
        self.sizes = sizes or SizeRecord()
        self.threshold = threshold
        self.max_value_bytes = max_value_bytes
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[str, str], tuple[pb.Value, int]] = OrderedDict()
        self.cached_bytes = 0

    def check(self, value: pb.Value, what: str) -> None:
        """Refuses a value above the limit or a blob reference, without offloading it.

        Stream messages are kept inline, so offloading them would only store each large one twice.

        Args:
            value: A value received from a client or a Worker.
            what: Names the value in errors.

        Raises:
            ValueRefusedError: When the value is above the limit or is a blob reference.
        """
        if value.WhichOneof("kind") in BLOB_REFERENCE_KINDS:
            raise BlobReferenceError(what)
        size = value_size(value)
        if size > self.max_value_bytes:
            raise ValueTooLargeError(what, size, self.max_value_bytes)
        self.sizes.saw(STORED_VALUE, size)

    def ingest(self, value: pb.Value, what: str, owner: Owner) -> pb.Value:
        """Checks a value and offloads it when it is large.

        Args:
            value: A value received from a client or a Worker.
            what: Names the value in errors.
            owner: The run the value belongs to.

        Returns:
            The value itself, or a blob reference to it.

        Raises:
            ValueRefusedError: When the value is above the limit or is a blob reference.
        """
        self.check(value, what)
        if value_size(value) <= self.threshold:
            return value
        return self.offload(value, owner)

    def offload(self, value: pb.Value, owner: Owner) -> pb.Value:
        """Stores a string or object value (of any size) as a blob of its owner and returns the reference."""
        if value.WhichOneof("kind") == "string_value":
            data = value.string_value.encode()
            blob_id = _STRING_PREFIX + hashlib.sha256(data).hexdigest()
            reference = pb.Value(internal_blob_id_for_string_value=blob_id)
        else:
            data = value.obj_value.SerializeToString()
            blob_id = _OBJ_PREFIX + hashlib.sha256(data).hexdigest()
            reference = pb.Value(internal_blob_id_for_obj_value=blob_id)
        key = (owner[0], blob_id)
        if key not in self._cache:
            self._store.stage(
                "INSERT OR IGNORE INTO blobs (flow_id, blob_id, run_id, data) VALUES (?, ?, ?, ?)",
                [(owner[0], blob_id, owner[1], data)],
            )
            # A copy: callers replace the value they passed in with the reference, in place.
            cached = pb.Value()
            cached.CopyFrom(value)
            self._remember(key, cached, len(data))
        return reference

    def resolve(self, flow_id: str, blob_id: str) -> pb.Value | None:
        """Returns the value behind a blob ID of a Flow, or None when that Flow has no such blob."""
        key = (flow_id, blob_id)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached[0]
        rows = self._store.query(
            "SELECT data FROM blobs WHERE flow_id = ? AND blob_id = ? LIMIT 1", (flow_id, blob_id)
        )
        if not rows:
            return None
        data = bytes(rows[0][0])
        if blob_id.startswith(_STRING_PREFIX):
            value = pb.Value(string_value=data.decode())
        else:
            value = pb.Value(obj_value=pb.EncodedObject.FromString(data))
        self._remember(key, value, len(data))
        return value

    def hydrate(self, flow_id: str, value: pb.Value) -> pb.Value:
        """Returns the value with a blob reference of the Flow replaced by its content (others stay)."""
        kind = value.WhichOneof("kind")
        if kind == "internal_blob_id_for_string_value":
            return self.resolve(flow_id, value.internal_blob_id_for_string_value) or value
        if kind == "internal_blob_id_for_obj_value":
            return self.resolve(flow_id, value.internal_blob_id_for_obj_value) or value
        return value

    def forget(self) -> None:
        """Empties the cache (its entries may name blobs whose writes were lost)."""
        self._cache.clear()
        self.cached_bytes = 0

    def _remember(self, key: tuple[str, str], value: pb.Value, size: int) -> None:
        cost = size + _ENTRY_OVERHEAD
        if cost > self.cache_bytes:
            return
        self._cache[key] = (value, cost)
        self.cached_bytes += cost
        while self.cached_bytes > self.cache_bytes:
            _, (_, evicted) = self._cache.popitem(last=False)
            self.cached_bytes -= evicted
