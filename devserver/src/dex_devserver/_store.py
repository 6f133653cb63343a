"""Persistence: SQLite (WAL, ``synchronous=NORMAL``) or memory, behind one small interface.

Every Flow run is stored as one snapshot row rewritten per committed transition; history events, blobs and
Stream messages have their own append-only tables. Writes are buffered in the open SQLite transaction and
become durable at the next `commit`, so a caller decides which transitions must be durable before they are
acknowledged.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from dataclasses import dataclass

__all__ = ["RunRow", "Store", "StreamRow"]


@dataclass(frozen=True)
class RunRow:
    """A stored Flow run snapshot."""

    flow_id: str
    run_id: str
    seq: int
    state: bytes


@dataclass(frozen=True)
class StreamRow:
    """A stored Stream message."""

    flow_type: str
    flow_id: str
    stream_name: str
    seq: int
    created: float
    source: str
    value: bytes


_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    flow_id TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, state BLOB NOT NULL,
    PRIMARY KEY (flow_id, run_id));
CREATE TABLE IF NOT EXISTS history (
    flow_id TEXT NOT NULL, run_id TEXT NOT NULL, event_id INTEGER NOT NULL, event BLOB NOT NULL,
    PRIMARY KEY (flow_id, run_id, event_id));
CREATE TABLE IF NOT EXISTS attributes (
    flow_id TEXT NOT NULL, run_id TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (flow_id, run_id, key));
CREATE TABLE IF NOT EXISTS blobs (blob_id TEXT PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS streams (
    flow_type TEXT NOT NULL, flow_id TEXT NOT NULL, stream_name TEXT NOT NULL, seq INTEGER NOT NULL,
    created REAL NOT NULL, source TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (flow_type, flow_id, stream_name, seq));
"""


class Store:
    """Run snapshots, history, blobs and Stream messages, in SQLite or in memory.

    Args:
        path: The SQLite file, or None to keep everything in memory.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._mem_runs: dict[tuple[str, str], RunRow] = {}
        self._mem_history: dict[tuple[str, str], list[bytes]] = defaultdict(list)
        self._mem_attributes: dict[tuple[str, str], dict[str, bytes]] = defaultdict(dict)
        self._mem_blobs: dict[str, bytes] = {}
        self._mem_streams: list[StreamRow] = []
        if path is not None:
            db = sqlite3.connect(path, isolation_level="DEFERRED", check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode never corrupts the database and survives a process kill; only a power loss
            # can drop the last transactions, which is the trade-off the benchmark reports.
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            db.commit()
            self._db = db

    @property
    def is_persistent(self) -> bool:
        """Tells whether state survives a restart (SQLite) or not (memory)."""
        return self._db is not None

    @property
    def settings(self) -> str:
        """A one-line description of the storage settings, for logs and the benchmark."""
        if self._db is None:
            return "memory (no persistence)"
        return f"SQLite {sqlite3.sqlite_version} WAL synchronous=NORMAL at {self.path}"

    def save_run(
        self, row: RunRow, events: list[tuple[int, bytes]], attributes: list[tuple[str, bytes | None]]
    ) -> None:
        """Buffers a run snapshot, its new history events and its changed Attributes.

        Attributes are stored apart from the snapshot so that a transition writes only the keys it
        changed (None deletes a key), however many a long-lived Flow holds. Durable at the next `commit`.
        """
        if self._db is None:
            self._mem_runs[(row.flow_id, row.run_id)] = row
            self._mem_history[(row.flow_id, row.run_id)].extend(event for _, event in events)
            stored = self._mem_attributes[(row.flow_id, row.run_id)]
            for key, value in attributes:
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = value
            return
        upserts = [(row.flow_id, row.run_id, key, value) for key, value in attributes if value is not None]
        deletes = [(row.flow_id, row.run_id, key) for key, value in attributes if value is None]
        if upserts:
            self._db.executemany(
                "INSERT OR REPLACE INTO attributes (flow_id, run_id, key, value) VALUES (?, ?, ?, ?)", upserts
            )
        if deletes:
            self._db.executemany(
                "DELETE FROM attributes WHERE flow_id = ? AND run_id = ? AND key = ?", deletes
            )
        self._db.execute(
            "INSERT OR REPLACE INTO runs (flow_id, run_id, seq, state) VALUES (?, ?, ?, ?)",
            (row.flow_id, row.run_id, row.seq, row.state),
        )
        if events:
            self._db.executemany(
                "INSERT OR REPLACE INTO history (flow_id, run_id, event_id, event) VALUES (?, ?, ?, ?)",
                [(row.flow_id, row.run_id, event_id, event) for event_id, event in events],
            )

    def commit(self) -> None:
        """Makes every buffered write durable."""
        if self._db is not None and self._db.in_transaction:
            self._db.commit()

    def load_runs(self) -> list[RunRow]:
        """Returns every stored run, oldest first."""
        if self._db is None:
            return sorted(self._mem_runs.values(), key=lambda row: row.seq)
        rows = self._db.execute("SELECT flow_id, run_id, seq, state FROM runs ORDER BY seq").fetchall()
        return [RunRow(str(f), str(r), int(s), bytes(b)) for f, r, s, b in rows]

    def load_attributes(self, flow_id: str, run_id: str) -> dict[str, bytes]:
        """Returns a run's stored Attributes."""
        if self._db is None:
            return dict(self._mem_attributes.get((flow_id, run_id), {}))
        rows = self._db.execute(
            "SELECT key, value FROM attributes WHERE flow_id = ? AND run_id = ?", (flow_id, run_id)
        ).fetchall()
        return {str(key): bytes(value) for key, value in rows}

    def load_history(
        self, flow_id: str, run_id: str, first_id: int = 1, limit: int = -1
    ) -> list[tuple[int, bytes]]:
        """Returns up to `limit` (-1: all) saved history events of a run from `first_id` on, in order."""
        if self._db is None:
            events = self._mem_history.get((flow_id, run_id), [])
            # Memory history is a list in event order whose IDs start at 1.
            selected = list(enumerate(events, start=1))[max(first_id, 1) - 1 :]
            return selected if limit < 0 else selected[:limit]
        rows = self._db.execute(
            "SELECT event_id, event FROM history WHERE flow_id = ? AND run_id = ? AND event_id >= ?"
            " ORDER BY event_id LIMIT ?",
            (flow_id, run_id, first_id, limit),
        ).fetchall()
        return [(int(event_id), bytes(event)) for event_id, event in rows]

    def put_blob(self, blob_id: str, data: bytes) -> None:
        """Buffers a content-addressed blob; writing the same blob twice is a no-op."""
        if self._db is None:
            self._mem_blobs[blob_id] = data
            return
        self._db.execute("INSERT OR IGNORE INTO blobs (blob_id, data) VALUES (?, ?)", (blob_id, data))

    def get_blob(self, blob_id: str) -> bytes | None:
        """Returns a blob's bytes, or None when it is unknown."""
        if self._db is None:
            return self._mem_blobs.get(blob_id)
        row = self._db.execute("SELECT data FROM blobs WHERE blob_id = ?", (blob_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def append_stream(self, row: StreamRow) -> None:
        """Buffers a Stream message."""
        if self._db is None:
            self._mem_streams.append(row)
            return
        self._db.execute(
            "INSERT OR REPLACE INTO streams (flow_type, flow_id, stream_name, seq, created, source, value)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row.flow_type, row.flow_id, row.stream_name, row.seq, row.created, row.source, row.value),
        )

    def trim_stream(self, flow_type: str, flow_id: str, stream_name: str, below_seq: int) -> None:
        """Buffers the deletion of a Stream's messages older than `below_seq`."""
        if self._db is None:
            self._mem_streams = [
                row
                for row in self._mem_streams
                if (row.flow_type, row.flow_id, row.stream_name) != (flow_type, flow_id, stream_name)
                or row.seq >= below_seq
            ]
            return
        self._db.execute(
            "DELETE FROM streams WHERE flow_type = ? AND flow_id = ? AND stream_name = ? AND seq < ?",
            (flow_type, flow_id, stream_name, below_seq),
        )

    def load_streams(self) -> list[StreamRow]:
        """Returns every stored Stream message, in write order per Stream."""
        if self._db is None:
            return list(self._mem_streams)
        rows = self._db.execute(
            "SELECT flow_type, flow_id, stream_name, seq, created, source, value FROM streams"
            " ORDER BY flow_type, flow_id, stream_name, seq"
        ).fetchall()
        return [
            StreamRow(str(t), str(f), str(n), int(s), float(c), str(src), bytes(v))
            for t, f, n, s, c, src, v in rows
        ]

    def close(self) -> None:
        """Commits and closes the database."""
        if self._db is not None:
            self._db.commit()
            self._db.close()
            self._db = None
