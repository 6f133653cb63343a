"""What a live Flow run keeps in memory only: its tasks, locks, waiters, timers and uncommitted changes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

from ._model import FlowRun

__all__ = ["Runtime", "Runtimes"]


@dataclass
class Runtime:
    """The in-memory companion of one run; rebuilt empty after a restart, never persisted.

    Attributes:
        tasks: The asyncio task driving each active Step execution, by execution ID.
        wake: Set when a waiting execution's condition is met, by execution ID.
        locks: Attribute keys held by a running method or RPC.
        lock_waiters: Methods waiting for a lock to be released.
        watchers: Long-polls woken by the next transition.
        close_watchers: Long-polls woken only when the run closes.
        pending_events: History events not committed yet, as ``(event ID, serialized event)``.
        handles: Timer, Flow timeout and delayed-start callbacks, cancelled when the run closes.
        flush_handle: The deferred commit of an ASYNC result, if one is scheduled.
        changed_attributes: Attribute keys written since the last commit.
    """

    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict[str, "asyncio.Task[None]"])
    wake: dict[str, asyncio.Event] = field(default_factory=dict[str, asyncio.Event])
    locks: set[str] = field(default_factory=set[str])
    lock_waiters: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    watchers: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    close_watchers: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    pending_events: list[tuple[int, bytes]] = field(default_factory=list[tuple[int, bytes]])
    handles: list[asyncio.TimerHandle] = field(default_factory=list[asyncio.TimerHandle])
    flush_handle: asyncio.TimerHandle | None = None
    changed_attributes: set[str] = field(default_factory=set[str])

    async def lock(self, keys: list[str]) -> None:
        """Waits until none of `keys` is held, then holds them all (a Step method's locks)."""
        while any(key in self.locks for key in keys):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.lock_waiters.append(waiter)
            await waiter
        self.locks.update(keys)

    def unlock(self, keys: list[str]) -> None:
        """Releases `keys` and lets every waiter check its keys again."""
        if not keys:
            return
        self.locks.difference_update(keys)
        waiters, self.lock_waiters = self.lock_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


class Runtimes:
    """The runtime of every run that has one, created on first use."""

    def __init__(self) -> None:
        self._by_run: dict[tuple[str, str], Runtime] = {}

    def of(self, run: FlowRun) -> Runtime:
        """Returns a run's runtime, creating an empty one the first time."""
        key = (run.flow_id, run.run_id)
        rt = self._by_run.get(key)
        if rt is None:
            rt = Runtime()
            self._by_run[key] = rt
        return rt

    def items(self) -> Iterator[tuple[tuple[str, str], Runtime]]:
        """Yields ``((flow ID, run ID), runtime)`` for every run that has one."""
        yield from self._by_run.items()
