"""`ToolTaskRouter`: a task's poll and cancel go to the source that owns its call, else to the handlers."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from dex_agents import (
    AgentEventWriter,
    AgentToolCall,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolTaskCancellation,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskRouter,
    ToolTaskSource,
)

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

    # Checked by pyright: `McpToolSource` fits the protocol.
    _MCP_SOURCE_FITS: type[ToolTaskSource] = McpToolSource

_RECORD = AgentToolCall(
    tool_call_id="c",
    turn_id="turn-1",
    tool_name="render",
    arguments="{}",
    effect=ToolEffect.READ,
    requires_approval=False,
    status=ToolCallStatus.WAITING_FOR_TASK,
    task_id="job-9",
)


async def _heartbeat() -> None:
    return None


def _poll(record: AgentToolCall) -> ToolTaskPoll:
    writer = AgentEventWriter(lambda event: None, "turn-1", 1)
    return ToolTaskPoll("s", record, "s/turn-1/c", 1, (), writer, _heartbeat)


def _cancellation(record: AgentToolCall) -> ToolTaskCancellation:
    return ToolTaskCancellation("s", record, "s/turn-1/c", 1, _heartbeat)


class _Source:
    """Owns the calls of one tool and records what reaches it."""

    def __init__(self, tool_name: str) -> None:
        self.tool_name = tool_name
        self.polled: list[str] = []
        self.cancelled: list[str] = []

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        return record.tool_name == self.tool_name

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        self.polled.append(poll.tool_call.task_id or "")
        return ToolExecutionResult(f"{self.tool_name} done")

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        self.cancelled.append(cancellation.tool_call.task_id or "")


def _handlers(cancelled: list[str]) -> ToolTaskHandlers:
    async def poll(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolTaskPending(3, continuation=poll.tool_call.task_id)

    async def cancel(cancellation: ToolTaskCancellation) -> None:
        cancelled.append(cancellation.tool_call.task_id or "")

    return ToolTaskHandlers({"render": ToolTaskHandler(poll=poll, cancel=cancel)})


async def test_the_source_that_owns_the_call_polls_and_cancels_it() -> None:
    cancelled: list[str] = []
    search, render = _Source("search"), _Source("render")
    router = ToolTaskRouter("MyRunner", "tool_tasks", _handlers(cancelled), sources=[search, render])
    assert router.can_poll
    assert await router.poll_tool_task(_poll(_RECORD)) == ToolExecutionResult("render done")
    await router.cancel_tool_task(_cancellation(_RECORD))
    assert (render.polled, render.cancelled) == (["job-9"], ["job-9"])
    assert (search.polled, search.cancelled, cancelled) == ([], [], []), "only the owner hears of the task"


async def test_a_call_no_source_owns_goes_to_the_handlers() -> None:
    cancelled: list[str] = []
    source = _Source("search")
    router = ToolTaskRouter("MyRunner", "tool_tasks", _handlers(cancelled), sources=[source])
    assert await router.poll_tool_task(_poll(_RECORD)) == ToolTaskPending(3, "job-9")
    await router.cancel_tool_task(_cancellation(_RECORD))
    assert cancelled == ["job-9"]
    assert (source.polled, source.cancelled) == ([], [])
    with pytest.raises(LookupError, match="has no task handler"):
        await router.poll_tool_task(_poll(replace(_RECORD, tool_name="other")))


async def test_without_handlers_a_poll_names_the_tool_the_task_and_the_runner_argument() -> None:
    router = ToolTaskRouter("MyRunner", "task_handlers", None, sources=[_Source("search")])
    assert router.can_poll
    with pytest.raises(LookupError) as raised:
        await router.poll_tool_task(_poll(_RECORD))
    message = str(raised.value)
    assert "tool 'render' started task 'job-9'" in message
    assert "MyRunner was given no task_handlers" in message
    expected = "pass MyRunner(..., task_handlers=ToolTaskHandlers({'render': ToolTaskHandler(poll=...)}))"
    assert expected in message


async def test_with_neither_it_cannot_poll_and_a_cancel_does_nothing() -> None:
    router = ToolTaskRouter("MyRunner", "tool_tasks", None)
    assert not router.can_poll
    await router.cancel_tool_task(_cancellation(_RECORD))
    with pytest.raises(LookupError, match="pass MyRunner"):
        await router.poll_tool_task(_poll(_RECORD))
    assert ToolTaskRouter("MyRunner", "tool_tasks", ToolTaskHandlers({})).can_poll


class _ListingOnlySource:
    """Owns the calls of one tool but neither polls nor cancels tasks, like a plain function source."""

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        return record.tool_name == "render"


async def test_an_owner_that_polls_no_tasks_fails_the_poll_and_keeps_the_handlers_out() -> None:
    cancelled: list[str] = []
    router = ToolTaskRouter("MyRunner", "tool_tasks", _handlers(cancelled), sources=[_ListingOnlySource()])
    with pytest.raises(LookupError, match="started task 'job-9', but _ListingOnlySource polls no tasks"):
        await router.poll_tool_task(_poll(_RECORD))
    await router.cancel_tool_task(_cancellation(_RECORD))
    assert cancelled == [], "the owner's task is not another tool's handler's to cancel"
    assert not ToolTaskRouter("MyRunner", "tool_tasks", None, sources=[_ListingOnlySource()]).can_poll


async def test_a_runner_that_takes_no_handlers_names_no_argument() -> None:
    router = ToolTaskRouter("StepwiseRunner", None, None, sources=[_Source("search")])
    with pytest.raises(LookupError) as raised:
        await router.poll_tool_task(_poll(_RECORD))
    assert str(raised.value) == "tool 'render' started task 'job-9', but no tool source owns it"
