"""The Steps of one tool call: its approval, its run, and its failure routes.

Each Step takes the tool call ID as input and loads only that call's record, so the parallel Steps of one
model response never share state. Every path that makes a record final also publishes the call's
`ToolCallResults` message in the same commit, and a Step that finds its record already final ends without
running or publishing.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from dex import AsyncContext, Step, StepDecision, StepOptions, Timer, Wait, dead_end, go_to_many

from dex_agents._tool_context import running_tool_execution
from dex_agents.limits import MAX_STORED_VALUE_BYTES, bounded_text
from dex_agents.persistence import AGENT_TOOL_CALLS, INTERRUPT_RESOLUTIONS, TOOL_CALL_CANCELLATIONS
from dex_agents.runner import (
    APPROVAL_DEADLINE_PASSED,
    TOOL_CALL_NOT_RUN_ERROR_PREFIX,
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
)
from dex_agents.session._control import (
    is_answer_pending,
    may_abandon_waiting_call,
    read_turn_control,
    record_call_cancelled,
    remove_abandoned_interrupt,
)
from dex_agents.session._errors import (
    NO_WORKER_AVAILABLE_ERROR_TYPE,
    RunnerCallError,
    describe_exception,
    plain_recovery_detail,
)
from dex_agents.session._interrupts import find_interrupt, remove_interrupt, write_interrupt_resolved
from dex_agents.session._state import (
    finish_tool_call,
    heartbeating,
    now,
    parse_time,
    read_interrupts,
    read_tool_call,
    stored_size,
)
from dex_agents.values import AgentInterrupt, AgentToolCall, ToolCallStatus, ToolEffect

if TYPE_CHECKING:
    from dex_agents.session._runtime import SessionRuntime

__all__ = [
    "AwaitToolApproval",
    "CallSingleAttemptTool",
    "CallTool",
    "RecordToolFailure",
    "RecordToolOutcomeUnknown",
]

_logger = logging.getLogger("dex_agents")


def idempotency_key(flow_id: str, record: AgentToolCall) -> str:
    """Return `<flow_id>/<turn_id>/<tool_call_id>`, the same on every attempt of the call."""
    return f"{flow_id}/{record.turn_id}/{record.tool_call_id}"


def _finish(
    context: AsyncContext,
    runtime: SessionRuntime,
    record: AgentToolCall,
    status: ToolCallStatus,
    *,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
) -> StepDecision:
    final = replace(
        record,
        status=status,
        output=output,
        error=None if error is None else bounded_text(error),
        rejection_message=None if rejection_message is None else bounded_text(rejection_message),
    )
    finish_tool_call(context, final)
    runtime.event_writer(context, record.turn_id).write_tool_call_finished(
        record.tool_call_id, record.tool_name, status.value
    )
    return dead_end()


class AwaitToolApproval(Step[str]):
    """Waits for the user to approve or reject one tool call, for its deadline, or for steering."""

    def __init__(self, runtime: SessionRuntime) -> None:
        """Create the Step for one Flow type."""
        self._runtime = runtime

    def get_step_options(self) -> StepOptions:
        """SYNC durability and the interrupt lock; movements add the call's own record and answer."""
        return self._runtime.await_tool_approval_options()

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for a steering wake, the resolution, and the deadline while the interrupt is pending."""
        cancellation = TOOL_CALL_CANCELLATIONS.for_one(input)
        resolution = INTERRUPT_RESOLUTIONS.for_one(input)
        interrupt = find_interrupt(read_interrupts(context), input)
        if interrupt is None or interrupt.deadline is None:
            return Wait.any_of(cancellation, resolution)
        remaining = (parse_time(interrupt.deadline) - now()).total_seconds()
        # Dex Timers take whole seconds; rounding up never fires before the deadline by design, and an
        # early fire (the server floors its clock) only makes execute wait again.
        seconds = max(0, math.ceil(remaining))
        return Wait.any_of(Timer.by_duration(timedelta(seconds=seconds)), cancellation, resolution)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Apply the resolution, or reject the call when its deadline passed, or wait again."""
        runtime = self._runtime
        record = read_tool_call(context, input)
        if record is None or record.is_final or record.status is not ToolCallStatus.AWAITING_APPROVAL:
            return dead_end()
        interrupts = read_interrupts(context)
        interrupt = find_interrupt(interrupts, input)
        writer = runtime.event_writer(context, record.turn_id)
        if TOOL_CALL_CANCELLATIONS.results(context, input):
            return self._abandon(context, record, interrupts, interrupt)
        resolutions = INTERRUPT_RESOLUTIONS.results(context, input)
        if resolutions:
            resolution = resolutions[0]
            # The answer is an input from outside the session: it starts an activation with its own root.
            root = runtime.tracing.begin_activation(context, record.turn_id)
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
                return go_to_many(runtime.to_tool_step(approved))
            return _finish(
                context, runtime, record, ToolCallStatus.REJECTED, rejection_message=rejection_message
            )
        if interrupt is None or interrupt.deadline is None or now() < parse_time(interrupt.deadline):
            # The Timer fired before the deadline, or resolve_interrupt removed the interrupt and its
            # answer is on the way: wait again, and the answer is applied when it arrives.
            return go_to_many(runtime.to_await_tool_approval(input))
        remove_interrupt(context, interrupts, interrupt)
        runtime.tracing.begin_activation(context, record.turn_id)  # an expired deadline is an activation too
        write_interrupt_resolved(
            writer, interrupt, approved=False, rejection_message=APPROVAL_DEADLINE_PASSED
        )
        return _finish(
            context, runtime, record, ToolCallStatus.REJECTED, rejection_message=APPROVAL_DEADLINE_PASSED
        )

    def _abandon(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        interrupts: list[AgentInterrupt],
        interrupt: AgentInterrupt | None,
    ) -> StepDecision:
        """Apply a steering wake: record the call cancelled, unless the flags or an answer say otherwise."""
        runtime = self._runtime
        reason = read_turn_control(context).reason
        if reason is None or not may_abandon_waiting_call(record):
            # A wake left from an earlier turn whose call had the same ID: nothing to apply.
            return go_to_many(runtime.to_await_tool_approval(record.tool_call_id))
        if interrupt is None and is_answer_pending(context, record.tool_call_id):
            # The answer committed before steering removed the interrupt, so the answer wins.
            return go_to_many(runtime.to_await_tool_approval(record.tool_call_id))
        if interrupt is not None:
            writer = runtime.event_writer(context, record.turn_id)
            remove_abandoned_interrupt(context, writer, interrupts, interrupt, reason)
        record_call_cancelled(context, runtime, record, reason)
        return dead_end()


async def _run_tool(context: AsyncContext, runtime: SessionRuntime, tool_call_id: str) -> StepDecision:
    record = read_tool_call(context, tool_call_id)
    if record is None or record.is_final:
        return dead_end()
    if record.status is not ToolCallStatus.APPROVED:
        return _finish(
            context,
            runtime,
            record,
            ToolCallStatus.FAILED,
            error=f"the session scheduled the call while it was {record.status.value}, so it did not run",
        )
    # Retries reuse the first attempt's snapshot: a tool that started runs to its end on every attempt.
    reason = read_turn_control(context).reason
    if reason is not None:
        record_call_cancelled(context, runtime, record, reason)
        return dead_end()
    return await runtime.tracing.trace_tool_call(
        context, record, lambda: _execute_approved_call(context, runtime, record)
    )


async def _execute_approved_call(
    context: AsyncContext, runtime: SessionRuntime, record: AgentToolCall
) -> StepDecision:
    runtime.event_writer(context, record.turn_id).write_tool_call_started(
        record.tool_call_id, record.tool_name
    )
    # Output before the tool runs: Dex hands an attempt to another Worker only while it has seen no output,
    # so this keeps a tool that started from running a second time at the same attempt.
    await context.heartbeat()
    writer = runtime.event_writer(context, record.turn_id)
    execution = DeferredToolExecution(
        flow_id=context.flow_id,
        tool_call=record,
        idempotency_key=idempotency_key(context.flow_id, record),
        attempt=context.attempt,
        events=writer,
        heartbeat_function=context.heartbeat,
    )
    async with heartbeating(context):
        try:
            with running_tool_execution(execution):
                result = await runtime.runner.execute_deferred_tool_call(execution)
        except ToolExecutionError as error:
            return _finish(context, runtime, record, ToolCallStatus.FAILED, error=error.message)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise RunnerCallError(describe_exception(error)) from error
        finally:
            writer.close()
    if not isinstance(result, ToolExecutionResult) or not isinstance(result.output, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerCallError(
            "execute_deferred_tool_call must return ToolExecutionResult with text output, "
            f"got {result!r:.200}"
        )
    size = stored_size(replace(record, status=ToolCallStatus.SUCCEEDED, output=result.output))
    if size > MAX_STORED_VALUE_BYTES:
        return _finish(
            context,
            runtime,
            record,
            ToolCallStatus.FAILED,
            error=(
                f"the tool's output makes its record {size} bytes, more than the "
                f"{MAX_STORED_VALUE_BYTES}-byte limit of one stored value; return less, or store the output "
                "elsewhere and return a reference"
            ),
        )
    return _finish(context, runtime, record, ToolCallStatus.SUCCEEDED, output=result.output)


class CallTool(Step[str]):
    """Runs one `read` or `idempotent_write` call, with up to three attempts."""

    def __init__(self, runtime: SessionRuntime) -> None:
        """Create the Step for one Flow type."""
        self._runtime = runtime

    def get_step_options(self) -> StepOptions:
        """Retries and failure route; movements add the call's own record."""
        return self._runtime.tool_step_options(ToolEffect.READ)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Run the call and record its result."""
        return await _run_tool(context, self._runtime, input)


class CallSingleAttemptTool(Step[str]):
    """Runs one `non_idempotent_write` or `unclassified` call, exactly once."""

    def __init__(self, runtime: SessionRuntime) -> None:
        """Create the Step for one Flow type."""
        self._runtime = runtime

    def get_step_options(self) -> StepOptions:
        """One attempt and failure route; movements add the call's own record."""
        return self._runtime.tool_step_options(ToolEffect.UNCLASSIFIED)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Run the call and record its result."""
        return await _run_tool(context, self._runtime, input)


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
    context: AsyncContext, runtime: SessionRuntime, tool_call_id: str, *, single_attempt: bool
) -> StepDecision:
    record = read_tool_call(context, tool_call_id)
    if record is None or record.is_final:
        return dead_end()
    recovery = context.recovery_error
    detail = "the tool Step failed without an error detail"
    error_type = ""
    if recovery is not None:
        detail = plain_recovery_detail(recovery.detail) or recovery.error_type or detail
        error_type = recovery.error_type
    if _never_ran(record, error_type, single_attempt=single_attempt):
        return _finish(
            context,
            runtime,
            record,
            ToolCallStatus.FAILED,
            error=f"{TOOL_CALL_NOT_RUN_ERROR_PREFIX}: {detail}",
        )
    if not single_attempt and record.effect is ToolEffect.READ:
        return _finish(context, runtime, record, ToolCallStatus.FAILED, error=detail)
    # A write may have taken effect before the Step failed, so the model must not assume either way.
    return _finish(context, runtime, record, ToolCallStatus.OUTCOME_UNKNOWN, error=detail)


class RecordToolFailure(Step[str]):
    """Failure route of `CallTool`: `failed` for a read, `outcome_unknown` for a write."""

    def __init__(self, runtime: SessionRuntime) -> None:
        """Create the Step for one Flow type."""
        self._runtime = runtime

    def get_step_options(self) -> StepOptions:
        """SYNC durability; movements add the call's own record."""
        return self._runtime.tool_failure_options()

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record the call's final status with the recovery detail."""
        return _record_failure(context, self._runtime, input, single_attempt=False)


class RecordToolOutcomeUnknown(Step[str]):
    """Failure route of `CallSingleAttemptTool`: `outcome_unknown`, unless the tool never ran."""

    def __init__(self, runtime: SessionRuntime) -> None:
        """Create the Step for one Flow type."""
        self._runtime = runtime

    def get_step_options(self) -> StepOptions:
        """SYNC durability; movements add the call's own record."""
        return self._runtime.tool_failure_options()

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record the call's final status with the recovery detail."""
        return _record_failure(context, self._runtime, input, single_attempt=True)
