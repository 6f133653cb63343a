"""Commits run state: group commit for durable transitions, a deferred commit for ASYNC results.

A durable transition is committed before the caller is answered or the next Worker task is sent; every
durable transition made while the event loop runs one pass of ready callbacks shares one commit. An ASYNC
result is committed about 2 s later, with the run's next durable transition, or as soon as a client reads
what it changed (`settle`), so nothing is reported to a client before it is committed.

A commit that fails is rolled back; its writes stay staged and are tried again shortly, and whoever awaited
it gets `CommitFailedError`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sqlite3
from collections.abc import Callable

from dex.dexpb import dex_pb2 as pb

from ._history import new_event
from ._model import FlowRun
from ._rows import stage_changes
from ._store import Store

__all__ = ["CommitFailedError", "Journal"]

_LOG = logging.getLogger("dex_devserver")
# How long an ASYNC-durability result may stay uncommitted (a devserver killed before then runs it again).
_ASYNC_FLUSH_DELAY = 2.0
# How soon a failed commit is tried again.
_RETRY_DELAY = 0.5


class CommitFailedError(Exception):
    """The database refused a commit; the change stays pending and is tried again."""


class Journal:
    """Records history events and decides when a run's state is committed.

    Args:
        store: Persistence.

    Attributes:
        listeners: Called after each successful commit with the runs it saved.
        failures: How many commits failed so far.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self.listeners: list[Callable[[list[FlowRun]], None]] = []
        self.failures = 0
        self._dirty: dict[int, FlowRun] = {}
        # Runs whose changes are staged but not committed yet (a failed commit keeps them here).
        self._staged: dict[int, FlowRun] = {}
        self._commit_done: asyncio.Future[None] | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._stopping = False

    def record(self, run: FlowRun, fill: Callable[[pb.FlowHistoryEvent], None]) -> None:
        """Appends a history event to a run; it is committed with the run's next commit."""
        event = new_event(run.next_event_id)
        run.next_event_id += 1
        fill(event)
        run.changes.events.append((event.event_id, event))

    def persist(self, run: FlowRun, *, durable: bool) -> None:
        """Marks a run for the next group commit (durable) or for a commit after the ASYNC delay."""
        if durable:
            self.mark_dirty(run)
            self.request_commit()
        elif run.rt.flush_handle is None and not self._stopping:
            run.rt.flush_handle = asyncio.get_running_loop().call_later(
                _ASYNC_FLUSH_DELAY, functools.partial(self.persist, run, durable=True)
            )

    def mark_dirty(self, run: FlowRun) -> None:
        """Includes a run in the next commit, replacing its deferred ASYNC commit."""
        if run.rt.flush_handle is not None:
            run.rt.flush_handle.cancel()
            run.rt.flush_handle = None
        self._dirty[id(run)] = run

    def request_commit(self) -> None:
        """Schedules a group commit right after the ready callbacks of this loop pass."""
        if self._commit_done is None:
            loop = asyncio.get_running_loop()
            self._commit_done = loop.create_future()
            # Nobody may await a failed commit; reading the exception keeps asyncio from logging it.
            self._commit_done.add_done_callback(lambda done: done.cancelled() or done.exception())
            loop.call_soon(self.commit)

    def commit(self) -> None:
        """Stages every dirty run's changes and commits, then releases whoever awaits `durable`."""
        done, self._commit_done = self._commit_done, None
        dirty, self._dirty = self._dirty, {}
        try:
            for key, run in dirty.items():
                stage_changes(self.store, run, run.changes.take())
                self._staged[key] = run
            self.store.commit()
        except Exception as error:
            self.failures += 1
            if isinstance(error, sqlite3.Error):
                # A full disk or a locked file fails every retry the same way: one line each, no traceback.
                _LOG.error(
                    "commit failed (%s); it is rolled back and tried again in %.1f s", error, _RETRY_DELAY
                )
            else:
                _LOG.exception("commit failed; it is rolled back and tried again in %.1f s", _RETRY_DELAY)
            if done is not None and not done.done():
                done.set_exception(
                    CommitFailedError(f"the devserver could not commit to its database: {error}")
                )
            self._schedule_retry()
            return
        committed, self._staged = list(self._staged.values()), {}
        if done is not None and not done.done():
            done.set_result(None)
        for listener in self.listeners:
            listener(committed)

    def _schedule_retry(self) -> None:
        if self._retry is None and not self._stopping:

            def retry() -> None:
                self._retry = None
                self.request_commit()

            self._retry = asyncio.get_running_loop().call_later(_RETRY_DELAY, retry)

    async def durable(self) -> None:
        """Returns once every transition made so far is committed; await it before acknowledging one.

        Raises:
            CommitFailedError: When the commit failed (it is tried again later).
        """
        if self._commit_done is None and (self._dirty or self.store.has_staged):
            self.request_commit()
        if self._commit_done is not None:
            await asyncio.shield(self._commit_done)

    async def committed(self) -> None:
        """Like `durable`, but waits through failed commits until one succeeds (for the engine's own use)."""
        while True:
            try:
                await self.durable()
                return
            except CommitFailedError:
                await asyncio.sleep(_RETRY_DELAY)

    async def settle(self, run: FlowRun) -> None:
        """Commits a run's pending changes, ASYNC ones included; await it before reporting its state.

        Raises:
            CommitFailedError: When the commit failed.
        """
        if run.rt.flush_handle is not None or not run.changes.is_empty():
            self.mark_dirty(run)
        await self.durable()

    def stop(self) -> None:
        """Schedules no more deferred commits; the devserver is stopping and commits what is pending."""
        self._stopping = True
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
