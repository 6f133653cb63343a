"""Polling with deadlines instead of sleeping; session waits are `AgentSessionClient`'s own."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from dex_agents import AgentSessionClient, AgentSnapshot

__all__ = ["DEFAULT_WAIT_SECONDS", "wait_for_agent_snapshot", "wait_until"]

T = TypeVar("T")

DEFAULT_WAIT_SECONDS = 30.0
"""How long the wait helpers poll by default."""
_POLL_SECONDS = 0.05


async def wait_until(
    description: str,
    probe: Callable[[], T | None] | Callable[[], Awaitable[T | None]],
    timeout: float = DEFAULT_WAIT_SECONDS,  # noqa: ASYNC109 - a poll deadline, not an I/O timeout
) -> T:
    """Poll ``probe`` until it returns a truthy value, and return that value.

    Args:
        description: What is awaited, for the timeout message ("a pending approval").
        probe: A function or coroutine function; ``None``, ``False`` and other falsy results mean "not yet".
        timeout: Seconds before giving up.

    Returns:
        The first truthy result.

    Raises:
        TimeoutError: Naming ``description`` and the last result, when the deadline passes.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: object = None
    while True:
        result = probe()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result  # pyright: ignore[reportReturnType]
        last = result
        if loop.time() >= deadline:
            raise TimeoutError(
                f"timed out after {timeout} s waiting for {description}; last probe result: {last!r}"
            )
        await asyncio.sleep(_POLL_SECONDS)


async def wait_for_agent_snapshot(
    sessions: AgentSessionClient,
    session_id: str,
    probe: Callable[[AgentSnapshot], T | None],
    *,
    description: str = "the agent snapshot to match",
    timeout: float = DEFAULT_WAIT_SECONDS,  # noqa: ASYNC109 - a poll deadline, not an I/O timeout
) -> T:
    """Wait until ``probe(snapshot)`` is truthy and return it, with `AgentSessionClient.wait_for_snapshot`.

    Args:
        sessions: The session client.
        session_id: The session to watch.
        probe: Receives each snapshot; returns a truthy value once the snapshot matches.
        description: What is awaited, for the timeout message.
        timeout: Seconds before giving up.

    Returns:
        The first truthy ``probe`` result.

    Raises:
        SessionWaitTimeoutError: A `TimeoutError` naming ``description``, when the deadline passes.
    """

    def truthy(snapshot: AgentSnapshot) -> T | None:
        result = probe(snapshot)
        return result if result else None

    return await sessions.wait_for_snapshot(
        session_id, truthy, description=description, timeout=timedelta(seconds=timeout)
    )
