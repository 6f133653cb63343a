"""The size report: the largest message sent and value accepted per kind, kept across restarts."""

import json
from pathlib import Path

import pytest
from dex.dexpb import dex_pb2 as pb

from dex_devserver._blobs import Blobs, ValueTooLargeError
from dex_devserver._sizes import LOAD_BLOBS_RESPONSE, STORED_VALUE, SizeRecord
from dex_devserver._store import Store


def test_only_a_larger_size_changes_the_report_and_a_restart_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "sizes.json"
    record = SizeRecord(str(path))
    assert json.loads(path.read_text()) == {}
    record.saw(LOAD_BLOBS_RESPONSE, 100)
    record.saw(LOAD_BLOBS_RESPONSE, 40)
    record.saw(STORED_VALUE, 7)
    assert json.loads(path.read_text()) == {LOAD_BLOBS_RESPONSE: 100, STORED_VALUE: 7}
    restarted = SizeRecord(str(path))
    restarted.saw(LOAD_BLOBS_RESPONSE, 60)
    assert restarted.largest == {LOAD_BLOBS_RESPONSE: 100, STORED_VALUE: 7}
    path.write_text("not json")
    assert SizeRecord(str(path)).largest == {}


def test_blobs_note_each_accepted_value_but_not_a_refused_one() -> None:
    sizes = SizeRecord()
    blobs = Blobs(Store(None), threshold=1024, max_value_bytes=2048, sizes=sizes)
    blobs.check(pb.Value(string_value="x" * 1500), "attribute 'a'")
    with pytest.raises(ValueTooLargeError):
        blobs.check(pb.Value(string_value="x" * 4096), "attribute 'b'")
    assert sizes.largest == {STORED_VALUE: 1500}
