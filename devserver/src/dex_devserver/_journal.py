"""Commits run state: group commit for durable transitions, a deferred commit for ASYNC results.

A durable transition is committed before the caller is answered or the next Worker task is sent; every
durable transition made while the event loop runs one pass of ready callbacks shares one SQLite commit.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

from dex.dexpb import dex_pb2 as pb

from ._history import new_event
from ._model import FlowRun
from ._runtime import Runtimes
from ._snapshot import dump_run
from ._store import RunRow, Store

__all__ = ["Journal"]

_LOG = logging.getLogger("dex_devserver")
# How long an ASYNC-durability result may stay uncommitted (a devserver killed before then runs it again).
_ASYNC_FLUSH_DELAY = 2.0


class Journal:
    """Records history events and decides when a run's state is committed.

    Args:
        store: Persistence.
        runtimes: Where each run's uncommitted events and Attribute changes are kept.
    """

    def __init__(self, store: Store, runtimes: Runtimes) -> None:
        self.store = store
        self._runtimes = runtimes
        self._dirty: dict[tuple[str, str], FlowRun] = {}
        self._commit_done: asyncio.Future[None] | None = None
        self._stopping = False

    def record(self, run: FlowRun, fill: Callable[[pb.FlowHistoryEvent], None]) -> None:
        """Appends a history event to a run; it is committed with the run's next commit."""
        event = new_event(run.next_event_id)
        run.next_event_id += 1
        fill(event)
        self._runtimes.of(run).pending_events.append((event.event_id, event.SerializeToString()))

    def persist(self, run: FlowRun, *, durable: bool) -> None:
        """Marks a run for the next group commit (durable) or for a commit after the ASYNC delay."""
        rt = self._runtimes.of(run)
        if durable:
            self.mark_dirty(run)
            self.request_commit()
        elif rt.flush_handle is None and not self._stopping:
            rt.flush_handle = asyncio.get_running_loop().call_later(
                _ASYNC_FLUSH_DELAY, functools.partial(self.persist, run, durable=True)
            )

    def mark_dirty(self, run: FlowRun) -> None:
        """Includes a run in the next commit, replacing its deferred ASYNC commit."""
        rt = self._runtimes.of(run)
        if rt.flush_handle is not None:
            rt.flush_handle.cancel()
            rt.flush_handle = None
        self._dirty[(run.flow_id, run.run_id)] = run

    def request_commit(self) -> None:
        """Schedules a group commit right after the ready callbacks of this loop pass."""
        if self._commit_done is None:
            loop = asyncio.get_running_loop()
            self._commit_done = loop.create_future()
            loop.call_soon(self.commit)

    def commit(self) -> None:
        """Saves every dirty run and commits the store, then releases whoever awaits `durable`."""
        done, self._commit_done = self._commit_done, None
        dirty, self._dirty = self._dirty, {}
        try:
            for run in dirty.values():
                self._save(run)
            self.store.commit()
        except Exception as error:
            _LOG.exception("commit failed")
            if done is not None and not done.done():
                done.set_exception(error)
            raise
        if done is not None and not done.done():
            done.set_result(None)

    async def durable(self) -> None:
        """Returns once every transition made so far is committed; await it before acknowledging one."""
        if self._commit_done is not None:
            await asyncio.shield(self._commit_done)

    def stop(self) -> None:
        """Schedules no more deferred commits; the devserver is stopping and commits what is pending."""
        self._stopping = True

    def _save(self, run: FlowRun) -> None:
        """Writes a run's snapshot, uncommitted events and changed Attributes (committed by the caller)."""
        rt = self._runtimes.of(run)
        rt.flush_handle = None
        events, rt.pending_events = rt.pending_events, []
        changed, rt.changed_attributes = rt.changed_attributes, set()
        attributes: list[tuple[str, bytes | None]] = []
        for key in changed:
            value = run.attributes.get(key)
            attributes.append((key, None if value is None else value.SerializeToString()))
        # Memory mode never restores a snapshot; it only needs the history and Attributes it serves.
        state = dump_run(run) if self.store.is_persistent else b""
        self.store.save_run(RunRow(run.flow_id, run.run_id, run.seq, state), events, attributes)
