"""Polling and cancelling the remote tasks that tools start: what a runner implements, and a helper for it.

A tool that returns `ToolTaskStarted` hands its remote work to the session: `PollToolTask` calls the
runner's `poll_tool_task` once per poll, in its own Step, until the task returns its result, and
`CancelToolTask` calls `cancel_tool_task` when `cancel_turn` abandons the task. Nothing here runs a tool;
a poll only reads the task (and delivers the answer to a question the task asked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dex_agents._tools._outcomes import ToolExecutionResult, ToolInputRequested, ToolTaskPending
from dex_agents.events import AgentEventWriter
from dex_agents.values import AgentToolCall, QuestionAnswer

__all__ = [
    "ToolCallOwner",
    "ToolTaskCancellation",
    "ToolTaskCanceller",
    "ToolTaskHandler",
    "ToolTaskHandlers",
    "ToolTaskPoll",
    "ToolTaskPollOutcome",
    "ToolTaskPoller",
    "ToolTaskRouter",
    "ToolTaskSource",
    "combined_task_handlers",
]

#: What one `poll_tool_task` returns: the task's result, a question it asks, or that it still runs.
ToolTaskPollOutcome = ToolExecutionResult | ToolInputRequested | ToolTaskPending


@dataclass(frozen=True)
class ToolTaskPoll:
    """One poll of a started task, for `ToolTaskPoller.poll_tool_task`.

    Attributes:
        flow_id: The session ID.
        tool_call: The call's record; ``task_id`` names the task and ``input_continuation`` is what the
            last `ToolTaskPending` (or, for the poll that delivers an answer, the question) returned.
        idempotency_key: ``"<flow_id>/<turn_id>/<tool_call_id>"``, the same on every attempt.
        attempt: The one-based attempt of this `PollToolTask`.
        input_answers: How each question the call asked ended, oldest first.
        events: Writes events stamped with the turn, Step execution and attempt.
        heartbeat_function: Records liveness; call `heartbeat()` instead.
        pending_answer: The resolution of the task's last question, set while it has not reached the task:
            an answer, a decline, or a passed deadline (see `QuestionAnswer.resolution`). Deliver it only to
            the request ``tool_call.input_continuation`` names, and idempotently, because a poll that
            crashed runs again; when a retried attempt cannot tell whether it was delivered, return the
            question again instead.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    input_answers: tuple[QuestionAnswer, ...]
    events: AgentEventWriter
    heartbeat_function: Callable[[], Awaitable[None]]
    pending_answer: QuestionAnswer | None = None

    async def heartbeat(self) -> None:
        """Record liveness. The session already does this every 20 seconds."""
        await self.heartbeat_function()


@dataclass(frozen=True)
class ToolTaskCancellation:
    """A started task that `cancel_turn` abandoned, for `ToolTaskCanceller.cancel_tool_task`.

    Attributes:
        flow_id: The session ID.
        tool_call: The call's record; ``task_id`` names the task.
        idempotency_key: ``"<flow_id>/<turn_id>/<tool_call_id>"``.
        attempt: The one-based attempt of this `CancelToolTask`.
        heartbeat_function: Records liveness; call `heartbeat()` instead.
    """

    flow_id: str
    tool_call: AgentToolCall
    idempotency_key: str
    attempt: int
    heartbeat_function: Callable[[], Awaitable[None]]

    async def heartbeat(self) -> None:
        """Record liveness."""
        await self.heartbeat_function()


@runtime_checkable
class ToolTaskPoller(Protocol):
    """Optional runner capability: poll the tasks its tools start (`ToolTaskStarted`).

    Without it, the session tells tools (`DeferredToolExecution.supports_tool_tasks`) to run their work to
    the end inside the call, and records a call that still returns `ToolTaskStarted` by its effect.
    """

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read the task once, delivering ``poll.pending_answer`` first when it is set.

        Return the task's result, `ToolTaskPending` while it runs, or `ToolInputRequested` for a question
        it asks. Raise `ToolExecutionError` for a failure the model should see; any other error fails the
        poll, and after three attempts the call is recorded by its effect. A runner that cannot deliver a
        decline cancels the task best-effort and raises such an error.

        Args:
            poll: The poll.

        Returns:
            What the task reports.
        """
        ...


@runtime_checkable
class ToolTaskCanceller(Protocol):
    """Optional runner capability: cancel a started task that `cancel_turn` abandoned, best-effort."""

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Ask the task to stop. It must be idempotent by ``task_id``: a crashed attempt runs it again.

        Args:
            cancellation: The abandoned task.
        """
        ...


@dataclass(frozen=True)
class ToolTaskHandler:
    """How to poll, and optionally cancel, the tasks of one tool.

    Attributes:
        poll: Reads the task once (see `ToolTaskPoller.poll_tool_task`).
        cancel: Asks the task to stop (see `ToolTaskCanceller.cancel_tool_task`), or `None`.
    """

    poll: Callable[[ToolTaskPoll], Awaitable[ToolTaskPollOutcome]]
    cancel: Callable[[ToolTaskCancellation], Awaitable[None]] | None = None


class ToolTaskHandlers:
    """Polls and cancels started tasks by their tool's name: what a runner's task methods delegate to.

    A runner cannot keep a task's poll function between Steps, because every Step may run in another
    Worker; it finds it by the tool name on the call's record instead. An adapter takes these handlers from
    its user and implements `ToolTaskPoller` and `ToolTaskCanceller` by calling this object.

    Args:
        handlers: The handler of each tool whose calls start tasks, by tool name.

    Examples:
        >>> tasks = ToolTaskHandlers({"render_video": ToolTaskHandler(poll=poll_render)})
        >>> outcome = await tasks.poll_tool_task(poll)
    """

    def __init__(self, handlers: Mapping[str, ToolTaskHandler]) -> None:
        for name, handler in handlers.items():
            if not isinstance(handler, ToolTaskHandler):  # pyright: ignore[reportUnnecessaryIsInstance]
                kind = type(handler).__name__
                raise TypeError(f"the task handler of tool {name!r} must be a ToolTaskHandler, got {kind}")
        self._handlers = dict(handlers)

    @property
    def tool_names(self) -> frozenset[str]:
        """The tools that have a handler."""
        return frozenset(self._handlers)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll the task with its tool's handler.

        Args:
            poll: The poll.

        Returns:
            The handler's outcome.

        Raises:
            LookupError: If the tool has no handler; the poll fails, and the call is recorded by its effect.
        """
        handler = self._handlers.get(poll.tool_call.tool_name)
        if handler is None:
            raise LookupError(
                f"tool {poll.tool_call.tool_name!r} started task {poll.tool_call.task_id!r}, but the runner "
                "has no task handler for it"
            )
        return await handler.poll(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel the task with its tool's handler; a tool without a cancel handler is left alone.

        Args:
            cancellation: The abandoned task.
        """
        handler = self._handlers.get(cancellation.tool_call.tool_name)
        if handler is not None and handler.cancel is not None:
            await handler.cancel(cancellation)


def combined_task_handlers(*handlers: ToolTaskHandlers | None) -> ToolTaskHandlers:
    """Return one `ToolTaskHandlers` with the handlers of each; a later one wins a tool both name."""
    merged: dict[str, ToolTaskHandler] = {}
    for each in handlers:
        if each is not None:
            merged.update(each._handlers)  # pyright: ignore[reportPrivateUsage]
    return ToolTaskHandlers(merged)


class ToolCallOwner(Protocol):
    """A tool source that finds its calls by their record alone: every poll may run in another Worker."""

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        """Whether the call is this source's, from its record alone."""
        ...


class ToolTaskSource(ToolCallOwner, Protocol):
    """A tool source that polls and cancels the tasks of the calls it owns, as `McpToolSource` does."""

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Read one of this source's tasks once (see `ToolTaskPoller.poll_tool_task`)."""
        ...

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Ask one of this source's tasks to stop (see `ToolTaskCanceller.cancel_tool_task`)."""
        ...


class ToolTaskRouter:
    """Routes a started task's poll and cancel to the source that owns its call, else to the user's handlers.

    What an adapter's `poll_tool_task` and `cancel_tool_task` delegate to when it takes both tool sources
    (an `McpToolSource`, say) and `ToolTaskHandlers`: the first source whose ``owns_tool_call`` accepts the
    call's record gets it; any other call goes to ``handlers``. A source that owns a call but has no
    ``poll_tool_task`` fails its polls, and one without ``cancel_tool_task`` leaves its tasks alone. A
    runner should offer polling only when `can_poll` is true, so the session tells tools to finish their
    work in the call otherwise.

    Args:
        runner_name: The runner's class name, for the error that asks for handlers.
        handlers_argument: The runner's constructor argument that takes ``handlers``, for the same error;
            `None` for a runner that takes none.
        handlers: The user's handlers by tool name, or `None`.
        sources: The tool sources whose calls' tasks they poll and cancel themselves.

    Examples:
        >>> router = ToolTaskRouter("MyRunner", "tool_tasks", tool_tasks, sources=[mcp_tools])
        >>> outcome = await router.poll_tool_task(poll)
    """

    def __init__(
        self,
        runner_name: str,
        handlers_argument: str | None,
        handlers: ToolTaskHandlers | None,
        sources: Iterable[ToolCallOwner] = (),
    ) -> None:
        self._runner_name = runner_name
        self._handlers_argument = handlers_argument
        self._handlers = handlers
        self._sources = tuple(sources)

    @property
    def can_poll(self) -> bool:
        """Whether anything can poll a task: a source or the handlers."""
        return self._handlers is not None or any(
            isinstance(source, ToolTaskPoller) for source in self._sources
        )

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll the task through the source that owns its call, else through the handlers.

        Args:
            poll: The poll.

        Returns:
            What the source or the tool's handler reports.

        Raises:
            LookupError: If the source that owns the call polls no tasks, no source owns it and there are no
                handlers, or the handlers have none for its tool; the poll fails, and the call is recorded
                by its effect.
        """
        record = poll.tool_call
        source = self._owner(record)
        started = f"tool {record.tool_name!r} started task {record.task_id!r}"
        if isinstance(source, ToolTaskPoller):
            return await source.poll_tool_task(poll)
        if source is not None:
            raise LookupError(f"{started}, but {type(source).__name__} polls no tasks")
        if self._handlers is None:
            raise LookupError(f"{started}, but no tool source owns it{self._handlers_hint(record.tool_name)}")
        return await self._handlers.poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel the task through the source that owns its call, else the handlers; else leave it alone.

        Args:
            cancellation: The abandoned task.
        """
        source = self._owner(cancellation.tool_call)
        if isinstance(source, ToolTaskCanceller):
            await source.cancel_tool_task(cancellation)
        elif source is None and self._handlers is not None:
            await self._handlers.cancel_tool_task(cancellation)

    def _handlers_hint(self, tool: str) -> str:
        runner, argument = self._runner_name, self._handlers_argument
        if argument is None:
            return ""
        return (
            f" and {runner} was given no {argument}; pass "
            f"{runner}(..., {argument}=ToolTaskHandlers({{{tool!r}: ToolTaskHandler(poll=...)}}))"
        )

    def _owner(self, record: AgentToolCall) -> ToolCallOwner | None:
        return next((source for source in self._sources if source.owns_tool_call(record)), None)
