"""The process's decoded-value cache: immutable values decode once per stored JSON, within a byte bound."""

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

import pytest
from dex import CodecRegistry, JsonCodec, Value, WireKind

from dex_agents import (
    DEFAULT_DECODED_VALUE_CACHE_BYTES,
    AgentEvent,
    AgentInterrupt,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    AgentSnapshot,
    agent_codec_registry,
    set_decoded_value_cache_bytes,
)
from dex_agents._decoded_value_cache import (
    CachedJsonCodec,
    DecodedValueCache,
    decoded_value_cache,
    is_immutable_type,
)
from tests.test_unit_values import INTERRUPT, MESSAGE

AGENT_CODECS = agent_codec_registry()
SDK_CODECS = CodecRegistry()


@dataclass(frozen=True)
class _Pair:
    left: int
    right: int


@dataclass(frozen=True)
class _Span:
    left: int
    right: int


@dataclass(frozen=True)
class _Tags:
    tags: tuple[str, ...]


@dataclass
class _Mutable:
    value: int


@pytest.fixture
def process_cache() -> Iterator[DecodedValueCache]:
    cache = decoded_value_cache()
    yield cache
    set_decoded_value_cache_bytes(DEFAULT_DECODED_VALUE_CACHE_BYTES)


def _decode_fields(value_type: type[Any], data: dict[str, Any]) -> object:
    fields = {
        key: tuple(cast(list[object], item)) if isinstance(item, list) else item for key, item in data.items()
    }
    return value_type(**fields)


def _codec(value_type: type[Any], cache: DecodedValueCache, *, keep_encoded: bool = False) -> CachedJsonCodec:
    return CachedJsonCodec(
        JsonCodec(value_type.__name__, lambda data: _decode_fields(value_type, data), vars, value_type),
        value_type,
        cache,
        keep_encoded=keep_encoded,
    )


def test_a_chunk_is_decoded_once_and_then_served_from_the_cache() -> None:
    codec = AGENT_CODECS.resolve(AgentMessageChunk)
    assert isinstance(codec, CachedJsonCodec)
    index_codec = AGENT_CODECS.resolve(AgentMessageIndex)
    assert isinstance(index_codec, CachedJsonCodec) and index_codec.cache is codec.cache  # one bound for both
    chunk = AgentMessageChunk((MESSAGE,))
    payload = SDK_CODECS.resolve(AgentMessageChunk).encode(chunk)  # stored by another writer
    sdk_codec = SDK_CODECS.resolve(AgentMessageChunk)
    assert isinstance(sdk_codec, JsonCodec)
    fresh = CachedJsonCodec(sdk_codec, AgentMessageChunk, DecodedValueCache(1024 * 1024), keep_encoded=True)
    first = fresh.decode(payload)
    assert first == chunk
    assert fresh.decode(payload) is first  # the same object: nothing was decoded again
    assert (fresh.cache.hits, fresh.cache.misses) == (1, 1)
    # Equal bytes from another session or run are the same messages, so they share the decoded chunk.
    assert fresh.decode(Value(WireKind.JSON, str(payload.data))) is first
    # Writing a chunk keeps it, so the Worker that rolled the window over never decodes it.
    written = AgentMessageChunk((MESSAGE, replace(MESSAGE, sequence=MESSAGE.sequence + 1)))
    stored = fresh.encode(written)
    assert stored == SDK_CODECS.resolve(AgentMessageChunk).encode(
        written
    )  # byte-identical to the SDK's codec
    assert fresh.decode(stored) is written
    with pytest.raises(TypeError, match="requires AgentMessageChunk"):
        fresh.encode(MESSAGE)


def test_every_registry_in_the_process_shares_one_cache() -> None:
    payload = SDK_CODECS.resolve(AgentMessage).encode(replace(MESSAGE, text="shared across registries"))
    worker_side = agent_codec_registry().resolve(AgentMessage).decode(payload)
    client_side = agent_codec_registry().resolve(AgentMessage).decode(payload)
    assert client_side is worker_side
    index_codec = agent_codec_registry().resolve(AgentMessageIndex)
    assert isinstance(index_codec, CachedJsonCodec) and index_codec.cache is decoded_value_cache()


def test_only_deeply_immutable_types_share_decoded_values() -> None:
    for immutable in (AgentMessage, AgentMessageChunk, AgentMessageIndex, AgentMessageChunkRange, _Tags):
        assert is_immutable_type(immutable), immutable
    # A snapshot carries the session settings (a dict), a list can be appended to, a plain dataclass set.
    for mutable in (AgentSnapshot, list[AgentInterrupt], dict[str, int], _Mutable, tuple[list[int], ...]):
        assert not is_immutable_type(mutable), mutable
    codec = AGENT_CODECS.resolve(list[AgentInterrupt])
    assert not isinstance(codec, CachedJsonCodec)
    payload = codec.encode([INTERRUPT])
    first = codec.decode(payload)
    first.append(INTERRUPT)  # a caller changing its list must not change what the next load returns
    assert codec.decode(payload) == [INTERRUPT]
    with pytest.raises(ValueError, match="not deeply immutable"):
        _codec(_Mutable, DecodedValueCache())


def test_the_key_is_the_type_and_the_stored_text() -> None:
    cache = DecodedValueCache()
    payload = Value(WireKind.JSON, json.dumps({"left": 1, "right": 2}))
    pair = _codec(_Pair, cache).decode(payload)
    span = _codec(_Span, cache).decode(payload)
    assert (type(pair), type(span)) == (_Pair, _Span)
    assert len(cache) == 2


def test_only_stored_state_is_kept_when_written_and_never_a_value_that_holds_a_list() -> None:
    cache = DecodedValueCache()
    kept = _codec(_Tags, cache, keep_encoded=True)
    holds_a_list = _Tags(["a"])  # type: ignore[arg-type]  # a caller that ignored the annotation
    payload = kept.encode(holds_a_list)  # pyright: ignore[reportUnknownArgumentType]
    decoded = kept.decode(payload)
    assert decoded is not holds_a_list and decoded == _Tags(("a",))
    written = _Tags(("b",))
    assert kept.decode(kept.encode(written)) is written
    not_kept = _codec(_Tags, DecodedValueCache())
    assert not_kept.decode(not_kept.encode(written)) is not written
    # The Worker reads back the messages and chunks it writes; events are read by clients elsewhere, and
    # keeping them would only push chunks out.
    for type_hint, keeps in ((AgentMessage, True), (AgentMessageChunk, True), (AgentEvent, False)):
        codec = AGENT_CODECS.resolve(type_hint)
        assert isinstance(codec, CachedJsonCodec) and codec.keeps_encoded is keeps, type_hint


def test_the_decoded_value_cache_is_bounded_by_stored_bytes_least_recently_used_first_out() -> None:
    payloads = ["a" * 10, "b" * 20, "c" * 30]
    values = [object(), object(), object()]
    cache = DecodedValueCache(50)
    cache.put(_Pair, payloads[0], values[0])
    cache.put(_Pair, payloads[1], values[1])
    assert cache.get(_Pair, payloads[0]) is values[0]  # now the most recently used
    cache.put(_Pair, payloads[2], values[2])
    assert cache.size == 40 <= cache.max_bytes
    assert cache.get(_Pair, payloads[1]) is None  # the least recently used went first
    assert cache.get(_Pair, payloads[2]) is values[2]
    cache.put(_Pair, "x" * 51, values[0])  # larger than the bound: not kept
    assert cache.get(_Pair, "x" * 51) is None
    cache.put(_Span, "é" * 20, values[1])  # 40 bytes of UTF-8 in 20 characters
    assert cache.size == 40 and cache.get(_Pair, payloads[2]) is None
    with pytest.raises(ValueError, match="must not be negative"):
        DecodedValueCache(-1)


def test_the_process_bound_can_be_changed_and_zero_keeps_nothing(process_cache: DecodedValueCache) -> None:
    codec = AGENT_CODECS.resolve(AgentMessage)
    payload = SDK_CODECS.resolve(AgentMessage).encode(replace(MESSAGE, text="bounded"))
    assert codec.decode(payload) is codec.decode(payload)
    set_decoded_value_cache_bytes(0)
    assert (process_cache.max_bytes, process_cache.size, len(process_cache)) == (0, 0, 0)
    assert codec.decode(payload) is not codec.decode(payload)  # every load decodes again
    with pytest.raises(ValueError, match="must not be negative"):
        set_decoded_value_cache_bytes(-1)
    set_decoded_value_cache_bytes(DEFAULT_DECODED_VALUE_CACHE_BYTES)
    assert codec.decode(payload) is codec.decode(payload)
