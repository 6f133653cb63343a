"""Tolerant JSON codecs for the session's wire value types.

dex-python-sdk 1.23.0 derives a JSON codec for every dataclass automatically, but its decoder reads every
field from the JSON object, so a writer that leaves out a field with a default (a client in another
language, a UI, a raw ``StartFlow``, or a dex-agents 0.1.0 writer that predates a later field) fails with a
bare ``KeyError``. The codecs here decode such JSON with the field's default instead, and name the type and
the field when a field without a default is missing. They encode exactly as the SDK's automatic codec does
(compact JSON with sorted keys, enums as their values, tuples as arrays), so stored values are unchanged.

Every `RunModel` receives the whole stored conversation, so a Worker decodes the same messages again on
every model call; in a 400-message session that was most of its CPU. A value of an immutable type (a
frozen dataclass of strings, numbers, enums and tuples of them, such as `AgentMessage`) decodes to an
object no one can change, so the codecs keep recently decoded ones by their JSON text and hand the same
object out again. The cache holds at most `DECODED_VALUE_CACHE_BYTES` of JSON text per process.
"""

import dataclasses
import threading
import types
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any, NamedTuple, Union, cast, get_args, get_origin, get_type_hints

from dex import Codec, CodecRegistry, JsonCodec, Value, WireKind

from dex_agents import persistence, values

__all__ = ["DECODED_VALUE_CACHE_BYTES", "agent_codec_registry", "is_immutable_type", "wire_value_types"]

DECODED_VALUE_CACHE_BYTES = 16 * 1024 * 1024
"""The most JSON text, in characters, whose decoded values a process keeps for reuse."""


class _Field(NamedTuple):
    name: str
    type_hint: object
    required: bool


@cache
def _fields_of(dataclass_type: type[Any]) -> tuple[_Field, ...]:
    # Resolving type hints is the costly part of a decode; each type's fields are resolved once.
    hints = get_type_hints(dataclass_type)
    return tuple(
        _Field(
            definition.name,
            hints[definition.name],
            definition.default is dataclasses.MISSING and definition.default_factory is dataclasses.MISSING,
        )
        for definition in dataclasses.fields(dataclass_type)
        if definition.init
    )


def _type_name(type_hint: object) -> str:
    return cast(str, getattr(type_hint, "__qualname__", str(type_hint)))


def _decode_dataclass(value: object, dataclass_type: type[Any]) -> object:
    if not isinstance(value, Mapping):
        raise TypeError(f"{_type_name(dataclass_type)} requires a JSON object")
    data = cast(Mapping[str, object], value)
    arguments: dict[str, object] = {}
    for definition in _fields_of(dataclass_type):
        if definition.name in data:
            arguments[definition.name] = _decode(data[definition.name], definition.type_hint)
        elif definition.required:
            raise TypeError(f"{_type_name(dataclass_type)} requires field '{definition.name}'")
        # A missing field with a default is left out, so the dataclass applies its default or factory.
    # Keys that name no field are ignored, as the SDK's automatic decoder ignores them.
    return dataclass_type(**arguments)


def _decode(value: object, type_hint: object) -> object:
    """Decode parsed JSON as the SDK's automatic decoder does, except for missing dataclass fields."""
    origin = get_origin(type_hint)
    arguments = get_args(type_hint)
    if isinstance(type_hint, type) and dataclasses.is_dataclass(type_hint):
        return _decode_dataclass(value, type_hint)
    if type_hint is datetime:
        if not isinstance(value, str):
            raise TypeError("datetime requires a JSON string")
        return datetime.fromisoformat(value)
    if isinstance(type_hint, type) and issubclass(type_hint, Enum):
        return type_hint(value)
    if origin is list:
        return [_decode(item, arguments[0]) for item in cast(Sequence[object], value)]
    if origin is tuple:
        return tuple(_decode(item, arguments[0]) for item in cast(Sequence[object], value))
    if origin in (dict, Mapping):
        return {
            _decode(key, arguments[0]): _decode(item, arguments[1])
            for key, item in cast(Mapping[object, object], value).items()
        }
    if origin in (Union, types.UnionType):
        # The SDK passes a union's value through unchanged; an object for the union's one dataclass
        # member is decoded here too, so a nested optional value tolerates missing fields as well.
        members = [
            member for member in arguments if isinstance(member, type) and dataclasses.is_dataclass(member)
        ]
        if len(members) == 1 and isinstance(value, Mapping):
            return _decode_dataclass(cast(object, value), members[0])
        return value
    if type_hint in (str, bool, int, float) and type(value) is not type_hint:
        raise TypeError(f"expected {_type_name(type_hint)}")
    return value


def _encode(value: object) -> object:
    """Convert a value to JSON-compatible data exactly as the SDK's automatic encoder does."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encode(dataclasses.asdict(value))
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {key: _encode(item) for key, item in cast(Mapping[object, object], value).items()}
    if isinstance(value, (list, tuple)):
        return [_encode(item) for item in cast(Sequence[object], value)]
    return value


def _has_json_codec(type_hint: object) -> bool:
    # The types the SDK gives an automatic JSON codec: dataclasses, enums and typed containers.
    if isinstance(type_hint, type):
        return dataclasses.is_dataclass(type_hint) or issubclass(type_hint, Enum)
    return get_origin(type_hint) in (list, tuple, dict, Mapping, Sequence)


def wire_value_types() -> tuple[object, ...]:
    """Return every JSON-coded type hint the session Flow's Steps, RPCs and persistence use.

    That is every dataclass and enum of ``dex_agents.values`` (Step and RPC inputs and outputs and the
    types nested in them) plus the value types of the shared Attributes, Channels and the ``AgentEvents``
    Stream, such as ``list[AgentInterrupt]``.
    """
    found: list[object] = [getattr(values, name) for name in values.__all__]
    definitions = (
        persistence.AGENT_STATE,
        persistence.AGENT_MESSAGES,
        persistence.FRAMEWORK_RUN_STATE,
        persistence.AGENT_TOOL_CALLS,
        persistence.PENDING_INTERRUPTS,
        persistence.AGENT_USAGE,
        persistence.QUEUED_USER_MESSAGES,
        persistence.INTERRUPT_RESOLUTIONS,
        persistence.TOOL_CALL_RESULTS,
        persistence.STEERED_USER_MESSAGES,
        persistence.TURN_CONTROL_REQUESTS,
        persistence.TURN_CANCELLATION_REQUEST,
        persistence.TOOL_CALL_CANCELLATIONS,
        persistence.agent_events_stream(),
    )
    found.extend(definition.value_type for definition in definitions)
    unique: list[object] = []
    for type_hint in found:
        if _has_json_codec(type_hint) and type_hint not in unique:
            unique.append(type_hint)
    return tuple(unique)


_IMMUTABLE_SCALARS = (str, int, float, bool, type(None))


@cache
def is_immutable_type(type_hint: object) -> bool:
    """Whether every value of ``type_hint`` is deeply immutable, so one decoded object may be shared.

    True for str, numbers, bool, None, enums, ``tuple[X, ...]`` of such, unions of such, and frozen
    dataclasses whose fields all are such; false for lists, dicts, sets and anything else.
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
        parameters = cast(Any, type_hint).__dataclass_params__
        return bool(parameters.frozen) and all(
            is_immutable_type(field.type_hint) for field in _fields_of(type_hint)
        )
    return False


class _DecodedValues:
    """Recently decoded immutable values by type and JSON text, bounded by the text's total length."""

    def __init__(self, max_characters: int) -> None:
        self._max_characters = max_characters
        self._entries: OrderedDict[tuple[object, str], object] = OrderedDict()
        self._characters = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[object, str]) -> object | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: tuple[object, str], value: object) -> None:
        size = len(key[1])
        if size > self._max_characters:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = value
            self._characters += size
            while self._characters > self._max_characters:
                (_, evicted_text), _ = self._entries.popitem(last=False)
                self._characters -= len(evicted_text)


_decoded_values = _DecodedValues(DECODED_VALUE_CACHE_BYTES)


class _ReusingJsonCodec:
    """A JSON codec that hands out the same decoded object for the same JSON text of an immutable type."""

    def __init__(self, codec: JsonCodec[Any], type_hint: object) -> None:
        self._codec = codec
        self._type_hint = type_hint

    @property
    def type_name(self) -> str:
        return self._codec.type_name

    @property
    def wire_kind(self) -> WireKind:
        return self._codec.wire_kind

    def encode(self, value: Any) -> Value:
        return self._codec.encode(value)

    def decode(self, value: Value) -> Any:
        if value.kind is not WireKind.JSON or not isinstance(value.data, str):
            return self._codec.decode(value)
        key = (self._type_hint, value.data)
        decoded = _decoded_values.get(key)
        if decoded is None:
            decoded = self._codec.decode(value)
            _decoded_values.put(key, decoded)
        return decoded


def _json_codec(type_hint: object) -> Codec[Any]:
    def decoder(data: Any) -> object:
        return _decode(data, type_hint)

    codec = JsonCodec(_type_name(type_hint), decoder, _encode, type_hint)
    return _ReusingJsonCodec(codec, type_hint) if is_immutable_type(type_hint) else codec


def agent_codec_registry() -> CodecRegistry:
    """Return a codec registry that decodes session values tolerantly; pass it to every `Registry`.

    The SDK's automatic dataclass codec requires every field in the JSON, so JSON from a client in
    another language, a UI, a raw ``StartFlow``, or a dex-agents 0.1.0 writer that omits a field with a
    default (``session_settings``, ``plan_mode``, ``rejection_message``, ...) fails to decode. With these
    codecs a missing field takes its default, a missing field without a default raises
    ``TypeError("AgentUserMessage requires field 'text'")``, and keys that name no field are ignored.
    Encoding is byte-identical to the SDK's automatic codec. Types not covered here still resolve through
    the SDK's built-in codecs.

    Returns:
        A new ``dex.CodecRegistry`` with a JSON codec for every dataclass and enum value type of the
        session Flow's Steps, RPCs, Attributes, Channels and Streams.

    Examples:
        >>> registry = Registry([flow], codec_registry=agent_codec_registry(), allow_async_handlers=True)
    """
    return CodecRegistry({type_hint: _json_codec(type_hint) for type_hint in wire_value_types()})
