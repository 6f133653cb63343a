"""Where the session's Steps meet tracing: activation roots, ``chat`` spans and ``execute_tool`` spans.

Each Step makes one call here. Without `AgentSessionOptions.tracing` every call is a pass-through that
reads and writes nothing, so a session without tracing stores no `AgentTraceContext` and never loads
OpenTelemetry. With it, this module decides which spans exist and under which root, hands them to the
emitter complete, and keeps `AgentTraceContext` current. Tracing never fails or retries a Step: whatever
the emitter raises is logged and the span is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar, cast

from dex import AsyncContext

from dex_agents._tracing._spans import (
    ActivationSpan,
    MessageRange,
    ModelCallSpan,
    StepSpanContext,
    ToolCallContent,
    ToolCallSpan,
    TraceEmitter,
)
from dex_agents.compaction import ContextSummaryResult
from dex_agents.persistence import AGENT_TRACE_CONTEXT
from dex_agents.runner import DeferredToolCall, ModelCallMetadata, ToolCallsRequested
from dex_agents.session._errors import RunnerCallError, describe_exception
from dex_agents.session._message_reads import read_messages
from dex_agents.session._state import read_state, read_tool_call
from dex_agents.values import AgentMessage, AgentToolCall, AgentUsage, MessageRole, ToolCallStatus

__all__ = ["SessionTracing"]

_logger = logging.getLogger("dex_agents.otel")

OutcomeT = TypeVar("OutcomeT")
DecisionT = TypeVar("DecisionT")

_UNSET = object()
_FAILED_STATUSES = frozenset({ToolCallStatus.FAILED, ToolCallStatus.OUTCOME_UNKNOWN})


def _error_type(error: BaseException) -> str:
    """A low-cardinality name for what failed an attempt: the runner's own exception type when wrapped."""
    if isinstance(error, asyncio.CancelledError):
        return "cancelled"
    cause = error.__cause__ if isinstance(error, RunnerCallError) and error.__cause__ is not None else error
    kind = type(cause)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _error_message(error: BaseException) -> str:
    return "cancelled" if isinstance(error, asyncio.CancelledError) else describe_exception(error)


def _split_stored_output(
    stored: Sequence[AgentMessage],
) -> tuple[tuple[AgentMessage, ...], tuple[AgentMessage, ...]]:
    """Split what an attempt stored into what the model had received and what this call produced.

    A model call produces assistant items only, after everything it received; a runner that stores a
    turn's items when the turn ends stores the earlier calls' tool calls and the tool results first. So
    the call's own output is the trailing run of assistant messages, and the rest was its input.
    """
    cut = len(stored)
    while cut > 0 and stored[cut - 1].role is MessageRole.ASSISTANT:
        cut -= 1
    return tuple(stored[:cut]), tuple(stored[cut:])


def _tool_response(record: AgentToolCall) -> str:
    """The result of a final tool call as the model receives it, or the reason it has none."""
    if record.status is ToolCallStatus.SUCCEEDED and record.output is not None:
        return record.output
    return record.error or record.rejection_message or record.status.value


def _received_tool_calls(
    messages: Sequence[AgentMessage], records: Sequence[AgentToolCall]
) -> tuple[ToolCallContent, ...]:
    """The turn's final tool calls whose results reached the model but no message in ``messages`` holds."""
    answered = {message.tool_call_id for message in messages if message.role is MessageRole.TOOL}
    ordered = sorted(records, key=lambda record: record.deferral_order)
    return tuple(
        ToolCallContent(record.tool_call_id, record.tool_name, record.arguments, _tool_response(record))
        for record in ordered
        if record.is_final and record.tool_call_id not in answered
    )


def _requested_tool_calls(produced: Sequence[AgentMessage], outcome: object) -> tuple[ToolCallContent, ...]:
    """The tool calls an outcome asks for that no produced message holds (the runner keeps them)."""
    if not isinstance(outcome, ToolCallsRequested):
        return ()
    stored = {message.tool_call_id for message in produced if message.tool_name}
    return tuple(
        ToolCallContent(call.tool_call_id, call.tool_name, call.arguments)
        for call in outcome.tool_calls
        if isinstance(call, DeferredToolCall)  # pyright: ignore[reportUnnecessaryIsInstance]
        and call.tool_call_id not in stored
    )


class SessionTracing:
    """The tracing calls of one session Flow type's Steps.

    Args:
        emitter: `AgentSessionOptions.tracing`; `None` turns every call into a pass-through.
        flow_type: The Flow type, the agent name when the emitter names none.
        describe_tool: The runner's `ToolDescriber.describe_tool`, when it has one.
    """

    def __init__(
        self,
        emitter: TraceEmitter | None,
        flow_type: str,
        describe_tool: Callable[[str], str | None] | None = None,
    ) -> None:
        self._emitter = emitter
        self._flow_type = flow_type
        self._describe_tool = describe_tool

    def begin_activation(self, context: AsyncContext, turn_id: str | None) -> str | None:
        """Emit the root of the activation this Step attempt starts, and make it the session's current root.

        The root links to the previous one. Its traceparent is stored in `AgentTraceContext` when its
        context is valid, sampled or not; otherwise a stored value is deleted, so the activation's spans do
        not join an older trace.

        Returns:
            The root's traceparent, or `None` without tracing or without a valid root.
        """
        emitter = self._emitter
        if emitter is None:
            return None
        previous = self.current_root(context)
        now = time.time_ns()
        step = self._step(context, turn_id)
        root: str | None = None
        try:
            emitted = emitter.emit_activation(ActivationSpan(step, now, now, previous))
            root = emitted if isinstance(emitted, str) and emitted else None  # pyright: ignore[reportUnnecessaryIsInstance]
        except Exception as error:
            self._skipped("invoke_agent span", step, error)
        try:
            if root is not None:
                AGENT_TRACE_CONTEXT.set(context, root)
            elif previous is not None:
                AGENT_TRACE_CONTEXT.delete(context)
        except Exception as error:
            self._skipped("AgentTraceContext write", step, error)
        return root

    def current_root(self, context: AsyncContext) -> str | None:
        """The current activation root's traceparent, which `RunModel` copies onto each tool call record."""
        if self._emitter is None:
            return None
        try:
            return cast(str | None, AGENT_TRACE_CONTEXT.get(context)) or None
        except Exception as error:
            _logger.warning("tracing could not read AgentTraceContext of %s: %s", context.flow_id, error)
            return None

    async def trace_model_call(
        self,
        context: AsyncContext,
        turn_id: str,
        input_messages: Sequence[AgentMessage],
        call: Callable[[], Awaitable[OutcomeT]],
        store: Callable[[OutcomeT], Awaitable[DecisionT]],
        tool_calls: Sequence[AgentToolCall] = (),
    ) -> DecisionT:
        """Run ``call`` and ``store`` its outcome, emitting one ``chat`` span for the attempt when it ends.

        The span joins the root in `AgentTraceContext`; without one it is skipped. It references the
        messages the runner received and the ones the attempt stored, and the outcome's usage and
        `ModelCallMetadata`. An attempt that fails or is cancelled emits its span with the error.

        Args:
            context: The Step attempt's context.
            turn_id: The turn the call works for.
            input_messages: The stored messages the runner receives.
            call: Calls the runner.
            store: Stores the runner's outcome and returns the Step's decision.
            tool_calls: The turn's tool call records, all final, whose results the model receives.
        """
        parent = self.current_root(context)
        if self._emitter is None or parent is None:
            return await store(await call())
        start_ns = time.time_ns()
        first_output = self._next_sequence(context)
        outcome: object = _UNSET
        try:
            result = await self._under(parent, call)
            outcome = result
            decision = await store(result)
        except BaseException as error:
            self._emit_model_call(
                context, turn_id, parent, start_ns, input_messages, tool_calls, first_output, outcome, error
            )
            raise
        self._emit_model_call(
            context, turn_id, parent, start_ns, input_messages, tool_calls, first_output, outcome, None
        )
        return decision

    async def trace_tool_call(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        run: Callable[[], Awaitable[DecisionT]],
    ) -> DecisionT:
        """Run the tool through ``run``, emitting one ``execute_tool`` span under the record's root.

        A record without a root (tracing was off when `RunModel` stored it) gets no span.
        """
        emitter = self._emitter
        parent = record.trace_context
        if emitter is None or parent is None:
            return await run()
        start_ns = time.time_ns()
        try:
            decision = await self._under(parent, run)
        except BaseException as error:
            self._emit_tool_call(context, record, parent, start_ns, None, error)
            raise
        final: AgentToolCall | None = None
        try:
            final = read_tool_call(context, record.tool_call_id)
        except Exception as error:
            _logger.warning("tracing could not read tool call %s: %s", record.tool_call_id, error)
        self._emit_tool_call(context, record, parent, start_ns, final, None)
        return decision

    async def _under(self, parent: str, work: Callable[[], Awaitable[OutcomeT]]) -> OutcomeT:
        """Run ``work`` with the activation root as the current span, unless tracing cannot set it."""
        emitter = self._emitter
        assert emitter is not None
        scope: AbstractContextManager[object] | None = None
        try:
            scope = emitter.parent_scope(parent)
            scope.__enter__()
        except Exception as error:
            _logger.warning(
                "tracing could not make %s the current span: %s", parent, describe_exception(error)
            )
            scope = None
        try:
            return await work()
        finally:
            if scope is not None:
                try:
                    scope.__exit__(None, None, None)
                except Exception as error:
                    _logger.warning(
                        "tracing could not restore the current span: %s", describe_exception(error)
                    )

    def _step(self, context: AsyncContext, turn_id: str | None) -> StepSpanContext:
        execution_id = context.step_execution_id
        return StepSpanContext(
            flow_type=self._flow_type,
            flow_id=context.flow_id,
            run_id=context.run_id,
            # Dex names executions "<StepType>-<n>".
            step_type=execution_id.rsplit("-", 1)[0],
            step_execution_id=execution_id,
            attempt=context.attempt,
            turn_id=turn_id,
        )

    @staticmethod
    def _next_sequence(context: AsyncContext) -> int:
        try:
            state = read_state(context)
        except Exception:
            return 0
        return 0 if state is None else state.next_message_sequence

    def _emit_model_call(
        self,
        context: AsyncContext,
        turn_id: str,
        parent: str,
        start_ns: int,
        input_messages: Sequence[AgentMessage],
        tool_calls: Sequence[AgentToolCall],
        first_output: int,
        outcome: object,
        error: BaseException | None,
    ) -> None:
        emitter = self._emitter
        assert emitter is not None
        step = self._step(context, turn_id)
        try:
            records_content = emitter.records_message_content
            usage = getattr(outcome, "usage", None)
            metadata = getattr(outcome, "model_call_metadata", None)
            # A failed attempt commits nothing, so it stored no output.
            next_output = self._next_sequence(context) if first_output and error is None else first_output
            stored: tuple[AgentMessage, ...] = ()
            if records_content and next_output > first_output:
                stored = tuple(read_messages(context, first_output - 1, next_output - 1))
            received, produced = _split_stored_output(stored)
            input_content = (*input_messages, *received) if records_content else ()
            tool_call_ids: tuple[str, ...] = ()
            if isinstance(outcome, ToolCallsRequested):
                tool_call_ids = tuple(
                    call.tool_call_id
                    for call in outcome.tool_calls
                    if isinstance(call, DeferredToolCall)  # pyright: ignore[reportUnnecessaryIsInstance]
                )
            summary = outcome.text if isinstance(outcome, ContextSummaryResult) else None
            span = ModelCallSpan(
                step=step,
                parent=parent,
                start_ns=start_ns,
                end_ns=time.time_ns(),
                # Usage belongs to the span only when it measures one model call.
                usage=usage if isinstance(usage, AgentUsage) and usage.model_calls == 1 else None,
                metadata=metadata if isinstance(metadata, ModelCallMetadata) else None,
                input_messages=MessageRange.of(input_messages),
                output_messages=MessageRange.between(first_output, next_output),
                tool_call_ids=tool_call_ids,
                input_content=input_content,
                output_content=produced,
                input_tool_calls=_received_tool_calls(input_content, tool_calls) if records_content else (),
                output_tool_calls=_requested_tool_calls(produced, outcome) if records_content else (),
                output_text=summary if records_content and isinstance(summary, str) else None,
                error_type=None if error is None else _error_type(error),
                error_message=None if error is None else _error_message(error),
            )
            emitter.emit_model_call(span)
        except Exception as emit_error:
            self._skipped("chat span", step, emit_error)

    def _tool_description(self, tool_name: str) -> str | None:
        describe = self._describe_tool
        if describe is None:
            return None
        try:
            description = describe(tool_name)
        except Exception as error:
            # A span attribute is never worth failing the tool Step over.
            _logger.warning("tracing could not describe tool %s: %s", tool_name, describe_exception(error))
            return None
        return description if isinstance(description, str) and description else None

    def _emit_tool_call(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        parent: str,
        start_ns: int,
        final: AgentToolCall | None,
        error: BaseException | None,
    ) -> None:
        emitter = self._emitter
        assert emitter is not None
        step = self._step(context, record.turn_id)
        try:
            records_content = emitter.records_message_content
            error_type: str | None = None
            error_message: str | None = None
            if error is not None:
                error_type, error_message = _error_type(error), _error_message(error)
            elif final is not None and final.status in _FAILED_STATUSES:
                error_type, error_message = final.status.value, final.error
            succeeded = final is not None and final.status is ToolCallStatus.SUCCEEDED
            span = ToolCallSpan(
                step=step,
                parent=parent,
                start_ns=start_ns,
                end_ns=time.time_ns(),
                tool_name=record.tool_name,
                tool_call_id=record.tool_call_id,
                effect=record.effect,
                status=None if error is not None or final is None else final.status,
                tool_description=self._tool_description(record.tool_name),
                arguments=record.arguments if records_content else None,
                result=final.output if records_content and succeeded and final is not None else None,
                error_type=error_type,
                error_message=error_message,
            )
            emitter.emit_tool_call(span)
        except Exception as emit_error:
            self._skipped("execute_tool span", step, emit_error)

    @staticmethod
    def _skipped(what: str, step: StepSpanContext, error: Exception) -> None:
        _logger.warning(
            "tracing skipped the %s of %s attempt %d in session %s: %s",
            what,
            step.step_type,
            step.attempt,
            step.flow_id,
            describe_exception(error),
        )
