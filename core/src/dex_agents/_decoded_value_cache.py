"""The process's one cache of decoded immutable wire values, keyed by type and stored JSON text.

Steps load the same stored values over and over: every `RunModel` reads every message chunk after the
summary, the message window and the index, and decoding them was most of a Worker's CPU on a long session.
A value of a deeply immutable type (a frozen dataclass of strings, numbers, enums, and tuples and frozen
dataclasses of such, as `AgentMessage`, `AgentMessageChunk` and `AgentMessageIndex` are) decodes to an
object no one can change, so equal stored JSON may share one decoded object, whichever session, run,
Registry or client it belongs to. `CachedJsonCodec` wraps the JSON codec of such a type: a lookup costs a
hash of the text and, on a hit, one comparison, instead of parsing JSON and building every object.

The cache is one per process, not one per codec registry: a process builds a registry for its Worker and
one for each client it connects, and what bounds its memory is the process, so the bound is the process's
too; and since the values are immutable and decode identically in every registry, sharing them is safe and
lets a client and a Worker in one process (a web app, a test) reuse each other's work. Its bound counts the
stored JSON of each entry in UTF-8 bytes, least recently used first out; the decoded objects take about
four times that in memory. `set_decoded_value_cache_bytes` changes the bound (0 keeps nothing).
"""

from __future__ import annotations

import dataclasses
import threading
import types
from collections import OrderedDict
from enum import Enum
from functools import cache
from typing import Any, Union, cast, get_args, get_origin, get_type_hints

from dex import JsonCodec, Value, WireKind

__all__ = [
    "DEFAULT_DECODED_VALUE_CACHE_BYTES",
    "CachedJsonCodec",
    "DecodedValueCache",
    "decoded_value_cache",
    "is_immutable_type",
    "set_decoded_value_cache_bytes",
]

DEFAULT_DECODED_VALUE_CACHE_BYTES = 32 * 1024 * 1024
"""The process's decoded-value cache bound by default, in UTF-8 bytes of stored JSON."""

_IMMUTABLE_SCALARS: tuple[type[Any], ...] = (str, int, float, bool, type(None))


@cache
def is_immutable_type(type_hint: object) -> bool:
    """Whether every value of ``type_hint`` is deeply immutable, so one decoded object may be shared.

    True for str, numbers, bool, None, enums, ``tuple[X, ...]`` of such, unions of such, and frozen
    dataclasses whose fields all are such; false for lists, dicts, sets, ``object`` and anything else.
    """
    if any(type_hint is scalar for scalar in _IMMUTABLE_SCALARS):
        return True
    if isinstance(type_hint, type) and issubclass(type_hint, Enum):
        return True
    origin = get_origin(type_hint)
    arguments = get_args(type_hint)
    if origin is tuple:
        return all(argument is Ellipsis or is_immutable_type(argument) for argument in arguments)
    if origin in (Union, types.UnionType):
        return all(is_immutable_type(argument) for argument in arguments)
    if isinstance(type_hint, type) and dataclasses.is_dataclass(type_hint):
        if not cast(Any, type_hint).__dataclass_params__.frozen:
            return False
        hints = get_type_hints(type_hint)
        return all(is_immutable_type(hints[field.name]) for field in dataclasses.fields(type_hint))
    return False


def _holds_only_immutable_values(value: object) -> bool:
    # A value handed to `encode` may carry a list where its type says tuple; sharing it would be unsafe.
    if value is None or type(value) in _IMMUTABLE_SCALARS or isinstance(value, Enum):
        return True
    if type(value) is tuple:
        return all(_holds_only_immutable_values(item) for item in cast(tuple[object, ...], value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return cast(Any, type(value)).__dataclass_params__.frozen and all(
            _holds_only_immutable_values(getattr(value, field.name)) for field in dataclasses.fields(value)
        )
    return False


def _stored_size(text: str) -> int:
    # JSON the SDK writes is ASCII (isascii is O(1) on CPython); other writers may store UTF-8.
    return len(text) if text.isascii() else len(text.encode())


class DecodedValueCache:
    """Decoded immutable values by their type and stored JSON text, least recently used first out.

    The bound counts the stored JSON of each entry in UTF-8 bytes. Safe to use from several threads.

    Args:
        max_bytes: The most stored bytes to keep; 0 keeps nothing.

    Raises:
        ValueError: If ``max_bytes`` is negative.
    """

    def __init__(self, max_bytes: int = DEFAULT_DECODED_VALUE_CACHE_BYTES) -> None:
        self._entries: OrderedDict[tuple[object, str], tuple[object, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._max_bytes = 0
        self.hits = 0
        self.misses = 0
        self.resize(max_bytes)

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

    def resize(self, max_bytes: int) -> None:
        """Change the bound, dropping the least recently used entries that no longer fit.

        Raises:
            ValueError: If ``max_bytes`` is negative.
        """
        if max_bytes < 0:
            raise ValueError(f"the decoded-value cache bound must not be negative, got {max_bytes}")
        with self._lock:
            self._max_bytes = max_bytes
            self._shrink()

    def get(self, type_hint: object, text: str) -> object | None:
        """Return the value of ``type_hint`` decoded from ``text``, or `None` when it is not kept."""
        key = (type_hint, text)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, type_hint: object, text: str, value: object) -> None:
        """Keep ``value`` as ``text`` decoded as ``type_hint``, dropping the least recently used to fit."""
        size = _stored_size(text)
        key = (type_hint, text)
        with self._lock:
            if size > self._max_bytes:
                return
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._size -= previous[1]
            self._entries[key] = (value, size)
            self._size += size
            self._shrink()

    def clear(self) -> None:
        """Drop every entry and reset the hit and miss counts."""
        with self._lock:
            self._entries.clear()
            self._size = 0
            self.hits = 0
            self.misses = 0

    def _shrink(self) -> None:
        while self._size > self._max_bytes:
            _, (_, size) = self._entries.popitem(last=False)
            self._size -= size


_process_cache = DecodedValueCache()


def decoded_value_cache() -> DecodedValueCache:
    """The process's cache, which every `CachedJsonCodec` uses unless it was given another."""
    return _process_cache


def set_decoded_value_cache_bytes(max_bytes: int) -> None:
    """Bound the process's cache of decoded immutable values (message chunks, the index, messages, ...).

    The bound counts the stored JSON of each kept value in UTF-8 bytes; the decoded objects take about four
    times that in memory. 0 keeps nothing, so every load decodes again. Lowering it drops the least
    recently used values at once.

    Args:
        max_bytes: The new bound; `DEFAULT_DECODED_VALUE_CACHE_BYTES` (32 MiB) by default.

    Raises:
        ValueError: If ``max_bytes`` is negative.
    """
    _process_cache.resize(max_bytes)


class CachedJsonCodec:
    """A JSON codec of a deeply immutable type that hands out one decoded object per stored JSON text.

    Encoding is the wrapped codec's, byte for byte. With ``keep_encoded`` it keeps the encoded value too
    (when it is exactly of the type and holds only immutable values): for stored state that the writer is
    the likeliest next reader of, as the Worker that moves messages into a new chunk reads that chunk on its
    next model call. Values written once and read elsewhere (events, Step results) would only push those
    out.

    Args:
        codec: The type's JSON codec.
        type_hint: The type it encodes and decodes; `is_immutable_type` must hold for it.
        cache: The cache; the process's by default.
        keep_encoded: Keep each value it encodes as the decoded form of its JSON.

    Raises:
        ValueError: If ``type_hint`` is not deeply immutable.
    """

    def __init__(
        self,
        codec: JsonCodec[Any],
        type_hint: object,
        cache: DecodedValueCache | None = None,
        *,
        keep_encoded: bool = False,
    ) -> None:
        if not is_immutable_type(type_hint):
            raise ValueError(
                f"{codec.type_name} is not deeply immutable, so its decoded values cannot be shared"
            )
        self._codec = codec
        self._type_hint = type_hint
        self.cache = cache if cache is not None else _process_cache
        self._keep_encoded = keep_encoded

    @property
    def type_name(self) -> str:
        """The wrapped codec's type name."""
        return self._codec.type_name

    @property
    def wire_kind(self) -> WireKind:
        """JSON."""
        return self._codec.wire_kind

    @property
    def keeps_encoded(self) -> bool:
        """Whether each value it encodes is kept as the decoded form of its JSON."""
        return self._keep_encoded

    def encode(self, value: Any) -> Value:
        """Encode as the wrapped codec does; with ``keep_encoded``, keep ``value`` as its decoded form."""
        encoded = self._codec.encode(value)
        # Only an instance of exactly the type: a subclass's object is not what decoding would build.
        if (
            self._keep_encoded
            and cast(object, type(value)) is self._type_hint
            and isinstance(encoded.data, str)
            and _holds_only_immutable_values(value)
        ):
            self.cache.put(self._type_hint, encoded.data, value)
        return encoded

    def decode(self, value: Value) -> Any:
        """Return the kept value for this stored JSON, or decode it with the wrapped codec and keep it."""
        text = value.data
        if value.kind is not WireKind.JSON or not isinstance(text, str):
            return self._codec.decode(value)  # raises the wrapped codec's error
        decoded = self.cache.get(self._type_hint, text)
        if decoded is None:
            decoded = self._codec.decode(value)
            self.cache.put(self._type_hint, text, decoded)
        return decoded
