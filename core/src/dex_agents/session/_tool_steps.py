"""The Steps of one tool call: its approval, its run, and its failure routes.

Each Step takes the tool call ID as input and loads only that call's record, so the parallel Steps of one
model response never share state. Every path that makes a record final also publishes the call's
`ToolCallResults` message in the same commit, and a Step that finds its record already final ends without
running or publishing. A response's only call is joined by its own Steps instead
(`AgentToolCall.resumes_turn`): the Step that makes it final moves the turn to `RunModel`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

from dex import AsyncContext, StepDecision, Wait, dead_end, go_to_many
from dex.step import DecisionKind

from dex_agents._tools._context import running_tool_execution
from dex_agents.persistence import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents.runner import (
    APPROVAL_DEADLINE_PASSED,
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    TOOL_TASK_CANCELLED_ERROR,
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
)
from dex_agents.session._control import (
    apply_cancellation_wake,
    read_turn_control,
    record_call_cancelled,
)
from dex_agents.session._deps import SessionDeps
from dex_agents.session._errors import (
    NO_WORKER_AVAILABLE_ERROR_TYPE,
    RunnerCallError,
    describe_exception,
    plain_recovery_detail,
)
from dex_agents.session._interrupts import (
    deadline_timer,
    find_interrupt,
    has_passed,
    remove_interrupt,
    write_interrupt_resolved,
)
from dex_agents.session._moves import Moves
from dex_agents.session._records import finish_call, idempotency_key, store_input_request
from dex_agents.session._state import heartbeating, read_interrupts, read_state, read_tool_call
from dex_agents.session._step import SessionStep
from dex_agents.session._tasks import record_result, runner_polls_tasks, store_task_started
from dex_agents.session._turn_lifecycle import back_to_the_model
from dex_agents.values import (
    AgentToolCall,
    CancellationReason,
    ToolCallStatus,
    ToolEffect,
)

__all__ = [
    "AwaitToolApproval",
    "CallSingleAttemptTool",
    "CallTool",
    "RecordToolFailure",
    "RecordToolOutcomeUnknown",
]

_logger = logging.getLogger("dex_agents")


class AwaitToolApproval(SessionStep[str]):
    """Waits for the user to approve or reject one tool call, for its deadline, or for steering."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for a steering wake, the resolution, and the deadline while the interrupt is pending."""
        cancellation = TOOL_CALL_CANCELLATIONS.for_one(input)
        resolution = INTERRUPT_RESOLUTIONS.for_one(input)
        interrupt = find_interrupt(read_interrupts(context), input)
        if interrupt is None or interrupt.deadline is None:
            return Wait.any_of(cancellation, resolution)
        return Wait.any_of(deadline_timer(interrupt.deadline), cancellation, resolution)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Apply the resolution, or reject the call when its deadline passed, or wait again."""
        record = read_tool_call(context, input)
        if record is None or record.is_final or record.status is not ToolCallStatus.AWAITING_APPROVAL:
            return dead_end()
        interrupts = read_interrupts(context)
        interrupt = find_interrupt(interrupts, input)
        writer = self._deps.event_writer(context, record.turn_id)
        if TOOL_CALL_CANCELLATIONS.results(context, input):
            return apply_cancellation_wake(context, self._deps, self._moves, record, input, interrupts)
        resolutions = INTERRUPT_RESOLUTIONS.results(context, input)
        if resolutions:
            resolution = resolutions[0]
            # The answer is an input from outside the session: it starts an activation with its own root.
            root = self._deps.tracing.begin_activation(context, record.turn_id)
            if interrupt is not None:
                # resolve_interrupt removes the interrupt itself; this only repairs a stray publish.
                remove_interrupt(context, interrupts, interrupt)
            rejection_message = None if resolution.approved else resolution.rejection_message
            write_interrupt_resolved(
                writer, input, approved=resolution.approved, rejection_message=rejection_message
            )
            if resolution.approved:
                approved = replace(record, status=ToolCallStatus.APPROVED, trace_context=root)
                AGENT_TOOL_CALLS.set(context, input, approved)
                return go_to_many(self._moves.to_tool_step(approved))
            return finish_call(
                context, self._deps, record, ToolCallStatus.REJECTED, rejection_message=rejection_message
            )
        if interrupt is None or not has_passed(interrupt.deadline):
            # The Timer fired before the deadline, or resolve_interrupt removed the interrupt and its
            # answer is on the way: wait again, and the answer is applied when it arrives.
            return go_to_many(self._moves.to_await_tool_approval(input))
        remove_interrupt(context, interrupts, interrupt)
        self._deps.tracing.begin_activation(
            context, record.turn_id
        )  # an expired deadline is an activation too
        write_interrupt_resolved(
            writer, interrupt, approved=False, rejection_message=APPROVAL_DEADLINE_PASSED
        )
        return finish_call(
            context, self._deps, record, ToolCallStatus.REJECTED, rejection_message=APPROVAL_DEADLINE_PASSED
        )


class _AttemptCheckpoint:
    """The heartbeat checkpoint of one tool Step attempt: inherited from the last attempt, or saved anew.

    A heartbeat without a value clears the checkpoint Dex keeps for the next attempt, so every heartbeat of
    the attempt repeats the current one.
    """

    def __init__(self, context: AsyncContext) -> None:
        self._context = context
        self.value = _inherited_checkpoint(context)

    async def heartbeat(self) -> None:
        if self.value is None:
            await self._context.heartbeat()
        else:
            await self._context.heartbeat(self.value)

    async def save(self, checkpoint: str) -> None:
        if not isinstance(checkpoint, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"a heartbeat checkpoint must be text, got {type(checkpoint).__name__}")
        self.value = checkpoint
        await self.heartbeat()


def _inherited_checkpoint(context: AsyncContext) -> str | None:
    try:
        if not context.has_last_heartbeat_value():
            return None
        value = context.get_last_heartbeat_value(str)
    except Exception:
        # Another writer's checkpoint that is not text reads as none.
        return None
    return value if isinstance(value, str) else None


async def _call_runner(
    context: AsyncContext, deps: SessionDeps, record: AgentToolCall
) -> object | ToolExecutionError:
    """Run the tool once; return its outcome, or the `ToolExecutionError` it raised.

    A question or a started task that the tool's code recorded wins over whatever the runner returned or
    raised, because a framework may turn the tool's exception into an error result.
    """
    checkpoint = _AttemptCheckpoint(context)
    # Output before the tool runs: Dex hands an attempt to another Worker only while it has seen no output,
    # so this keeps a tool that started from running a second time at the same attempt.
    await checkpoint.heartbeat()
    writer = deps.event_writer(context, record.turn_id)
    execution = DeferredToolExecution(
        flow_id=context.flow_id,
        tool_call=record,
        idempotency_key=idempotency_key(context.flow_id, record),
        attempt=context.attempt,
        events=writer,
        heartbeat_function=checkpoint.heartbeat,
        heartbeat_checkpoint=checkpoint.value,
        supports_tool_tasks=runner_polls_tasks(deps.runner),
        checkpoint_function=checkpoint.save,
    )
    async with heartbeating(context, heartbeat=checkpoint.heartbeat):
        with running_tool_execution(execution) as requests:
            try:
                result: object = await deps.runner.execute_deferred_tool_call(execution)
            except ToolExecutionError as error:
                return requests.outcome or error
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if requests.outcome is not None:
                    return requests.outcome
                raise RunnerCallError(describe_exception(error)) from error
            finally:
                writer.close()
        return requests.outcome or result


async def _run_tool(
    context: AsyncContext, deps: SessionDeps, moves: Moves, tool_call_id: str
) -> StepDecision:
    record = read_tool_call(context, tool_call_id)
    if record is None or record.is_final:
        return dead_end()
    if record.status is not ToolCallStatus.APPROVED:
        return finish_call(
            context,
            deps,
            record,
            ToolCallStatus.FAILED,
            error=f"the session scheduled the call while it was {record.status.value}, so it did not run",
        )
    # Retries reuse the first attempt's snapshot: a tool that started runs to its end on every attempt.
    reason = read_turn_control(context).reason
    if reason is not None:
        record_call_cancelled(context, deps, record, reason)
        return dead_end()
    return await deps.tracing.trace_tool_call(
        context, record, lambda: _execute_approved_call(context, deps, moves, record)
    )


async def _execute_approved_call(
    context: AsyncContext, deps: SessionDeps, moves: Moves, record: AgentToolCall
) -> StepDecision:
    deps.event_writer(context, record.turn_id).write_tool_call_started(record.tool_call_id, record.tool_name)
    outcome = await _call_runner(context, deps, record)
    if isinstance(outcome, ToolExecutionError):
        return finish_call(context, deps, record, ToolCallStatus.FAILED, error=outcome.message)
    if isinstance(outcome, ToolInputRequested):
        stored = store_input_request(context, record, outcome)
        if isinstance(stored, str):
            # The tool asks before it takes any effect, so nothing ran that the model must not repeat.
            return finish_call(context, deps, record, ToolCallStatus.FAILED, error=stored)
        return go_to_many(moves.to_await_question_answer(stored))
    if isinstance(outcome, ToolTaskStarted):
        return store_task_started(context, deps, moves, record, outcome)
    if not isinstance(outcome, ToolExecutionResult) or not isinstance(outcome.output, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerCallError(
            "execute_deferred_tool_call must return ToolExecutionResult with text output, "
            f"ToolInputRequested or ToolTaskStarted, got {outcome!r:.200}"
        )
    return record_result(context, deps, record, outcome)


async def _joining_a_lone_call(
    context: AsyncContext, moves: Moves, tool_call_id: str, step: Callable[[], Awaitable[StepDecision]]
) -> StepDecision:
    """Run a Step of one call, and stand in for `ResumeTurn` when the call `resumes_turn` itself.

    When the Step makes such a call final, it moves the turn to `RunModel` in the same commit, as
    `ResumeTurn` would have (`RunModel` ends a steered or cancelled turn before any model call). When the
    call starts to wait instead (a question, a task), the Step hands the join back to a `ResumeTurn` for
    one result, which then waits like any other. A record that was final already, or that the Step left
    as it was, changes nothing: the turn moved on, or will, elsewhere.
    """
    before = read_tool_call(context, tool_call_id)
    decision = await step()
    if before is None or before.is_final or not before.resumes_turn:
        return decision
    if decision.kind not in (DecisionKind.NEXT, DecisionKind.DEAD_END):
        return decision
    after = read_tool_call(context, tool_call_id)
    if after is None or after == before:
        return decision
    if not after.is_final:
        AGENT_TOOL_CALLS.set(context, tool_call_id, replace(after, resumes_turn=False))
        return go_to_many(*decision.movements, moves.to_resume_turn(1))
    state = read_state(context)
    if state is None or state.active_turn_id != after.turn_id:
        return decision
    return go_to_many(*decision.movements, back_to_the_model(context, moves, state))


class CallTool(SessionStep[str]):
    """Runs one `read` or `idempotent_write` call, with up to three attempts."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Run the call and record its result."""
        return await _joining_a_lone_call(
            context, self._moves, input, lambda: _run_tool(context, self._deps, self._moves, input)
        )


class CallSingleAttemptTool(SessionStep[str]):
    """Runs one `non_idempotent_write` or `unclassified` call, exactly once."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Run the call and record its result."""
        return await _joining_a_lone_call(
            context, self._moves, input, lambda: _run_tool(context, self._deps, self._moves, input)
        )


def _never_ran(record: AgentToolCall, error_type: str, *, single_attempt: bool) -> bool:
    """Whether the failed tool Step certainly never ran the tool.

    SDK 1.23.0 reports only the last attempt's error, not the furthest progress across attempts. A
    `NO_WORKER_AVAILABLE` last attempt proves the tool never ran only when there was no earlier attempt
    (a single-attempt call), or when running it twice is harmless (a read).
    """
    if NO_WORKER_AVAILABLE_ERROR_TYPE not in error_type.upper():
        return False
    if record.status is not ToolCallStatus.APPROVED or record.input_answers:
        return False
    return single_attempt or record.effect is ToolEffect.READ


def _record_failure(
    context: AsyncContext, deps: SessionDeps, tool_call_id: str, *, single_attempt: bool
) -> StepDecision:
    record = read_tool_call(context, tool_call_id)
    if record is None or record.is_final:
        return dead_end()
    if record.task_id is not None and record.cancellation_reason is CancellationReason.TURN_CANCELLED:
        # CancelToolTask's attempts ran out: the task was abandoned all the same, so the call ends as such.
        return finish_call(
            context, deps, record, ToolCallStatus.OUTCOME_UNKNOWN, error=TOOL_TASK_CANCELLED_ERROR
        )
    recovery = context.recovery_error
    detail = "the tool Step failed without an error detail"
    error_type = ""
    if recovery is not None:
        detail = plain_recovery_detail(recovery.detail) or recovery.error_type or detail
        error_type = recovery.error_type
    if _never_ran(record, error_type, single_attempt=single_attempt):
        return finish_call(
            context,
            deps,
            record,
            ToolCallStatus.FAILED,
            error=f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: {detail}",
        )
    if not single_attempt and record.effect is ToolEffect.READ:
        return finish_call(context, deps, record, ToolCallStatus.FAILED, error=detail)
    # A write may have taken effect before the Step failed, so the model must not assume either way.
    return finish_call(context, deps, record, ToolCallStatus.OUTCOME_UNKNOWN, error=detail)


class RecordToolFailure(SessionStep[str]):
    """Failure route of `CallTool`: `failed` for a read, `outcome_unknown` for a write."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record the call's final status with the recovery detail."""

        async def record() -> StepDecision:
            return _record_failure(context, self._deps, input, single_attempt=False)

        return await _joining_a_lone_call(context, self._moves, input, record)


class RecordToolOutcomeUnknown(SessionStep[str]):
    """Failure route of `CallSingleAttemptTool`: `outcome_unknown`, unless the tool never ran."""

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record the call's final status with the recovery detail."""

        async def record() -> StepDecision:
            return _record_failure(context, self._deps, input, single_attempt=True)

        return await _joining_a_lone_call(context, self._moves, input, record)
