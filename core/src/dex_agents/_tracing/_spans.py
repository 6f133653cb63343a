"""What the session tells a trace emitter about each span, in plain values that need no OpenTelemetry.

The session decides which spans exist, when, under which root, and what they say about Dex (the Step,
the attempt, the stored messages); an emitter such as `dex_agents.otel.AgentTracing` decides how they look
in OpenTelemetry (names, kinds, convention attributes). Keeping the two apart lets `import dex_agents` and a
session without tracing run without loading OpenTelemetry at all.

Every span is handed over once, complete, when the Step attempt has finished its work: nothing stays open
across a durable wait, and a Worker that dies mid-attempt leaves no span behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dex_agents.runner import ModelCallMetadata
from dex_agents.values import AgentMessage, AgentUsage, ToolCallStatus, ToolEffect

__all__ = [
    "ActivationSpan",
    "MessageRange",
    "ModelCallSpan",
    "StepSpanContext",
    "ToolCallContent",
    "ToolCallSpan",
    "TraceEmitter",
]


@dataclass(frozen=True)
class StepSpanContext:
    """The Step attempt a span belongs to; every span carries it.

    Attributes:
        flow_type: The session's Flow type, the default agent name.
        flow_id: The session ID.
        run_id: The Dex run ID.
        step_type: The Step's type name, such as ``RunModel``.
        step_execution_id: The Step execution's ID.
        attempt: The one-based attempt.
        turn_id: The turn the Step works for, when it has one.
    """

    flow_type: str
    flow_id: str
    run_id: str
    step_type: str
    step_execution_id: str
    attempt: int
    turn_id: str | None


@dataclass(frozen=True)
class MessageRange:
    """Stored messages by reference: the first and last sequence and how many there are.

    Attributes:
        first_sequence: The first message's sequence; 0 when the range is empty.
        last_sequence: The last message's sequence; 0 when the range is empty.
        count: How many messages the range holds.
    """

    first_sequence: int = 0
    last_sequence: int = 0
    count: int = 0

    @classmethod
    def of(cls, messages: Sequence[AgentMessage]) -> MessageRange:
        """Return the range of ``messages``, which are in sequence order."""
        if not messages:
            return cls()
        return cls(messages[0].sequence, messages[-1].sequence, len(messages))

    @classmethod
    def between(cls, first_sequence: int, next_sequence: int) -> MessageRange:
        """Return the range from ``first_sequence`` up to, not including, ``next_sequence``."""
        if next_sequence <= first_sequence:
            return cls()
        return cls(first_sequence, next_sequence - 1, next_sequence - first_sequence)


@dataclass(frozen=True)
class ToolCallContent:
    """A tool call the model saw or made that no stored message of the span carries.

    A runner that keeps a turn's items in its run state stores them only when the turn ends, so a model
    call's own tool calls, and the earlier calls and results it received, are known from the outcome and
    the turn's tool call records.

    Attributes:
        tool_call_id: The call's ID.
        tool_name: The tool's name.
        arguments: The call's arguments as JSON text.
        response: What the model received as the call's result; `None` for a call the model made.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    response: str | None = None


@dataclass(frozen=True)
class ActivationSpan:
    """The root of an activation: a Step that consumed an input from outside the session.

    Attributes:
        step: The activating Step attempt.
        start_ns: When the span starts, in nanoseconds since the epoch.
        end_ns: When it ends.
        previous_root: The traceparent of the previous activation's root, which the new root links to.
    """

    step: StepSpanContext
    start_ns: int
    end_ns: int
    previous_root: str | None


@dataclass(frozen=True)
class ModelCallSpan:
    """One `RunModel` or `CompactContext` attempt that called the runner.

    Attributes:
        step: The Step attempt.
        parent: The traceparent of the activation root the span joins.
        start_ns: When the runner call started.
        end_ns: When the attempt stored its outcome or failed.
        usage: The runner's usage when it reports exactly one model call; `None` otherwise.
        metadata: What the runner reported about the call.
        input_messages: The stored messages the runner received.
        output_messages: The messages the attempt stored.
        tool_call_ids: The tool calls the model asked for, in model order.
        input_content: What the model received, only when the emitter records content: the stored input
            messages, then the turn's earlier stored items the attempt stored (tool results the model
            received before this call), in sequence order.
        input_tool_calls: The turn's earlier tool calls and results the model received that no message
            in ``input_content`` carries, only when the emitter records content.
        output_content: The stored messages the model produced in this call, only when the emitter
            records content.
        output_tool_calls: The tool calls the model asked for that ``output_content`` does not carry,
            only when the emitter records content.
        output_text: The summary a `CompactContext` attempt wrote, only when the emitter records content.
        error_type: The exception type that failed the attempt, if it failed.
        error_message: Its message.
    """

    step: StepSpanContext
    parent: str
    start_ns: int
    end_ns: int
    usage: AgentUsage | None
    metadata: ModelCallMetadata | None
    input_messages: MessageRange
    output_messages: MessageRange
    tool_call_ids: tuple[str, ...] = ()
    input_content: tuple[AgentMessage, ...] = ()
    output_content: tuple[AgentMessage, ...] = ()
    input_tool_calls: tuple[ToolCallContent, ...] = ()
    output_tool_calls: tuple[ToolCallContent, ...] = ()
    output_text: str | None = None
    error_type: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class ToolCallSpan:
    """One tool Step attempt that ran the tool.

    Attributes:
        step: The Step attempt.
        parent: The traceparent of the record's activation root.
        start_ns: When the tool started.
        end_ns: When the attempt recorded the result or failed.
        tool_name: The tool's name.
        tool_call_id: The call's ID.
        effect: The tool's effect class.
        status: The record's status when the attempt ended; `None` when the attempt failed.
        tool_description: What the tool does, when the runner describes it.
        arguments: The call's JSON arguments, only when the emitter records content.
        result: The tool's output, only when the emitter records content and the call succeeded.
        error_type: The exception type that failed the attempt, or the final status of a call that failed.
        error_message: Its message.
    """

    step: StepSpanContext
    parent: str
    start_ns: int
    end_ns: int
    tool_name: str
    tool_call_id: str
    effect: ToolEffect
    status: ToolCallStatus | None
    tool_description: str | None = None
    arguments: str | None = None
    result: str | None = None
    error_type: str | None = None
    error_message: str | None = None


@runtime_checkable
class TraceEmitter(Protocol):
    """What `AgentSessionOptions.tracing` must be: `dex_agents.otel.AgentTracing` implements it.

    The session calls these methods from Step attempts, catches and logs whatever they raise, and never
    lets them fail or retry a Step.
    """

    @property
    def records_message_content(self) -> bool:
        """Whether the session should hand over message and tool content, not only references."""
        ...

    def parent_scope(self, parent: str) -> AbstractContextManager[object]:
        """Make ``parent`` the current span while the runner works, so spans it starts join that trace."""
        ...

    def emit_activation(self, span: ActivationSpan) -> str | None:
        """Emit an activation root and return its traceparent, or `None` when it has no valid context."""
        ...

    def emit_model_call(self, span: ModelCallSpan) -> None:
        """Emit a ``chat`` span under ``span.parent``."""
        ...

    def emit_tool_call(self, span: ToolCallSpan) -> None:
        """Emit an ``execute_tool`` span under ``span.parent``."""
        ...
