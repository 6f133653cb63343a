"""`AgentTracing`: the session's spans as OpenTelemetry GenAI spans, through the OpenTelemetry API only."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeGuard

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.util.types import AttributeValue

from dex_agents._release import UNKNOWN_VERSION, installed_version
from dex_agents._tracing._spans import (
    ActivationSpan,
    MessageRange,
    ModelCallSpan,
    StepSpanContext,
    ToolCallSpan,
)
from dex_agents.otel import _conventions as names
from dex_agents.otel._content import (
    input_messages_json,
    output_messages_json,
    system_instructions_json,
    tool_definitions_json,
)
from dex_agents.otel._conventions import GenAIConventions, provider_attribute
from dex_agents.otel._traceparent import format_traceparent, parse_traceparent
from dex_agents.persistence import message_sequence_key
from dex_agents.runner import ModelCallMetadata, ModelRequestParameters
from dex_agents.values import ToolCallStatus

__all__ = ["CAPTURE_MESSAGE_CONTENT_ENV", "AgentTracing"]

#: The environment variable GenAI instrumentations read for content capture; `AgentTracing` honours it
#: when ``record_message_content`` is left `None`.
CAPTURE_MESSAGE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON = frozenset({"true", "1", "span_only", "span_and_event"})

_INSTRUMENTATION_NAME = "dex_agents"
_logger = logging.getLogger("dex_agents.otel")

_Attributes = dict[str, AttributeValue]


def _package_version() -> str | None:
    version = installed_version()
    return None if version == UNKNOWN_VERSION else version


@dataclass(frozen=True)
class AgentTracing:
    """OpenTelemetry GenAI spans for a session Flow type, for `AgentSessionOptions.tracing`.

    Each activation (a Step that takes an input from outside the session) is a trace whose root
    ``invoke_agent {agent}`` links to the previous activation's root; each model call attempt is a ``chat``
    span and each tool run attempt an ``execute_tool {tool}`` span in it. Spans go to the tracer provider
    given here, else to the global one (`opentelemetry.trace.set_tracer_provider`), looked up when a span
    is emitted, so configure the SDK in the Worker process before or after building the Flow. Without an
    SDK the API records nothing and the session stores no `AgentTraceContext`.

    Attributes:
        agent_name: ``gen_ai.agent.name`` and the root's name; the Flow type when `None`.
        provider_name: The provider as the conventions name it (``openai``, ``anthropic``, ...), for the
            root span and for ``chat`` spans whose runner reports none.
        conventions: The GenAI semantic conventions version; `GenAIConventions.LATEST` by default.
        record_message_content: Whether ``chat`` spans record the messages and ``execute_tool`` spans the
            arguments and results. `None` reads ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            (``true`` records); otherwise spans refer to content only by message sequence keys and tool call
            IDs.
        tracer_provider: The provider to use instead of the global one.

    Raises:
        ValueError: If ``record_message_content`` is `True` with `GenAIConventions.V1_36_0`, which has no
            content attributes, or ``agent_name`` or ``provider_name`` is empty.
    """

    agent_name: str | None = None
    provider_name: str | None = None
    conventions: GenAIConventions = GenAIConventions.LATEST
    record_message_content: bool | None = None
    tracer_provider: TracerProvider | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "conventions", GenAIConventions(self.conventions))
        for name in ("agent_name", "provider_name"):
            value: object = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ValueError(f"{name} must be non-empty text or None, got {value!r}")
        if self.record_message_content and not self.conventions.has_content_attributes:
            raise ValueError(
                f"record_message_content needs GenAIConventions.LATEST: conventions {self.conventions.value} "
                "record content as log events, which dex_agents.otel does not emit"
            )

    @cached_property
    def records_message_content(self) -> bool:
        """Whether spans record content: the option, else the environment variable (read once)."""
        if self.record_message_content is not None:
            return self.record_message_content
        wanted = os.environ.get(CAPTURE_MESSAGE_CONTENT_ENV, "").strip().lower() in _CONTENT_ON
        if wanted and not self.conventions.has_content_attributes:
            _logger.warning(
                "%s asks for message content, but conventions %s have no content attributes; "
                "spans refer to content by reference only",
                CAPTURE_MESSAGE_CONTENT_ENV,
                self.conventions.value,
            )
            return False
        return wanted

    @cached_property
    def _tracer(self) -> Tracer:
        # The global provider is a proxy until the application sets one, so this tracer follows it.
        provider = self.tracer_provider or trace.get_tracer_provider()
        return provider.get_tracer(
            _INSTRUMENTATION_NAME, _package_version(), schema_url=self.conventions.schema_url
        )

    # The TraceEmitter methods the session calls.

    @contextmanager
    def parent_scope(self, parent: str) -> Iterator[object]:
        """Make the stored root the current span while the runner works.

        Spans the framework, its model client or a tool start meanwhile join the activation's trace as
        children of its root, instead of starting traces of their own.
        """
        span_context = parse_traceparent(parent)
        if span_context is None:
            yield None
            return
        token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(span_context), Context()))
        try:
            yield None
        finally:
            otel_context.detach(token)

    def emit_activation(self, span: ActivationSpan) -> str | None:
        """Emit ``invoke_agent {agent}`` as a new trace's root, linked to the previous root.

        Returns:
            The root's traceparent when its context is valid, sampled or not; else `None`.
        """
        attributes = self._common(span.step, "invoke_agent")
        self._set_provider(attributes, self.provider_name)
        previous = None if span.previous_root is None else parse_traceparent(span.previous_root)
        root = self._tracer.start_span(
            f"invoke_agent {self._agent_name(span.step)}",
            # An empty context: the root starts a trace whatever span is current in the Worker.
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=[] if previous is None else [Link(previous)],
            start_time=span.start_ns,
        )
        root.end(end_time=span.end_ns)
        return format_traceparent(root.get_span_context())

    def emit_model_call(self, span: ModelCallSpan) -> None:
        """Emit ``chat {model}``: CLIENT with usage for one model call, INTERNAL without usage otherwise."""
        metadata = span.metadata
        attributes = self._common(span.step, "chat")
        self._set_provider(attributes, (metadata and metadata.provider_name) or self.provider_name)
        if metadata is not None:
            _set_text(attributes, names.GEN_AI_REQUEST_MODEL, metadata.request_model)
            _set_text(attributes, names.GEN_AI_RESPONSE_MODEL, metadata.response_model)
            _set_text(attributes, names.GEN_AI_RESPONSE_ID, metadata.response_id)
            reasons = [reason for reason in metadata.finish_reasons if isinstance(reason, str)]  # pyright: ignore[reportUnnecessaryIsInstance]
            if reasons:
                attributes[names.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
            self._set_request(attributes, metadata)
        usage = span.usage
        if usage is not None:
            attributes[names.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
            attributes[names.GEN_AI_USAGE_OUTPUT_TOKENS] = usage.output_tokens
            if self.conventions.has_token_detail_attributes:
                if usage.cached_input_tokens:
                    attributes[names.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cached_input_tokens
                if usage.reasoning_tokens:
                    attributes[names.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning_tokens
                created = None if metadata is None else metadata.cache_creation_input_tokens
                if _is_count(created):
                    attributes[names.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = created
        _set_range(attributes, span.input_messages, input_keys=True)
        _set_range(attributes, span.output_messages, input_keys=False)
        if span.tool_call_ids:
            attributes[names.DEX_AGENT_TOOL_CALL_IDS] = list(span.tool_call_ids)
        if self.records_message_content:
            self._set_model_call_content(attributes, span)
        model = metadata.request_model if metadata is not None else None
        self._emit(
            f"chat {model}" if model else "chat",
            span.parent,
            SpanKind.CLIENT if usage is not None else SpanKind.INTERNAL,
            attributes,
            span.start_ns,
            span.end_ns,
            span.error_type,
            span.error_message,
        )

    def emit_tool_call(self, span: ToolCallSpan) -> None:
        """Emit ``execute_tool {tool}`` (INTERNAL) under the record's root."""
        attributes = self._common(span.step, "execute_tool")
        attributes[names.GEN_AI_TOOL_NAME] = span.tool_name
        attributes[names.GEN_AI_TOOL_CALL_ID] = span.tool_call_id
        # The session runs every tool in its own Step on the client's side: a function in the conventions.
        attributes[names.GEN_AI_TOOL_TYPE] = "function"
        _set_text(attributes, names.GEN_AI_TOOL_DESCRIPTION, span.tool_description)
        attributes[names.DEX_TOOL_EFFECT] = span.effect.value
        if span.status is not None:
            attributes[names.DEX_TOOL_STATUS] = span.status.value
        if self.records_message_content:
            _set_text(attributes, names.GEN_AI_TOOL_CALL_ARGUMENTS, span.arguments)
            if span.status is ToolCallStatus.SUCCEEDED:
                _set_text(attributes, names.GEN_AI_TOOL_CALL_RESULT, span.result)
        self._emit(
            f"execute_tool {span.tool_name}",
            span.parent,
            SpanKind.INTERNAL,
            attributes,
            span.start_ns,
            span.end_ns,
            span.error_type,
            span.error_message,
        )

    # Helpers.

    def _agent_name(self, step: StepSpanContext) -> str:
        return self.agent_name or step.flow_type

    def _common(self, step: StepSpanContext, operation: str) -> _Attributes:
        attributes: _Attributes = {
            names.GEN_AI_OPERATION_NAME: operation,
            names.GEN_AI_AGENT_NAME: self._agent_name(step),
            names.GEN_AI_CONVERSATION_ID: step.flow_id,
            names.SESSION_ID: step.flow_id,
            names.DEX_FLOW_ID: step.flow_id,
            names.DEX_RUN_ID: step.run_id,
            names.DEX_STEP_TYPE: step.step_type,
            names.DEX_STEP_EXECUTION_ID: step.step_execution_id,
            names.DEX_STEP_ATTEMPT: step.attempt,
        }
        if step.turn_id is not None:
            attributes[names.DEX_AGENT_TURN_ID] = step.turn_id
        return attributes

    def _set_provider(self, attributes: _Attributes, provider_name: str | None) -> None:
        if provider_name:
            key, value = provider_attribute(self.conventions, provider_name)
            attributes[key] = value

    def _set_request(self, attributes: _Attributes, metadata: ModelCallMetadata) -> None:
        """The request's parameters, streaming and endpoint, each only when the runner reported it."""
        parameters = metadata.request_parameters
        if isinstance(parameters, ModelRequestParameters):  # pyright: ignore[reportUnnecessaryIsInstance]
            if _is_count(parameters.max_tokens):
                attributes[names.GEN_AI_REQUEST_MAX_TOKENS] = parameters.max_tokens
            for key, value in (
                (names.GEN_AI_REQUEST_TEMPERATURE, parameters.temperature),
                (names.GEN_AI_REQUEST_TOP_P, parameters.top_p),
                (names.GEN_AI_REQUEST_FREQUENCY_PENALTY, parameters.frequency_penalty),
                (names.GEN_AI_REQUEST_PRESENCE_PENALTY, parameters.presence_penalty),
            ):
                if isinstance(value, int | float) and not isinstance(value, bool):
                    attributes[key] = float(value)
            stops = [stop for stop in parameters.stop_sequences if isinstance(stop, str)]  # pyright: ignore[reportUnnecessaryIsInstance]
            if stops:
                attributes[names.GEN_AI_REQUEST_STOP_SEQUENCES] = stops
        if _set_text(attributes, names.SERVER_ADDRESS, metadata.server_address) and _is_count(
            metadata.server_port
        ):
            attributes[names.SERVER_PORT] = metadata.server_port
        if self.conventions.has_streaming_attributes and metadata.is_streaming is True:
            # Conditionally required only when streaming: an absent attribute means a non-streaming call.
            attributes[names.GEN_AI_REQUEST_STREAM] = True
            first_chunk = metadata.time_to_first_chunk_seconds
            if (
                isinstance(first_chunk, int | float)
                and not isinstance(first_chunk, bool)
                and first_chunk >= 0
            ):
                attributes[names.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = float(first_chunk)

    def _set_model_call_content(self, attributes: _Attributes, span: ModelCallSpan) -> None:
        metadata = span.metadata
        if metadata is not None:
            _set_text(
                attributes,
                names.GEN_AI_SYSTEM_INSTRUCTIONS,
                system_instructions_json(metadata.system_instructions),
            )
            _set_text(
                attributes, names.GEN_AI_TOOL_DEFINITIONS, tool_definitions_json(metadata.tool_definitions)
            )
        if span.input_content or span.input_tool_calls:
            attributes[names.GEN_AI_INPUT_MESSAGES] = input_messages_json(
                span.input_content, span.input_tool_calls
            )
        reasons = () if span.metadata is None else span.metadata.finish_reasons
        finish_reason = reasons[0] if reasons else ("tool_call" if span.tool_call_ids else "stop")
        output = output_messages_json(
            span.output_content, span.output_text, finish_reason, span.output_tool_calls
        )
        if output is not None:
            attributes[names.GEN_AI_OUTPUT_MESSAGES] = output

    def _emit(
        self,
        name: str,
        parent: str,
        kind: SpanKind,
        attributes: _Attributes,
        start_ns: int,
        end_ns: int,
        error_type: str | None,
        error_message: str | None,
    ) -> None:
        parent_context = parse_traceparent(parent)
        if parent_context is None:
            raise ValueError(f"the stored trace context {parent!r} is not a valid W3C traceparent")
        if error_type is not None:
            attributes[names.ERROR_TYPE] = error_type
        span = self._tracer.start_span(
            name,
            # The parent is the stored root, so the span shares the root's trace and sampling decision.
            context=trace.set_span_in_context(NonRecordingSpan(parent_context), Context()),
            kind=kind,
            attributes=attributes,
            start_time=start_ns,
        )
        if error_type is not None:
            span.set_status(Status(StatusCode.ERROR, error_message))
        span.end(end_time=end_ns)


def _set_text(attributes: _Attributes, key: str, value: object) -> bool:
    if isinstance(value, str) and value:
        attributes[key] = value
        return True
    return False


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _set_range(attributes: _Attributes, messages: MessageRange, *, input_keys: bool) -> None:
    first, last, count = (
        (names.DEX_AGENT_INPUT_FIRST_KEY, names.DEX_AGENT_INPUT_LAST_KEY, names.DEX_AGENT_INPUT_COUNT)
        if input_keys
        else (names.DEX_AGENT_OUTPUT_FIRST_KEY, names.DEX_AGENT_OUTPUT_LAST_KEY, names.DEX_AGENT_OUTPUT_COUNT)
    )
    attributes[count] = messages.count
    if messages.count:
        attributes[first] = message_sequence_key(messages.first_sequence)
        attributes[last] = message_sequence_key(messages.last_sequence)
