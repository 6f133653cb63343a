"""The store: a readable, versioned schema, one devserver per file, and commits that roll back cleanly."""

import sqlite3
from pathlib import Path

import pytest
from dex.dexpb import dex_pb2 as pb

from dex_devserver import main
from dex_devserver._model import Execution, FlowRun, Phase
from dex_devserver._rows import load_run, load_running_runs, stage_changes
from dex_devserver._store import SCHEMA_VERSION, Store, StoreError


def _run(flow_id: str = "f", status: pb.FlowStatus = pb.FLOW_STATUS_RUNNING) -> FlowRun:
    return FlowRun(
        flow_id=flow_id,
        run_id=f"{flow_id}-run",
        seq=1,
        flow_type="T",
        request_id="q",
        start_time=1.0,
        worker_target=pb.WorkerTarget(is_pull_mode=True),
        config=pb.FlowConfig(),
        status=status,
    )


def _commit(store: Store, run: FlowRun) -> None:
    stage_changes(store, run, run.changes.take())
    store.commit()


def test_a_commit_writes_only_the_rows_that_changed_and_a_run_loads_back(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.sqlite3"))
    run = _run()
    movement = pb.StepMovement(step_type="S", step_input=pb.Value(string_value="in"))
    exe = Execution("S-1", "S", movement, 1, Phase.WAIT_FOR)
    run.add_execution(exe)
    run.set_attribute("a", pb.Value(int_value=1))
    run.set_attribute("b", pb.Value(int_value=2))
    run.push_message(pb.ChannelMessage(channel_name="q", message_id="m1", value=pb.Value(int_value=1)))
    run.push_message(pb.ChannelMessage(channel_name="q", message_id="m2", value=pb.Value(int_value=2)))
    _commit(store, run)

    run.set_phase(exe, Phase.WAITING)
    exe.timer_fire_at = [100]
    exe.timer_status = [pb.INTERNAL_TIMER_STATUS_PENDING]
    run.set_attribute("a", None)
    assert [m.message_id for m in run.take_messages("q", 1)] == ["m1"]
    changes = run.changes.take()
    # Exactly what changed, nothing else: one execution, one Attribute, one consumed message.
    assert (changes.executions, changes.attributes, changes.messages_removed) == ({"S-1"}, {"a"}, {"m1"})
    assert not changes.messages_added
    stage_changes(store, run, changes)
    store.commit()
    store.close()

    reopened = Store(str(tmp_path / "s.sqlite3"))
    (loaded,) = load_running_runs(reopened)
    assert loaded.attributes == {"b": pb.Value(int_value=2)}
    assert [m.message_id for m in loaded.channels["q"]] == ["m2"]
    restored = loaded.executions["S-1"]
    assert (restored.phase, restored.timer_fire_at, restored.movement) == (Phase.WAITING, [100], movement)
    assert loaded.rt.waiting == {"S-1": restored}
    reopened.close()


def test_only_running_runs_are_loaded_at_start_and_closed_ones_are_read_on_demand(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.sqlite3"))
    running, closed = _run("open"), _run("done", pb.FLOW_STATUS_COMPLETED)
    closed.seq = 2
    closed.add_result(
        pb.StepCompletionOutput(completed_step_type="S", completed_step_output=pb.Value(int_value=7))
    )
    for run in (running, closed):
        _commit(store, run)
    assert [run.flow_id for run in load_running_runs(store)] == ["open"]
    loaded = load_run(store, "done")
    assert loaded is not None and loaded.status == pb.FLOW_STATUS_COMPLETED
    assert [r.completed_step_output.int_value for r in loaded.results] == [7]
    assert load_run(store, "missing") is None
    store.close()


def test_the_schema_is_plain_tables_with_a_version(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    store = Store(str(path))
    _commit(store, _run())
    store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT flow_id, status, step_counts FROM runs").fetchall() == [
            ("f", "FLOW_STATUS_RUNNING", "{}")
        ]
    db.close()


def test_a_database_of_another_schema_version_is_refused_by_name(tmp_path: Path) -> None:
    pickled = tmp_path / "old.sqlite3"
    with sqlite3.connect(pickled) as db:
        db.execute("CREATE TABLE runs (flow_id TEXT, run_id TEXT, seq INTEGER, state BLOB)")
    db.close()
    with pytest.raises(StoreError, match=r"schema version 1.*pickle.*delete the file or pass another --db"):
        Store(str(pickled))
    newer = tmp_path / "new.sqlite3"
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreError, match="schema version 99; this dex-devserver reads version 2 only"):
        Store(str(newer))


def test_one_devserver_per_database_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "s.sqlite3")
    first = Store(path)
    with pytest.raises(StoreError, match="in use by another dex-devserver"):
        Store(path)
    # The command line says so and exits instead of serving.
    assert main(["serve", "--port", "0", "--db", path]) == 1
    assert f"dex-devserver: {path} is in use by another dex-devserver" in capsys.readouterr().err
    first.close()
    Store(path).close()


def test_a_failed_commit_rolls_back_and_keeps_its_writes_for_the_next_one(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "s.sqlite3"))
    store.execute_script(
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON history WHEN NEW.flow_id = 'poison'"
        " BEGIN SELECT RAISE(ABORT, 'disk full'); END;"
    )
    run = _run("poison")
    run.set_attribute("a", pb.Value(int_value=1))
    run.changes.events.append((1, pb.FlowHistoryEvent(event_id=1)))
    stage_changes(store, run, run.changes.take())
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        store.commit()
    # Rolled back: the run row and the Attribute written before the failing insert are not there.
    assert store.query("SELECT COUNT(*) FROM runs")[0][0] == 0
    assert store.query("SELECT COUNT(*) FROM attributes")[0][0] == 0
    assert store.has_staged
    store.execute_script("DROP TRIGGER refuse;")
    store.commit()
    assert store.query("SELECT key FROM attributes") == [("a",)]
    assert store.query("SELECT event_id, event_type FROM history") == [(1, "Unspecified")]
    store.close()


def test_a_symlinked_path_finds_the_same_lock(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    first = Store(str(path))
    alias = tmp_path / "alias.sqlite3"
    alias.symlink_to(path)
    in_use = rf"alias.sqlite3 \(that is, {path}\) is in use by another dex-devserver"
    with pytest.raises(StoreError, match=in_use):
        Store(str(alias))
    first.close()
    Store(str(alias)).close()


def test_a_file_that_is_no_devserver_database_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corrupt = tmp_path / "corrupt.sqlite3"
    corrupt.write_bytes(b"this was never a database " * 200)
    with pytest.raises(StoreError, match=r"corrupt.sqlite3 is not a database .*file is not a database"):
        Store(str(corrupt))
    # The command line prints the one line and exits; the file is left as it was.
    assert main(["serve", "--port", "0", "--db", str(corrupt)]) == 1
    assert f"dex-devserver: {corrupt} is not a database" in capsys.readouterr().err
    assert corrupt.read_bytes().startswith(b"this was never a database")
    foreign = tmp_path / "notes.sqlite3"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    db.close()
    foreign_file = r"notes.sqlite3 is another program's SQLite database \(its tables: notes\)"
    with pytest.raises(StoreError, match=foreign_file):
        Store(str(foreign))
    with pytest.raises(StoreError, match=r"creating its lock file .*missing.*check that the folder exists"):
        Store(str(tmp_path / "missing" / "s.sqlite3"))
