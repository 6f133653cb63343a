"""The tool call the session is running, for tool code that needs it, and what that code asked for.

Tool code runs inside a framework, which may catch an exception the tool raises and turn it into an error
result for the model. So a tool's request to stop (a question, a started task) does not rely on the
exception reaching the session: `ask_user_input` and `start_tool_task` also record the request here, and
the session reads it after the runner returns, whatever the framework made of the exception.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dex_agents._tools._outcomes import ToolInputRequested, ToolTaskStarted
    from dex_agents.runner import DeferredToolExecution

__all__ = [
    "ToolCallRequests",
    "current_tool_call_requests",
    "current_tool_execution",
    "running_tool_execution",
]


@dataclass
class ToolCallRequests:
    """What the tool code of one run asked the session for.

    Attributes:
        outcome: The first question or started task the tool recorded; the session treats the run as
            having returned it.
        questions_asked: How many questions the tool asked in this run, answered ones included.
    """

    outcome: ToolInputRequested | ToolTaskStarted | None = None
    questions_asked: int = 0


_CURRENT: ContextVar[tuple[DeferredToolExecution, ToolCallRequests] | None] = ContextVar(
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
    current = _CURRENT.get()
    return None if current is None else current[0]


def current_tool_call_requests() -> tuple[DeferredToolExecution, ToolCallRequests] | None:
    """Return the current call and the requests its tool code recorded, or `None` outside a call."""
    return _CURRENT.get()


@contextmanager
def running_tool_execution(execution: DeferredToolExecution) -> Iterator[ToolCallRequests]:
    """Make ``execution`` the current tool call for the duration of the block.

    Yields:
        The requests the tool code records while the block runs; read them after the runner returned.
    """
    requests = ToolCallRequests()
    token = _CURRENT.set((execution, requests))
    try:
        yield requests
    finally:
        _CURRENT.reset(token)
