"""Persistence: one SQLite database (a file in WAL mode, or in memory) whose writes are staged until commit.

Writes are staged as SQL statements and run in one transaction by `commit`, so a read never sees a write
that is not committed, and a commit that fails is rolled back with its statements kept for the next try.
The schema is plain tables a person can read with ``sqlite3`` (see `SCHEMA`); it carries its version in
``PRAGMA user_version``. One devserver at a time owns a database file: it holds an exclusive lock on
``<file>.lock`` while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["SCHEMA", "SCHEMA_VERSION", "Store", "StoreError"]

SCHEMA_VERSION = 2
# Version 1 (dex-devserver before this schema) kept each run as a pickled snapshot in `runs.state`.
_PICKLE_SCHEMA_VERSION = 1

# Comments name the protobuf message (from dex.dexpb.dex_pb2) of each BLOB column; SQLite keeps them, so
# ``.schema`` in the sqlite3 shell shows them too. Enums are stored by name, times as Unix seconds.
SCHEMA = """
CREATE TABLE runs (
    flow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL UNIQUE,                -- start order over all runs
    flow_type TEXT NOT NULL,
    request_id TEXT NOT NULL,
    status TEXT NOT NULL,                       -- dex.FlowStatus name
    start_time REAL NOT NULL,
    close_time REAL NOT NULL,                   -- 0 while running
    error_type TEXT NOT NULL,                   -- dex.FlowErrorType name
    error_message TEXT NOT NULL,
    graceful INTEGER NOT NULL,                  -- 1 once graceful completion was requested
    next_event_id INTEGER NOT NULL,
    next_exe_seq INTEGER NOT NULL,
    next_message_seq INTEGER NOT NULL,
    step_counts TEXT NOT NULL,                  -- JSON {step type: executions created}
    timeout_seconds INTEGER NOT NULL,
    timeout_policy TEXT NOT NULL,               -- dex.FlowTimeoutPolicy name
    timeout_at REAL NOT NULL,
    start_at REAL NOT NULL,                     -- when a delayed start runs its first Step
    worker_target BLOB NOT NULL,                -- dex.WorkerTarget
    config BLOB NOT NULL,                       -- dex.FlowConfig
    timeout_handler BLOB,                       -- dex.FlowTimeoutHandlerOptions
    delayed_start BLOB,                         -- dex.StepMovement
    PRIMARY KEY (flow_id, run_id));
CREATE INDEX runs_by_flow ON runs (flow_id, seq);
CREATE INDEX runs_running ON runs (seq) WHERE status = 'FLOW_STATUS_RUNNING';
CREATE INDEX runs_by_close_time ON runs (close_time) WHERE close_time > 0;
CREATE TABLE executions (
    flow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    exe_id TEXT NOT NULL,                       -- <Step type>-<n>
    seq INTEGER NOT NULL,                       -- creation order within the run
    step_type TEXT NOT NULL,
    phase TEXT NOT NULL,                        -- wait_for, waiting or execute
    attempt INTEGER NOT NULL,
    first_attempt_time INTEGER NOT NULL,
    method_started REAL NOT NULL,
    in_flight INTEGER NOT NULL,                 -- 1 while an attempt may be running on a Worker
    retry_at REAL NOT NULL,
    timers TEXT NOT NULL,                       -- JSON [[firing Unix second, dex.InternalTimerStatus name]]
    movement BLOB NOT NULL,                     -- dex.StepMovement
    heartbeat BLOB,                             -- dex.Value
    last_failure BLOB,                          -- dex.StepMethodFailure
    last_error BLOB,                            -- dex.RecoveryErrorInfo
    condition BLOB,                             -- dex.WaitingCondition
    locals BLOB,                                -- dex.StepMethodEventInput (step_execution_locals only)
    condition_results BLOB,                     -- dex.ConditionResults
    execute_recovery BLOB,                      -- dex.RecoveryErrorInfo
    PRIMARY KEY (flow_id, run_id, exe_id));
CREATE TABLE attributes (
    flow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,                        -- dex.Value
    PRIMARY KEY (flow_id, run_id, key));
CREATE TABLE channel_messages (
    flow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seq INTEGER NOT NULL,                       -- queue order within the run
    channel_name TEXT NOT NULL,
    value BLOB NOT NULL,                        -- dex.Value
    PRIMARY KEY (flow_id, run_id, message_id));
CREATE TABLE results (
    flow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    output BLOB NOT NULL,                       -- dex.StepCompletionOutput
    PRIMARY KEY (flow_id, run_id, position));
CREATE TABLE history (
    flow_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    event_id INTEGER NOT NULL,
    event_type TEXT NOT NULL,                   -- as `dex-devserver history` prints it
    event_time REAL NOT NULL,
    event BLOB NOT NULL,                        -- dex.FlowHistoryEvent
    PRIMARY KEY (flow_id, run_id, event_id));
CREATE TABLE blobs (
    flow_id TEXT NOT NULL,                      -- LoadBlobs serves a blob only to its own Flow
    blob_id TEXT NOT NULL,                      -- s-<sha256> (UTF-8 string) or o-<sha256> (dex.EncodedObject)
    run_id TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (flow_id, blob_id, run_id));
CREATE TABLE streams (
    flow_type TEXT NOT NULL,
    flow_id TEXT NOT NULL,
    stream_name TEXT NOT NULL,
    seq INTEGER NOT NULL,                       -- the message's resume token
    created REAL NOT NULL,
    source TEXT NOT NULL,
    size INTEGER NOT NULL,                      -- bytes of `value`, counted against the capacity
    value BLOB NOT NULL,                        -- dex.Value
    PRIMARY KEY (flow_type, flow_id, stream_name, seq));
"""


class StoreError(Exception):
    """The database cannot be used.

    Another devserver holds it, it is not a devserver database (corrupt, or another program's), or its schema
    version is unknown.
    """


Statement = tuple[str, list[Sequence[Any]]]


def _lock(path: str) -> int:
    """Takes the exclusive lock on ``<resolved path>.lock``; the kernel releases it when the process dies.

    The lock sits beside the file the path resolves to, so two devservers given the same database through
    different spellings (a symlink, ``..``, a relative path) find the same lock.
    """
    resolved = os.path.realpath(path)
    lock_path = f"{resolved}.lock"
    try:
        descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise StoreError(
            f"cannot use {path}: creating its lock file {lock_path} failed ({error.strerror}); check that the"
            " folder exists and this user may write there"
        ) from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(descriptor)
        shown = path if resolved == path else f"{path} (that is, {resolved})"
        raise StoreError(
            f"{shown} is in use by another dex-devserver (it holds {lock_path});"
            " one devserver per database file: stop the other one or pass another --db"
        ) from None
    return descriptor


def _open(path: str | None) -> sqlite3.Connection:
    """Opens the database in autocommit mode (`commit` opens and ends its own transaction).

    Raises:
        StoreError: When SQLite cannot open or read the file, naming the file and SQLite's reason.
    """
    db: sqlite3.Connection | None = None
    try:
        db = sqlite3.connect(path or ":memory:", isolation_level=None, check_same_thread=False)
        if path is not None:
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode never corrupts the database and survives a process kill; only a power
            # loss can drop the last transactions, which is the trade-off the benchmark reports.
            db.execute("PRAGMA synchronous=NORMAL")
        _check_version(db, path or ":memory:")
    except BaseException as error:
        if db is not None:
            db.close()
        # SQLite's own words ("file is not a database", "unable to open database file") name the symptom,
        # not the file; the operator needs both, and no traceback.
        if isinstance(error, sqlite3.OperationalError):
            raise StoreError(
                f"cannot open {path} (SQLite: {error}); check that it is a file this user may write"
            ) from None
        if isinstance(error, sqlite3.DatabaseError):
            raise StoreError(
                f"{path} is not a database this dex-devserver can open (SQLite: {error}): it is corrupt or"
                " another program's file; move it away or pass another --db"
            ) from None
        raise
    return db


def _check_version(db: sqlite3.Connection, path: str) -> None:
    """Creates the schema in an empty database, or refuses one whose schema this version cannot read."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version == SCHEMA_VERSION:
        return
    tables = {str(row[0]) for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version == 0 and not tables:
        db.executescript(f"BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        return
    if version == 0 and "runs" not in tables:
        raise StoreError(
            f"{path} is another program's SQLite database (its tables: {', '.join(sorted(tables))}),"
            " not a dex-devserver one; pass another --db"
        )
    if version == 0:
        version = _PICKLE_SCHEMA_VERSION
    raise StoreError(
        f"{path} has schema version {version}; this dex-devserver reads version {SCHEMA_VERSION} only"
        + (
            " (version 1 stored each run as a pickle and cannot be converted):"
            " delete the file or pass another --db"
            if version == _PICKLE_SCHEMA_VERSION
            else " (was it written by a newer dex-devserver?)"
        )
    )


class Store:
    """The devserver's database: staged writes, one-transaction commits, and reads of committed data.

    Args:
        path: The SQLite file, or None for a database in memory (nothing survives a restart).

    Raises:
        StoreError: When another devserver uses the file, it is not a devserver database, or its schema
            version is unknown.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._lock_descriptor: int | None = None
        self._staged: list[Statement] = []
        if path is not None:
            self._lock_descriptor = _lock(path)
        try:
            db = _open(path)
        except BaseException:
            self._unlock()
            raise
        self._db: sqlite3.Connection | None = db

    @property
    def is_persistent(self) -> bool:
        """Tells whether state survives a restart (a file) or not (memory)."""
        return self.path is not None

    @property
    def settings(self) -> str:
        """A one-line description of the storage settings, for logs and the benchmark."""
        if self.path is None:
            return f"SQLite {sqlite3.sqlite_version} in memory (no persistence)"
        return f"SQLite {sqlite3.sqlite_version} WAL synchronous=NORMAL at {self.path}"

    @property
    def has_staged(self) -> bool:
        """Tells whether writes wait for a commit."""
        return bool(self._staged)

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            raise StoreError("the store is closed")
        return self._db

    def stage(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Stages one statement for each row; it runs at the next `commit`."""
        batch = list(rows)
        if batch:
            self._staged.append((sql, batch))

    def commit(self) -> None:
        """Runs every staged statement in one transaction.

        Raises:
            sqlite3.Error: When the transaction fails; it is rolled back and its statements stay staged, in
                order, ahead of any staged later, so the next commit tries them again.
        """
        if not self._staged:
            return
        db = self._connection()
        staged, self._staged = self._staged, []
        try:
            db.execute("BEGIN")
            for sql, rows in staged:
                db.executemany(sql, rows)
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            self._staged = staged + self._staged
            raise

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Returns the rows of a read of committed data."""
        return self._connection().execute(sql, params).fetchall()

    def execute_script(self, sql: str) -> None:
        """Runs statements outside the staged writes (tests use it to inject database failures)."""
        self._connection().executescript(sql)

    def close(self) -> None:
        """Closes the database and releases the file (staged writes not committed are dropped)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._unlock()

    def _unlock(self) -> None:
        if self._lock_descriptor is not None:
            os.close(self._lock_descriptor)
            self._lock_descriptor = None
