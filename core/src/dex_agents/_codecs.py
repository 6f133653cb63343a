"""Tolerant JSON codecs for the session's wire value types.

dex-python-sdk 1.23.0 derives a JSON codec for every dataclass automatically, but its decoder reads every
field from the JSON object, so a writer that leaves out a field with a default (a client in another
language, a UI, a raw ``StartFlow``, or a dex-agents 0.1.0 writer that predates a later field) fails with a
bare ``KeyError``. The codecs here decode such JSON with the field's default instead, and name the type and
the field when a field without a default is missing. They encode exactly as the SDK's automatic codec does
(compact JSON with sorted keys, enums as their values, tuples as arrays), so stored values are unchanged.

Steps load the same stored values again and again (every `RunModel` reads the message chunks, the window
and the index), so the codec of every deeply immutable type keeps its decoded values in the process's
decoded-value cache (``dex_agents/_decoded_value_cache.py``) and hands the same object out again.
"""

import dataclasses
import types
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from functools import cache
from typing import Any, NamedTuple, Union, cast, get_args, get_origin, get_type_hints

from dex import Codec, CodecRegistry, JsonCodec

from dex_agents import persistence, values
from dex_agents._decoded_value_cache import CachedJsonCodec, is_immutable_type

__all__ = [
    "KEPT_WHEN_WRITTEN",
    "STEP_INPUT_UNIONS",
    "agent_codec_registry",
    "encode_json_data",
    "wire_value_types",
]

#: The input type of `RunModel`, `CompactContext` and `RecordTurnFailure`: a failure route must share its
#: Step's input type, and the SDK has no automatic codec for a union.
STEP_INPUT_UNIONS: tuple[object, ...] = (values.CompactContextInput | None,)

#: Stored state a Worker writes and then reads on its next Step: its codecs keep what they encode, so the
#: writer never decodes it (see `CachedJsonCodec`).
KEPT_WHEN_WRITTEN: tuple[object, ...] = (
    values.AgentMessage,
    values.AgentMessageChunk,
    values.AgentMessageIndex,
)


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


@cache
def _field_names(dataclass_type: type[Any]) -> tuple[str, ...]:
    return tuple(definition.name for definition in dataclasses.fields(dataclass_type))


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


def encode_json_data(value: object) -> object:
    """Convert a value to JSON-compatible data exactly as the SDK's automatic encoder does.

    The SDK's encoder runs `dataclasses.asdict` (which deep-copies every leaf) and then converts the
    copy; this walks the value once instead, into the same data: a dataclass becomes an object of all its
    fields, an enum its value, a datetime its ISO text, a mapping an object, a list or tuple an array.
    """
    if type(value) in _JSON_SCALARS:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: encode_json_data(getattr(value, name)) for name in _field_names(type(value))}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {key: encode_json_data(item) for key, item in cast(Mapping[object, object], value).items()}
    if isinstance(value, (list, tuple)):
        return [encode_json_data(item) for item in cast(Sequence[object], value)]
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
        persistence.AGENT_MESSAGE_CHUNKS,
        persistence.AGENT_MESSAGE_INDEX,
        persistence.TURN_REPLY_SEQUENCE,
        persistence.CONTEXT_SUMMARY,
        persistence.SESSION_SETTINGS,
        persistence.TURN_SESSION_SETTINGS,
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
        persistence.AGENT_PLAN,
        persistence.PLAN_EXECUTIONS,
        persistence.PENDING_PLAN_EXECUTION,
        persistence.agent_events_stream(),
    )
    found.extend(definition.value_type for definition in definitions)
    unique: list[object] = []
    for type_hint in found:
        if _has_json_codec(type_hint) and type_hint not in unique:
            unique.append(type_hint)
    return tuple(unique)


def _json_codec(type_hint: object, *, checks_type: bool = True) -> Codec[Any]:
    def decoder(data: Any) -> object:
        return _decode(data, type_hint)

    codec = JsonCodec(_type_name(type_hint), decoder, encode_json_data, type_hint if checks_type else None)
    if not is_immutable_type(type_hint):
        return codec
    return CachedJsonCodec(codec, type_hint, keep_encoded=type_hint in KEPT_WHEN_WRITTEN)


def agent_codec_registry() -> CodecRegistry:
    """Return a codec registry that decodes session values tolerantly; pass it to every `Registry`.

    The SDK's automatic dataclass codec requires every field in the JSON, so JSON from a client in
    another language, a UI, a raw ``StartFlow``, or a dex-agents 0.1.0 writer that omits a field with a
    default (``session_settings``, ``plan_mode``, ``rejection_message``, ...) fails to decode. With these
    codecs a missing field takes its default, a missing field without a default raises
    ``TypeError("AgentUserMessage requires field 'text'")``, and keys that name no field are ignored.
    Encoding is byte-identical to the SDK's automatic codec. Types not covered here still resolve through
    the SDK's built-in codecs. It also gives the Steps' ``CompactContextInput | None`` input a codec, which
    the SDK cannot derive, so every session Flow needs this registry.

    Values of deeply immutable types (message chunks, which never change once stored, the message index,
    messages, ...) are decoded once per process: every registry's codecs keep them in the process's
    decoded-value cache by their type and stored JSON, bounded by `set_decoded_value_cache_bytes`.

    Returns:
        A new ``dex.CodecRegistry`` with a JSON codec for every dataclass and enum value type of the
        session Flow's Steps, RPCs, Attributes, Channels and Streams.

    Examples:
        >>> registry = Registry([flow], codec_registry=agent_codec_registry(), allow_async_handlers=True)
    """
    codecs: dict[object, Codec[Any]] = {
        # The SDK's type check refuses every value of a container of `object` (a JSON object such as the
        # session settings), so such a container is checked when it is stored, not here.
        type_hint: _json_codec(type_hint, checks_type=object not in get_args(type_hint))
        for type_hint in wire_value_types()
    }
    for union in STEP_INPUT_UNIONS:
        # None travels as a null value and never reaches the codec, which sees only the dataclass member.
        codecs[union] = _json_codec(union, checks_type=False)
    return CodecRegistry(codecs)
