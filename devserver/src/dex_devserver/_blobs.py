"""Blob offload: large string and object values are stored once and travel as blob references."""

from __future__ import annotations

import hashlib

from dex.dexpb import dex_pb2 as pb

from ._store import Store

__all__ = ["DEFAULT_BLOB_THRESHOLD", "DEFAULT_MAX_VALUE_BYTES", "Blobs", "ValueTooLargeError", "value_size"]

DEFAULT_BLOB_THRESHOLD = 1024
# Safely under the SDK's 4 MiB gRPC receive limit, so a value that is accepted can always be delivered.
DEFAULT_MAX_VALUE_BYTES = 2 * 1024 * 1024

_STRING_PREFIX = "s-"
_OBJ_PREFIX = "o-"


class ValueTooLargeError(Exception):
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


def value_size(value: pb.Value) -> int:
    """Returns the payload size of a value in bytes (0 for scalars and references)."""
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return len(value.string_value.encode())
    if kind == "obj_value":
        return len(value.obj_value.payload)
    return 0


class Blobs:
    """Offloads and hydrates values against the store.

    Args:
        store: Where blobs are kept.
        threshold: Values with a payload above this many bytes are offloaded.
        max_value_bytes: Values above this many bytes are refused.
    """

    def __init__(self, store: Store, threshold: int, max_value_bytes: int) -> None:
        self._store = store
        self.threshold = threshold
        self.max_value_bytes = max_value_bytes
        self._cache: dict[str, pb.Value] = {}

    def check_size(self, value: pb.Value, what: str) -> None:
        """Refuses a value above the limit without offloading it.

        Stream messages are kept inline, so offloading them would only store each large one twice.

        Args:
            value: A value received from a client or a Worker.
            what: Names the value in errors.

        Raises:
            ValueTooLargeError: When the value is above the limit.
        """
        size = value_size(value)
        if size > self.max_value_bytes:
            raise ValueTooLargeError(what, size, self.max_value_bytes)

    def ingest(self, value: pb.Value, what: str) -> pb.Value:
        """Checks a value against the limit and offloads it when it is large.

        Args:
            value: A value received from a client or a Worker.
            what: Names the value in errors.

        Returns:
            The value itself, or a blob reference to it.

        Raises:
            ValueTooLargeError: When the value is above the limit.
        """
        self.check_size(value, what)
        if value_size(value) <= self.threshold:
            return value
        kind = value.WhichOneof("kind")
        if kind == "string_value":
            data = value.string_value.encode()
            blob_id = _STRING_PREFIX + hashlib.sha256(data).hexdigest()
            reference = pb.Value(internal_blob_id_for_string_value=blob_id)
        else:
            data = value.obj_value.SerializeToString()
            blob_id = _OBJ_PREFIX + hashlib.sha256(data).hexdigest()
            reference = pb.Value(internal_blob_id_for_obj_value=blob_id)
        if blob_id not in self._cache:
            self._store.put_blob(blob_id, data)
            # A copy: callers replace the value they passed in with the reference, in place.
            cached = pb.Value()
            cached.CopyFrom(value)
            self._cache[blob_id] = cached
        return reference

    def resolve(self, blob_id: str) -> pb.Value | None:
        """Returns the full value behind a blob ID, or None when the ID is unknown."""
        cached = self._cache.get(blob_id)
        if cached is not None:
            return cached
        data = self._store.get_blob(blob_id)
        if data is None:
            return None
        if blob_id.startswith(_STRING_PREFIX):
            value = pb.Value(string_value=data.decode())
        else:
            value = pb.Value(obj_value=pb.EncodedObject.FromString(data))
        self._cache[blob_id] = value
        return value

    def hydrate(self, value: pb.Value) -> pb.Value:
        """Returns the value with a blob reference replaced by its content (unknown references stay)."""
        kind = value.WhichOneof("kind")
        if kind == "internal_blob_id_for_string_value":
            return self.resolve(value.internal_blob_id_for_string_value) or value
        if kind == "internal_blob_id_for_obj_value":
            return self.resolve(value.internal_blob_id_for_obj_value) or value
        return value
