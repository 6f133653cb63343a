"""Retention of closed runs (``--retain-closed``): a run's rows are deleted once it has been closed that long.

A Flow's Streams go with its last run. Running Flows are never expired.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["expire_closed", "keep_expiring"]

_LOG = logging.getLogger("dex_devserver")
# Runs deleted per commit, so one sweep never holds the event loop long.
_BATCH = 500
_RUN_TABLES = ("history", "attributes", "channel_messages", "results", "executions", "blobs", "runs")


def expire_closed(engine: Engine, cutoff: float) -> int:
    """Stages the deletion of up to one batch of runs closed before `cutoff` (Unix seconds).

    Returns:
        How many runs it stages for deletion.
    """
    store = engine.store
    expired = store.query(
        "SELECT flow_id, run_id, flow_type FROM runs WHERE close_time > 0 AND close_time < ?"
        " ORDER BY close_time LIMIT ?",
        (cutoff, _BATCH),
    )
    keys = [(str(flow_id), str(run_id)) for flow_id, run_id, _ in expired]
    for table in _RUN_TABLES:
        store.stage(f"DELETE FROM {table} WHERE flow_id = ? AND run_id = ?", keys)
    flows = {(str(flow_id), str(flow_type)) for flow_id, _, flow_type in expired}
    for flow_id, flow_type in flows:
        if flow_id in engine.live:
            continue
        (kept,) = store.query(
            "SELECT COUNT(*) FROM runs WHERE flow_id = ? AND NOT (close_time > 0 AND close_time < ?)",
            (flow_id, cutoff),
        )[0]
        if kept == 0:
            store.stage("DELETE FROM streams WHERE flow_type = ? AND flow_id = ?", [(flow_type, flow_id)])
    return len(keys)


async def keep_expiring(engine: Engine, retain_seconds: float) -> None:
    """Expires closed runs older than `retain_seconds`, now and then periodically, until cancelled."""
    interval = min(max(retain_seconds / 4, 0.1), 60.0)
    while True:
        while True:
            count = expire_closed(engine, time.time() - retain_seconds)
            await engine.journal.committed()
            if count:
                _LOG.info("expired %d closed runs", count)
            if count < _BATCH:
                break
        await asyncio.sleep(interval)
