"""Following a task an MCP tool started: its poll interval, one poll per Step, polling inside the tool Step.

A task any connection can poll (a Streamable HTTP server's) is polled once per `PollToolTask` Step:
`poll_task_once` reads it with one ``tasks/get`` and turns what the server reports into the session's poll
outcome, delivering the answer to a question the task asked first. A task only its own connection can
poll (a stdio server's, which dies with its process), or any task of a runner that polls none, is followed
inside the tool Step by `wait_in_step`, with a heartbeat per poll, for a bounded time per attempt.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import anyio
from mcp.client.session import ClientSession

from dex_agents._tools._outcomes import ToolExecutionError, ToolExecutionResult, ToolTaskPending
from dex_agents._tools._tasks import ToolTaskPoll, ToolTaskPollOutcome
from dex_agents.events import AgentEventWriter
from dex_agents.mcp._connection import describe_error
from dex_agents.mcp._render import render_tool_result
from dex_agents.mcp._task_questions import (
    describe_input_requests,
    input_response,
    read_task_question,
    request_fingerprint,
)
from dex_agents.mcp._task_state import AskedRequest, TaskContinuation
from dex_agents.mcp._task_wire import (
    TERMINAL_TASK_STATUSES,
    McpTaskState,
    McpToolTaskError,
    cancel_task,
    get_task,
    update_task,
)
from dex_agents.runner import DeferredToolExecution
from dex_agents.values import QuestionResolution

__all__ = [
    "ANSWER_WORKING_WINDOW_SECONDS",
    "MAX_DOUBLED_POLL_INTERVAL_SECONDS",
    "TASK_STATUS_EVENT",
    "McpTaskRef",
    "first_poll_interval",
    "next_poll_interval",
    "poll_task_once",
    "wait_in_step",
]

TASK_STATUS_EVENT = "mcp.task_status"
"""The event a poll writes when it sees a task's status change."""
MAX_DOUBLED_POLL_INTERVAL_SECONDS = 60
"""Doubling the interval stops at a minute; only the server's own interval can be longer."""
ANSWER_WORKING_WINDOW_SECONDS = 10.0
"""How long after ``tasks/update`` a task that still lists the answered request reads as working."""
# Polls right after an answer went out come a second apart, so the task's next state shows up soon.
_AFTER_ANSWER_INTERVAL_SECONDS = 1
# How long a cancelled attempt may spend telling the server to stop its task before the connection closes.
_CANCEL_ON_EXIT_SECONDS = 5.0

_logger = logging.getLogger("dex_agents.mcp")


@dataclass(frozen=True)
class McpTaskRef:
    """Which task, of which tool on which server: what every message about the task names.

    Attributes:
        server_name: The server's name.
        mcp_name: The tool's name on that server.
        task_id: The task.
    """

    server_name: str
    mcp_name: str
    task_id: str

    def error(self, problem: str) -> McpToolTaskError:
        """Return the `McpToolTaskError` for ``problem`` ("MCP task ... <problem>")."""
        return McpToolTaskError(self.server_name, self.mcp_name, self.task_id, problem)

    def describe(self) -> str:
        """Name the task for a message the model reads."""
        return f"MCP task {self.task_id!r} of tool {self.mcp_name!r} on server {self.server_name!r}"


def first_poll_interval(server_interval_ms: float | None) -> int:
    """Return the server's poll interval rounded up to whole seconds, at least 1 (1 when it gives none)."""
    if server_interval_ms is None or not math.isfinite(server_interval_ms) or server_interval_ms <= 0:
        return 1
    return max(1, math.ceil(server_interval_ms / 1000))


def next_poll_interval(server_interval_ms: float | None, previous_seconds: int | None) -> int:
    """Return the interval before the next poll: the server's, or double the last one when that is longer.

    Doubling, up to `MAX_DOUBLED_POLL_INTERVAL_SECONDS`, bounds how many Steps a long task costs when its
    server asks for frequent polls; a server that asks for longer intervals gets them.
    """
    doubled = min(2 * max(1, previous_seconds or 1), MAX_DOUBLED_POLL_INTERVAL_SECONDS)
    return max(first_poll_interval(server_interval_ms), doubled)


def _report_status(
    events: AgentEventWriter, ref: McpTaskRef, tool_call_id: str, previous: str, state: McpTaskState
) -> None:
    if state.status == previous:
        return
    payload: dict[str, object] = {
        "tool_call_id": tool_call_id,
        "server": ref.server_name,
        "tool": ref.mcp_name,
        "task_id": ref.task_id,
        "status": state.status,
        "previous_status": previous,
    }
    if state.status_message:
        payload["status_message"] = state.status_message
    events.write_event(TASK_STATUS_EVENT, payload)


def _finished(ref: McpTaskRef, state: McpTaskState) -> ToolExecutionResult:
    """The result of a task in a terminal status, or the error it ended with."""
    if state.status in ("completed", "failed") and state.result is not None:
        # A 2025-11-25 task that failed may still carry the tool's own (error) result.
        output = render_tool_result(state.result)
        if state.result.is_error or state.status == "failed":
            raise ToolExecutionError(output or f"{ref.describe()} reported an error without a message")
        return ToolExecutionResult(output)
    if state.status == "failed" and state.error is not None:
        code, message = state.error
        raise ToolExecutionError(f"{ref.describe()} failed with JSON-RPC error {code}: {message}")
    reason = f": {state.status_message}" if state.status_message else ""
    raise ref.error(f"was cancelled by the server before it finished, so it may have taken effect{reason}")


async def _cancel_best_effort(session: ClientSession, ref: McpTaskRef) -> None:
    try:
        await cancel_task(session, ref.task_id)
    except Exception as error:
        _logger.warning("%s could not be cancelled: %s", ref.describe(), describe_error(error))


async def _refuse_input(session: ClientSession, ref: McpTaskRef, state: McpTaskState, why: str) -> NoReturn:
    await _cancel_best_effort(session, ref)
    raise ToolExecutionError(
        f"{ref.describe()} asked for input that {why}: "
        f"{describe_input_requests(state.input_requests or {})}; the task was cancelled"
    )


async def wait_in_step(
    session: ClientSession,
    ref: McpTaskRef,
    created: McpTaskState,
    execution: DeferredToolExecution,
    wait_seconds: float,
) -> ToolExecutionResult:
    """Poll a task inside the tool Step until it ends, for at most ``wait_seconds`` or the task's TTL.

    Each poll heartbeats first, so Dex sees the Step alive. A task that asks for input is cancelled and the
    call fails, because only a task the session polls in its own Steps can wait for the user. When the
    attempt is cancelled while it waits (its Step timed out, or the Worker shuts down), the task is sent
    ``tasks/cancel`` on the same connection before the connection closes.

    Returns:
        The tool's result.

    Raises:
        ToolExecutionError: The task ended with a tool error or a JSON-RPC error, or asked for input.
        McpToolTaskError: The task could not be read, the server cancelled it, or it did not end in time.
    """
    try:
        return await _wait(session, ref, created, execution, wait_seconds)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_ON_EXIT_SECONDS):
            await _cancel_best_effort(session, ref)
        raise


async def _wait(
    session: ClientSession,
    ref: McpTaskRef,
    created: McpTaskState,
    execution: DeferredToolExecution,
    wait_seconds: float,
) -> ToolExecutionResult:
    status = created.status
    interval = first_poll_interval(created.poll_interval_ms)
    started = anyio.current_time()
    deadline = started + wait_seconds
    # Past its TTL the server may forget the task, so polling longer could only end in "unknown task".
    ttl_seconds = None if created.ttl_ms is None or created.ttl_ms <= 0 else created.ttl_ms / 1000
    if ttl_seconds is not None:
        deadline = min(deadline, started + ttl_seconds)
    while True:
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            if ttl_seconds is not None and ttl_seconds < wait_seconds:
                raise ref.error(
                    f"did not finish within its time to live of {ttl_seconds:g} seconds, so it may still "
                    "take effect"
                )
            raise ref.error(
                f"did not finish within {wait_seconds:g} seconds of polling inside the tool Step, so it may "
                "still take effect"
            )
        await execution.heartbeat()
        await anyio.sleep(min(interval, remaining))
        state = await get_task(session, ref.server_name, ref.mcp_name, ref.task_id)
        _report_status(execution.events, ref, execution.tool_call.tool_call_id, status, state)
        status = state.status
        if status in TERMINAL_TASK_STATUSES:
            return _finished(ref, state)
        if status == "input_required":
            await _refuse_input(
                session,
                ref,
                state,
                "the session can only ask the user for a task it polls in its own Steps (a Streamable HTTP "
                "server's task, with a runner that polls tasks)",
            )
        interval = next_poll_interval(state.poll_interval_ms, interval)


async def _deliver_answer(
    session: ClientSession,
    ref: McpTaskRef,
    poll: ToolTaskPoll,
    previous: TaskContinuation | None,
    state: McpTaskState,
    now: float,
) -> ToolTaskPollOutcome | None:
    """Send the pending answer to the request it answers, if the task still lists it; `None` otherwise."""
    pending = poll.pending_answer
    if pending is None or previous is None or previous.request is None:
        return None
    asked = previous.request
    requests = state.input_requests or {}
    request = requests.get(asked.key) if state.status == "input_required" else None
    if request is None or request_fingerprint(requests, asked.key) != asked.fingerprint:
        return None  # the task moved on; the answer has nowhere to go
    question = read_task_question({asked.key: request})
    if question is None:
        return None
    if poll.attempt > 1:
        # An earlier attempt may or may not have sent it, and the task may have asked the same again since.
        again = TaskContinuation(state.status, asked, declined=previous.declined)
        return question.to_input_request(again.encode())
    declined = pending.resolution is QuestionResolution.DECLINED
    # Output before the send, so Dex hands this attempt to no other Worker once the answer may be out.
    await poll.heartbeat()
    try:
        await update_task(session, ref.task_id, {asked.key: input_response(question, pending)})
    except Exception as error:
        if declined:
            await _cancel_best_effort(session, ref)
            raise ref.error(
                "could not be told that the user declined its question, so it was cancelled and may have "
                f"taken effect: {describe_error(error)}"
            ) from error
        raise ref.error(f"could not be given the user's answer: {describe_error(error)}") from error
    sent = TaskContinuation(state.status, asked, sent_at=now, declined=previous.declined or declined)
    return ToolTaskPending(_AFTER_ANSWER_INTERVAL_SECONDS, sent.encode())


def _still_answering(
    previous: TaskContinuation | None, requests: Mapping[str, Mapping[str, Any]], now: float
) -> bool:
    """Whether the task lists the request it was just given the answer to, within the working window."""
    if previous is None or previous.request is None or previous.sent_at is None:
        return False
    same = request_fingerprint(requests, previous.request.key) == previous.request.fingerprint
    return same and now - previous.sent_at < ANSWER_WORKING_WINDOW_SECONDS


async def poll_task_once(
    session: ClientSession, ref: McpTaskRef, poll: ToolTaskPoll, clock: Callable[[], float] = time.time
) -> ToolTaskPollOutcome:
    """Read the task once with ``tasks/get`` and return what the session should do next.

    Args:
        session: A connection to the task's server.
        ref: The task.
        poll: The session's poll; its record's ``input_continuation`` is what the last poll left.
        clock: The Worker's clock (seconds since the epoch), for the working window after an answer.

    Returns:
        The result, a question, or `ToolTaskPending` with the next interval and continuation.

    Raises:
        ToolExecutionError: The task ended with a tool error or a JSON-RPC error, or asked for input the
            session cannot ask (the task is cancelled).
        McpToolTaskError: The task could not be read or given its answer, or ended with an unknown effect.
    """
    record = poll.tool_call
    previous = TaskContinuation.decode(record.input_continuation)
    state = await get_task(session, ref.server_name, ref.mcp_name, ref.task_id)
    _report_status(poll.events, ref, record.tool_call_id, previous.status if previous else "working", state)
    now = clock()
    delivered = await _deliver_answer(session, ref, poll, previous, state, now)
    if delivered is not None:
        return delivered
    declined = previous is not None and previous.declined
    if state.status in TERMINAL_TASK_STATUSES:
        if state.status == "cancelled" and declined:
            raise ref.error("was cancelled after the user declined its question, so it may have taken effect")
        return _finished(ref, state)
    if state.status == "working":
        interval = next_poll_interval(state.poll_interval_ms, record.task_poll_interval_seconds)
        return ToolTaskPending(interval, TaskContinuation(state.status, declined=declined).encode())
    requests = state.input_requests or {}
    if _still_answering(previous, requests, now):
        return ToolTaskPending(_AFTER_ANSWER_INTERVAL_SECONDS, record.input_continuation)
    question = read_task_question(requests)
    if question is None:
        await _refuse_input(session, ref, state, "the session cannot ask the user")
    asked = AskedRequest(question.key, question.fingerprint)
    return question.to_input_request(TaskContinuation(state.status, asked, declined=declined).encode())
