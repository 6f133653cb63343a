import pytest
from dex.dexpb import dex_pb2 as pb

from dex_devserver._blobs import Blobs, ValueRefusedError
from dex_devserver._fit import RESPONSE_LIMIT, ResponseTooLargeError, fit
from dex_devserver._store import Store
from dex_devserver._streams import Streams

OWNER = ("flow", "run")


def test_large_values_are_stored_once_and_resolved_for_their_flow_only() -> None:
    store = Store(None)
    blobs = Blobs(store, threshold=16, max_value_bytes=1000)
    small = pb.Value(string_value="short")
    assert blobs.ingest(small, "attribute 'x'", OWNER) is small
    large = pb.Value(string_value="y" * 100)
    reference = blobs.ingest(large, "attribute 'x'", OWNER)
    assert reference.WhichOneof("kind") == "internal_blob_id_for_string_value"
    assert blobs.ingest(pb.Value(string_value="y" * 100), "again", OWNER) == reference
    store.commit()
    fresh = Blobs(store, 16, 1000)
    blob_id = reference.internal_blob_id_for_string_value
    assert fresh.resolve("flow", blob_id) == large
    # Another Flow cannot read it, even knowing its ID.
    assert fresh.resolve("other-flow", blob_id) is None
    obj = pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=b"[" + b"1," * 50 + b"1]"))
    assert blobs.hydrate("flow", blobs.ingest(obj, "input", OWNER)) == obj


def test_offloading_in_place_keeps_the_cached_content() -> None:
    blobs = Blobs(Store(None), threshold=16, max_value_bytes=1000)
    value = pb.Value(string_value="q" * 100)
    reference = blobs.ingest(value, "attribute 'x'", OWNER)
    value.CopyFrom(reference)
    assert blobs.hydrate("flow", reference) == pb.Value(string_value="q" * 100)


def test_the_blob_cache_is_bounded_in_bytes_and_falls_back_to_the_store() -> None:
    store = Store(None)
    blobs = Blobs(store, threshold=16, max_value_bytes=100_000, cache_bytes=50_000)
    references = [blobs.ingest(pb.Value(string_value=f"{i}" * 10_000), "v", OWNER) for i in range(10)]
    store.commit()
    assert blobs.cached_bytes <= 50_000
    assert [blobs.hydrate("flow", ref).string_value for ref in references] == [
        f"{i}" * 10_000 for i in range(10)
    ]
    assert blobs.cached_bytes <= 50_000


def test_a_value_over_the_limit_or_a_blob_reference_is_refused_by_name() -> None:
    blobs = Blobs(Store(None), threshold=16, max_value_bytes=64)
    with pytest.raises(
        ValueRefusedError, match="attribute 'transcript' is 65 bytes, above the devserver limit of 64"
    ):
        blobs.ingest(pb.Value(string_value="z" * 65), "attribute 'transcript'", OWNER)
    forged = pb.Value(internal_blob_id_for_string_value="s-" + "0" * 64)
    with pytest.raises(ValueRefusedError, match="value of the start input is a blob reference"):
        blobs.ingest(forged, "the start input", OWNER)


def test_fit_offloads_the_largest_inline_values_until_a_message_fits() -> None:
    blobs = Blobs(Store(None), threshold=1024, max_value_bytes=2 * 1024 * 1024)
    request = pb.InvokeExecuteMethodRequest(
        attributes=[pb.KV(key=f"k{i}", value=pb.Value(string_value="x" * 1000)) for i in range(5000)]
    )
    assert request.ByteSize() > RESPONSE_LIMIT
    fit(request, lambda value: blobs.offload(value, OWNER), "the request")
    assert request.ByteSize() < RESPONSE_LIMIT
    offloaded = [kv for kv in request.attributes if kv.value.WhichOneof("kind") != "string_value"]
    assert offloaded and all(blobs.hydrate("flow", kv.value).string_value == "x" * 1000 for kv in offloaded)
    ints = pb.GetAttributesResponse(
        attributes=[pb.KV(key=f"key-{i:08d}", value=pb.Value(int_value=i)) for i in range(300_000)]
    )
    with pytest.raises(ResponseTooLargeError, match="above the 4194304 bytes the SDK can receive"):
        fit(ints, lambda value: blobs.offload(value, OWNER), "the Attributes")


def test_streams_trim_oldest_first_and_page_newest_first() -> None:
    store = Store(None)
    streams = Streams(store)
    key = ("T", "f", "s")
    for index in range(5):
        streams.append(key, 30, pb.Value(string_value=f"message-{index}"), "#S-1")
    # Nothing is readable before it is committed.
    assert streams.next_after(key, 0) is None
    store.commit()
    retained = [m.value.string_value for m in streams.page(key, 10, None)[0]]
    assert retained == ["message-4", "message-3"]
    first = streams.next_after(key, 0)
    assert first is not None and first.value.string_value == "message-3"
    assert streams.next_after(key, 1) == first  # a token from before a gap resumes at the oldest retained
    page, token = streams.page(key, 1, None)
    assert [m.value.string_value for m in page] == ["message-4"] and token == str(page[0].seq)
    restarted = Streams(store)
    assert [m.value.string_value for m in restarted.page(key, 10, None)[0]] == retained
    restarted.append(key, 30, pb.Value(string_value="message-5"), "#S-1")
    store.commit()
    assert [m.seq for m in restarted.page(key, 10, None)[0]] == [6, 5]


def test_a_stream_page_stops_before_the_sdk_receive_limit() -> None:
    store = Store(None)
    streams = Streams(store)
    key = ("T", "f", "s")
    for index in range(5):
        streams.append(key, 0, pb.Value(string_value=str(index) * (2 * 1024 * 1024 - 100)), "client")
    store.commit()
    pages: list[list[int]] = []
    before: int | None = None
    while True:
        page, token = streams.page(key, 1000, before)
        response = pb.ListStreamMessagesResponse(messages=[m.to_proto() for m in page], next_page_token=token)
        assert response.ByteSize() < RESPONSE_LIMIT
        pages.append([m.seq for m in page])
        if not token:
            break
        before = int(token)
    assert pages == [[5], [4], [3], [2], [1]]
