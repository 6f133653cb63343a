from pathlib import Path

import pytest
from dex.dexpb import dex_pb2 as pb

from dex_devserver._model import Execution, FlowRun, Phase
from dex_devserver._snapshot import dump_run, load_run
from dex_devserver._store import RunRow, Store


@pytest.mark.parametrize("persistent", [True, False])
def test_attributes_are_stored_per_key_and_deleted_by_none(tmp_path: Path, persistent: bool) -> None:
    store = Store(str(tmp_path / "s.sqlite3") if persistent else None)
    row = RunRow("f", "r", 1, b"state")
    store.save_run(row, [(1, b"e1")], [("a", b"1"), ("b", b"2")])
    store.save_run(row, [(2, b"e2")], [("a", None), ("c", b"3")])
    store.commit()
    assert store.load_attributes("f", "r") == {"b": b"2", "c": b"3"}
    assert store.load_history("f", "r") == [(1, b"e1"), (2, b"e2")]
    assert store.load_history("f", "r", 2) == [(2, b"e2")]
    assert store.load_history("f", "r", 1, 1) == [(1, b"e1")]
    store.close()
    if persistent:
        reopened = Store(str(tmp_path / "s.sqlite3"))
        assert reopened.load_attributes("f", "r") == {"b": b"2", "c": b"3"}
        assert [r.state for r in reopened.load_runs()] == [b"state"]
        reopened.close()


def test_a_run_snapshot_round_trips_without_its_attributes() -> None:
    movement = pb.StepMovement(step_type="S", step_input=pb.Value(string_value="in"))
    run = FlowRun(
        flow_id="f",
        run_id="r",
        seq=1,
        flow_type="T",
        request_id="q",
        start_time=1.0,
        worker_target=pb.WorkerTarget(is_pull_mode=True),
        config=pb.FlowConfig(),
        attributes={"k": pb.Value(int_value=1)},
    )
    run.executions["S-1"] = Execution(
        "S-1", "S", movement, 1, Phase.WAITING, timer_status=[pb.INTERNAL_TIMER_STATUS_PENDING]
    )
    restored = load_run(dump_run(run))
    assert restored.attributes == {}
    assert run.attributes == {"k": pb.Value(int_value=1)}
    assert restored.executions["S-1"].movement == movement
    assert restored.executions["S-1"].phase is Phase.WAITING
    assert restored.worker_target.is_pull_mode
