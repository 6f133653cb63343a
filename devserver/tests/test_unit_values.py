import pytest
from dex.dexpb import dex_pb2 as pb

from dex_devserver._blobs import Blobs, ValueTooLargeError
from dex_devserver._store import Store
from dex_devserver._streams import Streams


def test_large_values_are_stored_once_and_resolved() -> None:
    store = Store(None)
    blobs = Blobs(store, threshold=16, max_value_bytes=1000)
    small = pb.Value(string_value="short")
    assert blobs.ingest(small, "attribute 'x'") is small
    large = pb.Value(string_value="y" * 100)
    reference = blobs.ingest(large, "attribute 'x'")
    assert reference.WhichOneof("kind") == "internal_blob_id_for_string_value"
    assert blobs.ingest(pb.Value(string_value="y" * 100), "again") == reference
    assert Blobs(store, 16, 1000).resolve(reference.internal_blob_id_for_string_value) == large
    obj = pb.Value(obj_value=pb.EncodedObject(encoding="json", payload=b"[" + b"1," * 50 + b"1]"))
    obj_reference = blobs.ingest(obj, "input")
    assert blobs.hydrate(obj_reference) == obj


def test_offloading_in_place_keeps_the_cached_content() -> None:
    blobs = Blobs(Store(None), threshold=16, max_value_bytes=1000)
    value = pb.Value(string_value="q" * 100)
    reference = blobs.ingest(value, "attribute 'x'")
    value.CopyFrom(reference)
    assert blobs.hydrate(reference) == pb.Value(string_value="q" * 100)


def test_a_value_over_the_limit_is_refused_by_name() -> None:
    blobs = Blobs(Store(None), threshold=16, max_value_bytes=64)
    with pytest.raises(
        ValueTooLargeError, match="attribute 'transcript' is 65 bytes, above the devserver limit of 64"
    ):
        blobs.ingest(pb.Value(string_value="z" * 65), "attribute 'transcript'")


def test_streams_trim_oldest_first_and_page_newest_first(tmp_path: object) -> None:
    store = Store(None)
    streams = Streams(store)
    key = ("T", "f", "s")
    for index in range(5):
        streams.append(key, 30, pb.Value(string_value=f"message-{index}"), "#S-1")
    retained = [m.value.string_value for m in streams.page(key, 10, "")[0]]
    assert retained == ["message-4", "message-3"]
    first = streams.next_after(key, "")
    assert first is not None and first.value.string_value == "message-3"
    assert streams.next_after(key, "1") == first  # a token from before a gap resumes at the oldest retained
    page, token = streams.page(key, 1, "")
    assert [m.value.string_value for m in page] == ["message-4"] and token == str(page[0].seq)
    restored = Streams(store)
    restored.restore()
    assert [m.value.string_value for m in restored.page(key, 10, "")[0]] == retained
