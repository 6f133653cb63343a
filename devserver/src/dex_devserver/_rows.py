"""Runs and their executions, Attributes, Channel messages, results and history as rows of the store.

`stage_changes` writes what changed in a run since its last commit: its row (a handful of columns), the
executions, Attributes and messages that changed, the new results and the new history events. Its cost
follows the change, not the size of the run.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Any, TypeVar, cast

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from ._history import event_type
from ._model import Execution, FlowRun, Phase, RunChanges
from ._store import Store

__all__ = [
    "load_history",
    "load_run",
    "load_running_runs",
    "max_run_seq",
    "stage_changes",
]

MessageT = TypeVar("MessageT", bound=Message)

_RUN_COLUMNS = (
    "flow_id, run_id, seq, flow_type, request_id, status, start_time, close_time, error_type,"
    " error_message, graceful, next_event_id, next_exe_seq, next_message_seq, step_counts,"
    " timeout_seconds, timeout_policy, timeout_at, start_at, worker_target, config, timeout_handler,"
    " delayed_start"
)
_EXECUTION_COLUMNS = (
    "flow_id, run_id, exe_id, seq, step_type, phase, attempt, first_attempt_time, method_started,"
    " in_flight, retry_at, timers, movement, heartbeat, last_failure, last_error, condition, locals,"
    " condition_results, execute_recovery"
)
_RUNNING = pb.FlowStatus.Name(pb.FLOW_STATUS_RUNNING)


def _placeholders(columns: str) -> str:
    return ", ".join("?" for _ in columns.split(","))


_UPSERT_RUN = f"INSERT OR REPLACE INTO runs ({_RUN_COLUMNS}) VALUES ({_placeholders(_RUN_COLUMNS)})"
_UPSERT_EXECUTION = (
    f"INSERT OR REPLACE INTO executions ({_EXECUTION_COLUMNS}) VALUES ({_placeholders(_EXECUTION_COLUMNS)})"
)


def _blob(message: Message | None) -> bytes | None:
    return None if message is None else message.SerializeToString()


def _parse(cls: type[MessageT], data: bytes | None) -> MessageT | None:
    return None if data is None else cls.FromString(data)


def _run_row(run: FlowRun) -> tuple[Any, ...]:
    return (
        run.flow_id,
        run.run_id,
        run.seq,
        run.flow_type,
        run.request_id,
        pb.FlowStatus.Name(run.status),
        run.start_time,
        run.close_time,
        pb.FlowErrorType.Name(run.error_type),
        run.error_message,
        int(run.graceful),
        run.next_event_id,
        run.next_exe_seq,
        run.next_message_seq,
        json.dumps(run.counters, sort_keys=True),
        run.timeout_seconds,
        pb.FlowTimeoutPolicy.Name(run.timeout_policy),
        run.timeout_at,
        run.start_at,
        run.worker_target.SerializeToString(),
        run.config.SerializeToString(),
        _blob(run.timeout_handler),
        _blob(run.delayed_start),
    )


def _run_from_row(row: Sequence[Any]) -> FlowRun:
    return FlowRun(
        flow_id=str(row[0]),
        run_id=str(row[1]),
        seq=int(row[2]),
        flow_type=str(row[3]),
        request_id=str(row[4]),
        status=cast(pb.FlowStatus, pb.FlowStatus.Value(str(row[5]))),
        start_time=float(row[6]),
        close_time=float(row[7]),
        error_type=cast(pb.FlowErrorType, pb.FlowErrorType.Value(str(row[8]))),
        error_message=str(row[9]),
        graceful=bool(row[10]),
        next_event_id=int(row[11]),
        next_exe_seq=int(row[12]),
        next_message_seq=int(row[13]),
        counters={str(k): int(v) for k, v in json.loads(str(row[14])).items()},
        timeout_seconds=int(row[15]),
        timeout_policy=cast(pb.FlowTimeoutPolicy, pb.FlowTimeoutPolicy.Value(str(row[16]))),
        timeout_at=float(row[17]),
        start_at=float(row[18]),
        worker_target=pb.WorkerTarget.FromString(bytes(row[19])),
        config=pb.FlowConfig.FromString(bytes(row[20])),
        timeout_handler=_parse(pb.FlowTimeoutHandlerOptions, row[21]),
        delayed_start=_parse(pb.StepMovement, row[22]),
    )


def _execution_row(run: FlowRun, exe: Execution) -> tuple[Any, ...]:
    timers = [
        [fire_at, pb.InternalTimerStatus.Name(status)]
        for fire_at, status in zip(exe.timer_fire_at, exe.timer_status, strict=True)
    ]
    return (
        run.flow_id,
        run.run_id,
        exe.exe_id,
        exe.seq,
        exe.step_type,
        exe.phase.value,
        exe.attempt,
        exe.first_attempt_time,
        exe.method_started,
        int(exe.in_flight),
        exe.retry_at,
        json.dumps(timers),
        exe.movement.SerializeToString(),
        _blob(exe.heartbeat),
        _blob(exe.last_failure),
        _blob(exe.last_error),
        _blob(exe.condition),
        pb.StepMethodEventInput(step_execution_locals=exe.locals).SerializeToString() if exe.locals else None,
        _blob(exe.condition_results),
        _blob(exe.execute_recovery),
    )


def _execution_from_row(row: Sequence[Any]) -> Execution:
    timers: list[list[Any]] = json.loads(str(row[11]))
    locals_ = _parse(pb.StepMethodEventInput, row[17])
    return Execution(
        exe_id=str(row[2]),
        step_type=str(row[4]),
        movement=pb.StepMovement.FromString(bytes(row[12])),
        seq=int(row[3]),
        phase=Phase(str(row[5])),
        attempt=int(row[6]),
        first_attempt_time=int(row[7]),
        method_started=float(row[8]),
        in_flight=bool(row[9]),
        retry_at=float(row[10]),
        timer_fire_at=[int(timer[0]) for timer in timers],
        timer_status=[
            cast(pb.InternalTimerStatus, pb.InternalTimerStatus.Value(str(timer[1]))) for timer in timers
        ],
        heartbeat=_parse(pb.Value, row[13]),
        last_failure=_parse(pb.StepMethodFailure, row[14]),
        last_error=_parse(pb.RecoveryErrorInfo, row[15]),
        condition=_parse(pb.WaitingCondition, row[16]),
        locals=[] if locals_ is None else list(locals_.step_execution_locals),
        condition_results=_parse(pb.ConditionResults, row[18]),
        execute_recovery=_parse(pb.RecoveryErrorInfo, row[19]),
    )


def stage_changes(store: Store, run: FlowRun, changes: RunChanges) -> None:
    """Stages a run's row and the rows its `changes` touched."""
    key = (run.flow_id, run.run_id)
    store.stage(_UPSERT_RUN, [_run_row(run)])
    upserts: list[tuple[Any, ...]] = []
    deletes: list[tuple[Any, ...]] = []
    for exe_id in changes.executions:
        exe = run.executions.get(exe_id)
        if exe is None:
            deletes.append((*key, exe_id))
        else:
            upserts.append(_execution_row(run, exe))
    store.stage(_UPSERT_EXECUTION, upserts)
    store.stage("DELETE FROM executions WHERE flow_id = ? AND run_id = ? AND exe_id = ?", deletes)
    attribute_upserts: list[tuple[Any, ...]] = []
    attribute_deletes: list[tuple[Any, ...]] = []
    for name in changes.attributes:
        value = run.attributes.get(name)
        if value is None:
            attribute_deletes.append((*key, name))
        else:
            attribute_upserts.append((*key, name, value.SerializeToString()))
    store.stage(
        "INSERT OR REPLACE INTO attributes (flow_id, run_id, key, value) VALUES (?, ?, ?, ?)",
        attribute_upserts,
    )
    store.stage("DELETE FROM attributes WHERE flow_id = ? AND run_id = ? AND key = ?", attribute_deletes)
    store.stage(
        "INSERT INTO channel_messages (flow_id, run_id, message_id, seq, channel_name, value)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [
            (*key, message_id, seq, message.channel_name, message.value.SerializeToString())
            for message_id, (seq, message) in changes.messages_added.items()
        ],
    )
    store.stage(
        "DELETE FROM channel_messages WHERE flow_id = ? AND run_id = ? AND message_id = ?",
        [(*key, message_id) for message_id in changes.messages_removed],
    )
    store.stage(
        "INSERT INTO results (flow_id, run_id, position, output) VALUES (?, ?, ?, ?)",
        [(*key, position, output.SerializeToString()) for position, output in changes.results],
    )
    store.stage(
        "INSERT INTO history (flow_id, run_id, event_id, event_type, event_time, event)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [
            (
                *key,
                event_id,
                event_type(event),
                event.event_time.ToNanoseconds() / 1e9,
                event.SerializeToString(),
            )
            for event_id, event in changes.events
        ],
    )


def max_run_seq(store: Store) -> int:
    """Returns the highest run sequence number stored (0 for an empty store)."""
    return int(store.query("SELECT COALESCE(MAX(seq), 0) FROM runs")[0][0])


def load_running_runs(store: Store) -> list[FlowRun]:
    """Loads every running run with its executions, in start order; closed runs stay in the store."""
    rows = store.query(f"SELECT {_RUN_COLUMNS} FROM runs WHERE status = ? ORDER BY seq", (_RUNNING,))
    return [_complete(store, _run_from_row(row)) for row in rows]


def load_run(store: Store, flow_id: str, run_id: str = "") -> FlowRun | None:
    """Loads a run (the latest of the Flow when `run_id` is empty), or None."""
    if run_id:
        rows = store.query(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE flow_id = ? AND run_id = ?", (flow_id, run_id)
        )
    else:
        rows = store.query(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE flow_id = ? ORDER BY seq DESC LIMIT 1", (flow_id,)
        )
    return _complete(store, _run_from_row(rows[0])) if rows else None


def _complete(store: Store, run: FlowRun) -> FlowRun:
    """Loads a run's executions, Attributes, queued messages and results (recording no changes)."""
    key = (run.flow_id, run.run_id)
    where = "WHERE flow_id = ? AND run_id = ?"
    for row in store.query(f"SELECT {_EXECUTION_COLUMNS} FROM executions {where} ORDER BY seq", key):
        exe = _execution_from_row(row)
        run.executions[exe.exe_id] = exe
        exe.changes = run.changes
        if exe.phase == Phase.WAITING:
            run.rt.waiting[exe.exe_id] = exe
    for name, value in store.query(f"SELECT key, value FROM attributes {where}", key):
        run.attributes[str(name)] = pb.Value.FromString(bytes(value))
    for name, message_id, value in store.query(
        f"SELECT channel_name, message_id, value FROM channel_messages {where} ORDER BY seq", key
    ):
        message = pb.ChannelMessage(
            channel_name=str(name), message_id=str(message_id), value=pb.Value.FromString(bytes(value))
        )
        run.channels.setdefault(message.channel_name, deque()).append(message)
    for (output,) in store.query(f"SELECT output FROM results {where} ORDER BY position", key):
        run.results.append(pb.StepCompletionOutput.FromString(bytes(output)))
    return run


def load_history(store: Store, flow_id: str, run_id: str, first_id: int, limit: int) -> list[bytes]:
    """Returns up to `limit` committed history events of a run from event `first_id` on, in order."""
    rows = store.query(
        "SELECT event FROM history WHERE flow_id = ? AND run_id = ? AND event_id >= ?"
        " ORDER BY event_id LIMIT ?",
        (flow_id, run_id, first_id, limit),
    )
    return [bytes(row[0]) for row in rows]
