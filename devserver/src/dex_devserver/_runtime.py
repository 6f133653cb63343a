"""What a live Flow run keeps in memory only: its tasks, locks, waiters and timers."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._model import Execution

__all__ = ["Runtime", "wait_for_wake"]


async def wait_for_wake(waiters: list[asyncio.Future[None]], seconds: float) -> None:
    """Adds a waiter to `waiters` and waits for it at most `seconds`; a waiter that times out is removed."""
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await asyncio.wait({waiter}, timeout=seconds)
    finally:
        if not waiter.done():
            waiter.cancel()
            with contextlib.suppress(ValueError):
                waiters.remove(waiter)


@dataclass(eq=False)
class Runtime:
    """The in-memory companion of one run; rebuilt empty after a restart, never persisted.

    Attributes:
        tasks: The asyncio task driving each active Step execution, by execution ID.
        wake: Set when a waiting execution's condition is met, by execution ID.
        waiting: The executions waiting on a condition, by execution ID.
        locks: Attribute keys held by a running method or RPC.
        lock_waiters: Methods waiting for a lock to be released.
        watchers: Long-polls woken by the next transition.
        close_watchers: Long-polls woken only when the run closes.
        handles: Timer, Flow timeout and delayed-start callbacks, cancelled when the run closes.
        flush_handle: The deferred commit of an ASYNC result, if one is scheduled.
    """

    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict[str, "asyncio.Task[None]"])
    wake: dict[str, asyncio.Event] = field(default_factory=dict[str, asyncio.Event])
    waiting: dict[str, Execution] = field(default_factory=dict[str, "Execution"])
    locks: set[str] = field(default_factory=set[str])
    lock_waiters: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    watchers: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    close_watchers: list[asyncio.Future[None]] = field(default_factory=list["asyncio.Future[None]"])
    handles: list[asyncio.TimerHandle] = field(default_factory=list[asyncio.TimerHandle])
    flush_handle: asyncio.TimerHandle | None = None

    async def lock(self, keys: list[str]) -> None:
        """Waits until none of `keys` is held, then holds them all (a Step method's locks)."""
        while any(key in self.locks for key in keys):
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.lock_waiters.append(waiter)
            try:
                await waiter
            finally:
                with contextlib.suppress(ValueError):
                    self.lock_waiters.remove(waiter)
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

    async def wait_change(self, seconds: float, *, until_closed: bool = False) -> None:
        """Waits for the next transition of the run (or only for it to close), at most `seconds`.

        A waiter that times out is removed at once, so long-polls on a quiet run leave nothing behind.
        """
        await wait_for_wake(self.close_watchers if until_closed else self.watchers, seconds)

    def wake_watchers(self, *, closed: bool) -> None:
        """Wakes the long-polls waiting for a transition (and for the close, when the run closed)."""
        watchers, self.watchers = self.watchers, []
        if closed:
            watchers += self.close_watchers
            self.close_watchers = []
        for watcher in watchers:
            if not watcher.done():
                watcher.set_result(None)
