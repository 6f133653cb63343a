"""The tool call the session is running, for tool code that needs it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dex_agents.runner import DeferredToolExecution

__all__ = ["current_tool_execution", "running_tool_execution"]

_CURRENT: ContextVar[DeferredToolExecution | None] = ContextVar(
    "dex_agents_current_tool_execution", default=None
)


def current_tool_execution() -> DeferredToolExecution | None:
    """Return the tool call the session is running, for tool code that needs its idempotency key.

    The session sets it around `execute_deferred_tool_call`, so tool code that the runner calls, directly
    or through its framework, reads the current call without the runner passing it along. It follows the
    asyncio context: tasks created inside the call and `asyncio.to_thread` see it; a thread started by hand
    does not.

    Returns:
        The current call, or `None` outside `execute_deferred_tool_call`.
    """
    return _CURRENT.get()


@contextmanager
def running_tool_execution(execution: DeferredToolExecution) -> Iterator[None]:
    """Make ``execution`` the current tool call for the duration of the block."""
    token = _CURRENT.set(execution)
    try:
        yield
    finally:
        _CURRENT.reset(token)
