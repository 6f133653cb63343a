"""Tool tasks: remote work a tool started, which the session polls until it ends.

A tool Step that gets `ToolTaskStarted` records the call `waiting_for_task` with the task's ID and moves to
`PollToolTask`, which waits for the poll interval, calls the runner's `poll_tool_task` once, and stores
what it reports: the result, a question (`AwaitQuestionAnswer`, then back here with the answer), or the
next interval. A started task may have taken effect, so nothing but its own outcome or its failure route
(by effect) ends the call: steering leaves it running, and a task that `cancel_turn` abandons goes to
`CancelToolTask`, which asks the runner to stop it and records `outcome_unknown`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import cast

from dex import AsyncContext, StepDecision, Timer, Wait, dead_end, go_to_many

from dex_agents._tools._outcomes import (
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskPending,
    ToolTaskStarted,
)
from dex_agents._tools._tasks import ToolTaskCancellation, ToolTaskPoll
from dex_agents.events import AgentEventType
from dex_agents.limits import MAX_TOOL_OUTPUT_BYTES, unencodable_index, utf8_size
from dex_agents.persistence import AGENT_TOOL_CALLS, AGENT_TOOL_OUTPUTS, tool_output_key
from dex_agents.runner import TOOL_TASK_CANCELLED_ERROR, AgentFrameworkRunner, tool_output_view
from dex_agents.session._control import is_turn_cancelled
from dex_agents.session._deps import SessionDeps
from dex_agents.session._errors import RunnerCallError, describe_exception
from dex_agents.session._moves import Moves
from dex_agents.session._records import (
    finish_by_effect,
    finish_call,
    idempotency_key,
    oversized_record_error,
    store_input_request,
)
from dex_agents.session._state import heartbeating, read_tool_call
from dex_agents.session._step import SessionStep
from dex_agents.values import AgentToolCall, CancellationReason, ToolCallStatus

__all__ = [
    "MAX_TASK_POLL_INTERVAL_SECONDS",
    "CancelToolTask",
    "PollToolTask",
    "poll_interval_seconds",
    "record_result",
    "runner_polls_tasks",
    "store_task_started",
]

#: The longest time between two polls of a task: a day.
MAX_TASK_POLL_INTERVAL_SECONDS = 24 * 60 * 60

_POLLER = "poll_tool_task"
_CANCELLER = "cancel_tool_task"


def runner_polls_tasks(runner: AgentFrameworkRunner) -> bool:
    """Whether the runner implements `ToolTaskPoller`."""
    return callable(getattr(runner, _POLLER, None))


def poll_interval_seconds(value: object) -> int | None:
    """Return a poll interval rounded up to whole seconds from 1 to a day, or `None` for a non-number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    if value == math.inf:
        return MAX_TASK_POLL_INTERVAL_SECONDS
    return min(max(1, math.ceil(value)), MAX_TASK_POLL_INTERVAL_SECONDS)


def record_result(
    context: AsyncContext, deps: SessionDeps, record: AgentToolCall, result: ToolExecutionResult
) -> StepDecision:
    """Record a tool's or a task's result, or `failed` when it is too large to store.

    An output above ``max_inline_tool_output_bytes`` is stored apart in `AgentToolOutputs` in the same
    commit, and the record keeps the part the model sees (`tool_output_view`) and the whole size.
    """
    output = result.output
    size = utf8_size(output)
    inline = deps.options.max_inline_tool_output_bytes
    if size > inline:
        if size > MAX_TOOL_OUTPUT_BYTES:
            return finish_call(
                context,
                deps,
                record,
                ToolCallStatus.FAILED,
                error=(
                    f"the tool's output is {size} bytes, more than the {MAX_TOOL_OUTPUT_BYTES}-byte limit of "
                    "one stored tool output; return less, or store it elsewhere and return a reference"
                ),
            )
        AGENT_TOOL_OUTPUTS.set(
            context, tool_output_key(record.turn_id, record.tool_call_id), _storable_text(output)
        )
        record = replace(record, stored_output_bytes=size)
        output = tool_output_view(output, inline)
    problem = oversized_record_error(
        replace(record, status=ToolCallStatus.SUCCEEDED, output=output), "the tool's output"
    )
    if problem is not None:
        return finish_call(context, deps, record, ToolCallStatus.FAILED, error=problem)
    return finish_call(context, deps, record, ToolCallStatus.SUCCEEDED, output=output)


def _storable_text(text: str) -> str:
    """Return ``text`` as a plain `str`, its lone surrogates (which a stored string cannot hold) as U+FFFD.

    The SDK's string codec refuses a subclass of `str`, such as the text accessor of a LangChain message.
    """
    plain = str.__str__(text)
    if unencodable_index(plain) is None:
        return plain
    return plain.encode("utf-16", errors="surrogatepass").decode("utf-16", errors="replace")


def store_task_started(
    context: AsyncContext, deps: SessionDeps, moves: Moves, record: AgentToolCall, started: ToolTaskStarted
) -> StepDecision:
    """Record a started task `waiting_for_task` and move to `PollToolTask`, or record the call by effect.

    A task the session cannot poll may still run, so a call whose runner has no poller, or whose task ID or
    interval is unusable, records `failed` for a read and `outcome_unknown` otherwise.
    """
    task_id = started.task_id
    interval = poll_interval_seconds(started.poll_interval_seconds)
    if not runner_polls_tasks(deps.runner):
        return finish_by_effect(
            context,
            deps,
            record,
            f"the tool started a task, but the runner {type(deps.runner).__name__} does not implement "
            "poll_tool_task, so the session cannot follow it",
        )
    if not isinstance(task_id, str) or not task_id.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        return finish_by_effect(context, deps, record, "the tool started a task with a blank task_id")
    if interval is None:
        return finish_by_effect(
            context,
            deps,
            record,
            f"the tool started task {task_id!r} with a poll interval that is not a number: "
            f"{started.poll_interval_seconds!r}",
        )
    waiting = replace(
        record,
        status=ToolCallStatus.WAITING_FOR_TASK,
        task_id=task_id,
        task_poll_interval_seconds=interval,
        input_continuation=None,
    )
    problem = oversized_record_error(waiting, "the task's ID")
    if problem is not None:
        return finish_by_effect(context, deps, record, problem)
    AGENT_TOOL_CALLS.set(context, waiting.tool_call_id, waiting)
    deps.event_writer(context, record.turn_id).write_event(
        AgentEventType.TOOL_TASK_STARTED,
        {"tool_call_id": record.tool_call_id, "tool_name": record.tool_name, "task_id": task_id},
    )
    return go_to_many(moves.to_poll_tool_task(waiting))


class PollToolTask(SessionStep[str]):
    """Polls one started task once per interval, until it reports its result."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for the poll interval; at once when an answer waits for the task or the turn is cancelled."""
        record = read_tool_call(context, input)
        seconds = 0
        if (
            record is not None
            and record.status is ToolCallStatus.WAITING_FOR_TASK
            and not record.task_answer_pending
            and not is_turn_cancelled(context, record.turn_id)
        ):
            seconds = record.task_poll_interval_seconds or 1
        return Wait.until(Timer.by_duration(timedelta(seconds=seconds)))

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Poll the task once and store what it reports."""
        record = read_tool_call(context, input)
        if record is None or record.status is not ToolCallStatus.WAITING_FOR_TASK:
            return dead_end()
        if is_turn_cancelled(context, record.turn_id):
            # cancel_turn committed before this poll started: FinishTurnCancellation cancels the task.
            return go_to_many(self._moves.to_finish_turn_cancellation(record.turn_id))
        poller = cast(
            Callable[[ToolTaskPoll], Awaitable[object]] | None, getattr(self._deps.runner, _POLLER, None)
        )
        if not callable(poller):
            raise RunnerCallError(
                f"the call waits for task {record.task_id!r}, but the runner "
                f"{type(self._deps.runner).__name__} does not implement poll_tool_task"
            )
        writer = self._deps.event_writer(context, record.turn_id)
        pending_answer = (
            record.input_answers[-1] if record.task_answer_pending and record.input_answers else None
        )
        poll = ToolTaskPoll(
            flow_id=context.flow_id,
            tool_call=record,
            idempotency_key=idempotency_key(context.flow_id, record),
            attempt=context.attempt,
            input_answers=record.input_answers,
            events=writer,
            heartbeat_function=context.heartbeat,
            pending_answer=pending_answer,
        )
        return await self._deps.tracing.trace_tool_call(
            context, record, lambda: self._poll(context, record, poller, poll)
        )

    async def _poll(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        poller: Callable[[ToolTaskPoll], Awaitable[object]],
        poll: ToolTaskPoll,
    ) -> StepDecision:
        # Output before the poll, so Dex does not hand a poll that delivers an answer to a second Worker.
        await context.heartbeat()
        async with heartbeating(context):
            try:
                outcome: object = await poller(poll)
            except ToolExecutionError as error:
                return finish_call(context, self._deps, record, ToolCallStatus.FAILED, error=error.message)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                raise RunnerCallError(describe_exception(error)) from error
            finally:
                poll.events.close()
        return self._store(context, record, outcome)

    def _store(self, context: AsyncContext, record: AgentToolCall, outcome: object) -> StepDecision:
        if isinstance(outcome, ToolExecutionResult) and isinstance(outcome.output, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            return record_result(context, self._deps, record, outcome)
        if isinstance(outcome, ToolTaskPending):
            interval = poll_interval_seconds(outcome.poll_interval_seconds)
            if interval is None:
                raise RunnerCallError(
                    "poll_tool_task returned a poll interval that is not a number: "
                    f"{outcome.poll_interval_seconds!r}"
                )
            waiting = replace(
                record,
                task_poll_interval_seconds=interval,
                input_continuation=outcome.continuation,
                task_answer_pending=False,
            )
            problem = oversized_record_error(waiting, "the poll's continuation")
            if problem is not None:
                raise RunnerCallError(problem)
            AGENT_TOOL_CALLS.set(context, waiting.tool_call_id, waiting)
            return go_to_many(self._moves.to_poll_tool_task(waiting))
        if isinstance(outcome, ToolInputRequested):
            stored = store_input_request(context, record, outcome)
            if isinstance(stored, str):
                raise RunnerCallError(stored)
            return go_to_many(self._moves.to_await_question_answer(stored))
        raise RunnerCallError(
            "poll_tool_task must return ToolExecutionResult with text output, ToolTaskPending or "
            f"ToolInputRequested, got {outcome!r:.200}"
        )


class CancelToolTask(SessionStep[str]):
    """Asks the runner to stop a task that `cancel_turn` abandoned, then records `outcome_unknown`."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Call ``cancel_tool_task`` when the runner has it, then end the call as `outcome_unknown`."""
        record = read_tool_call(context, input)
        if record is None or record.is_final:
            return dead_end()
        canceller = cast(
            Callable[[ToolTaskCancellation], Awaitable[object]] | None,
            getattr(self._deps.runner, _CANCELLER, None),
        )
        if callable(canceller):
            cancellation = ToolTaskCancellation(
                flow_id=context.flow_id,
                tool_call=record,
                idempotency_key=idempotency_key(context.flow_id, record),
                attempt=context.attempt,
                heartbeat_function=context.heartbeat,
            )
            try:
                await canceller(cancellation)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                raise RunnerCallError(describe_exception(error)) from error
        return finish_call(
            context,
            self._deps,
            record,
            ToolCallStatus.OUTCOME_UNKNOWN,
            error=TOOL_TASK_CANCELLED_ERROR,
            cancellation_reason=CancellationReason.TURN_CANCELLED,
        )
