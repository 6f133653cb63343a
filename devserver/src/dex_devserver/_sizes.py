"""The largest messages the devserver sent and values it accepted, kept for a size report.

An application that must stay within Dex's limits (a value of at most ``--max-value-bytes``, a message the
SDK can receive of at most 4 MiB) can run against the devserver with ``--size-report PATH`` and read how
close it came: the file holds, per kind, the largest size seen so far, across restarts on the same file. It
is rewritten only when a maximum grows, so keeping it costs nothing on the hot path.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import cast

__all__ = [
    "LOAD_BLOBS_RESPONSE",
    "QUERY_RESPONSE",
    "RPC_OUTPUT",
    "STORED_VALUE",
    "WORKER_REQUEST",
    "SizeRecord",
]

#: A Step method or RPC request sent to a Worker, blob references included (not their content).
WORKER_REQUEST = "worker_request"
#: The values one `LoadBlobs` call returned.
LOAD_BLOBS_RESPONSE = "load_blobs_response"
#: A response built from a Flow's state (history pages, Stream pages, attributes, Flow results).
QUERY_RESPONSE = "query_response"
#: The output value of an RPC.
RPC_OUTPUT = "rpc_output"
#: A value a client or a Worker sent to be stored (an Attribute, a Channel message, an input, an output).
STORED_VALUE = "stored_value"


def _kept_figures(path: Path) -> dict[str, int]:
    """The figures an earlier run on the same report file kept, or none."""
    try:
        kept: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(kept, dict):
        return {}
    return {
        str(kind): size for kind, size in cast(dict[object, object], kept).items() if isinstance(size, int)
    }


class SizeRecord:
    """The largest size seen per kind, written to a JSON file whenever one grows.

    Args:
        path: The report file, or None to keep the figures in memory only.
    """

    def __init__(self, path: str | None = None) -> None:
        self._path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self.largest: dict[str, int] = {}
        if self._path is not None:
            self.largest = _kept_figures(self._path)
            self._write()

    def saw(self, kind: str, size: int) -> None:
        """Notes one message or value of ``kind`` and ``size`` bytes."""
        if size <= self.largest.get(kind, 0):
            return
        with self._lock:
            if size <= self.largest.get(kind, 0):
                return
            self.largest[kind] = size
            if self._path is not None:
                self._write()

    def _write(self) -> None:
        assert self._path is not None
        temporary = self._path.with_suffix(self._path.suffix + ".tmp")
        temporary.write_text(json.dumps(self.largest, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self._path)
