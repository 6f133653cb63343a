"""dex_agents.otel without a server: span names, kinds, attributes and content, in memory."""

import json
import subprocess
import sys

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ParentBased
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode

from dex_agents import (
    AgentMessage,
    AgentSessionOptions,
    AgentUsage,
    MessageRole,
    ModelCallMetadata,
    ModelRequestParameters,
    ModelToolDescription,
    ToolCallStatus,
    ToolEffect,
)
from dex_agents._tracing._spans import (
    ActivationSpan,
    MessageRange,
    ModelCallSpan,
    StepSpanContext,
    ToolCallContent,
    ToolCallSpan,
    TraceEmitter,
)
from dex_agents.otel import CAPTURE_MESSAGE_CONTENT_ENV, AgentTracing, GenAIConventions
from dex_agents.otel._traceparent import format_traceparent, parse_traceparent

STEP = StepSpanContext(
    flow_type="OrderDesk",
    flow_id="session-1",
    run_id="run-1",
    step_type="RunModel",
    step_execution_id="RunModel-2",
    attempt=2,
    turn_id="turn-1",
)
ROOT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
COMMON = {
    "gen_ai.conversation.id": "session-1",
    "session.id": "session-1",
    "dex.flow.id": "session-1",
    "dex.run.id": "run-1",
    "dex.step.type": "RunModel",
    "dex.step.execution_id": "RunModel-2",
    "dex.step.attempt": 2,
    "dex.agent.turn.id": "turn-1",
}


def _tracing(*, sampler: object = None, **options: object) -> tuple[AgentTracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider() if sampler is None else TracerProvider(sampler=sampler)  # pyright: ignore[reportArgumentType]
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return AgentTracing(tracer_provider=provider, **options), exporter  # pyright: ignore[reportArgumentType]


def _message(sequence: int, role: MessageRole, **fields: str) -> AgentMessage:
    values: dict[str, str | None] = {
        "text": None,
        "tool_call_id": None,
        "tool_name": None,
        "tool_arguments": None,
        "tool_output": None,
    }
    values.update(fields)
    return AgentMessage(
        sequence=sequence,
        turn_id="turn-1",
        role=role,
        framework_item="{}",
        created_at="2026-01-01T00:00:00.000Z",
        **values,
    )


def _model_call(**fields: object) -> ModelCallSpan:
    values: dict[str, object] = {
        "step": STEP,
        "parent": ROOT,
        "start_ns": 1_000,
        "end_ns": 2_000,
        "usage": AgentUsage(model_calls=1, input_tokens=120, output_tokens=30, cached_input_tokens=100),
        "metadata": ModelCallMetadata(
            request_model="gpt-test",
            response_model="gpt-test-2026",
            provider_name="azure.ai.openai",
            response_id="resp-1",
            finish_reasons=["tool_calls"],
        ),
        "input_messages": MessageRange(1, 3, 3),
        "output_messages": MessageRange(4, 5, 2),
        "tool_call_ids": ("call-1",),
    }
    values.update(fields)
    return ModelCallSpan(**values)  # pyright: ignore[reportArgumentType]


def _only(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = exporter.get_finished_spans()
    assert len(spans) == 1, spans
    return spans[0]


def test_import_dex_agents_and_build_a_session_flow_without_loading_opentelemetry() -> None:
    # fastapi in the dev environment installs opentelemetry-api, so only sys.modules can tell.
    code = (
        "import sys, dex_agents, dex_agents.testing\n"
        "from dex_agents.testing import ScriptedRunner, matrix_session_options\n"
        "dex_agents.AgentSessionFlow(ScriptedRunner(), flow_type='T', options=matrix_session_options())\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'opentelemetry'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_otel_exports_are_pinned() -> None:
    import dex_agents.otel

    assert dex_agents.otel.__all__ == ["CAPTURE_MESSAGE_CONTENT_ENV", "AgentTracing", "GenAIConventions"]
    assert [item.value for item in GenAIConventions] == ["1.42.0-dev", "1.36.0"]


def test_without_the_extra_the_import_names_the_install_command() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if opentelemetry-api were not installed\n"
        "try:\n"
        "    import dex_agents.otel\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == (
        "dex_agents.otel needs the OpenTelemetry API (opentelemetry-api), which is not installed: "
        'pip install "dex-agents[otel]"'
    )


def test_agent_tracing_is_what_session_options_take_and_other_values_are_refused() -> None:
    tracing = AgentTracing(agent_name="order-desk")
    assert isinstance(tracing, TraceEmitter)
    assert AgentSessionOptions(tracing=tracing).tracing is tracing
    with pytest.raises(TypeError, match=r"tracing must be a dex_agents\.otel\.AgentTracing, got str"):
        AgentSessionOptions(tracing="otel")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="agent_name must be non-empty"):
        AgentTracing(agent_name=" ")
    with pytest.raises(ValueError, match=r"record_message_content needs GenAIConventions\.LATEST"):
        AgentTracing(conventions=GenAIConventions.V1_36_0, record_message_content=True)
    assert AgentTracing(conventions="1.36.0").conventions is GenAIConventions.V1_36_0  # pyright: ignore[reportArgumentType]


def test_message_content_follows_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE_MESSAGE_CONTENT_ENV, "True")
    assert AgentTracing().records_message_content
    assert not AgentTracing(record_message_content=False).records_message_content
    # 1.36.0 has no content attributes: the environment cannot turn them on.
    assert not AgentTracing(conventions=GenAIConventions.V1_36_0).records_message_content
    monkeypatch.setenv(CAPTURE_MESSAGE_CONTENT_ENV, "false")
    assert not AgentTracing().records_message_content
    monkeypatch.delenv(CAPTURE_MESSAGE_CONTENT_ENV)
    assert not AgentTracing().records_message_content


def test_traceparent_round_trip_keeps_the_sampling_flag_and_refuses_invalid_text() -> None:
    for text in (ROOT, ROOT[:-2] + "00"):
        context = parse_traceparent(text)
        assert context is not None and context.is_remote
        assert format_traceparent(context) == text
    for bad in ("", "01-" + ROOT[3:], ROOT.upper(), "00-" + "0" * 32 + "-b7ad6b7169203331-01", ROOT + "-x"):
        assert parse_traceparent(bad) is None


def test_activation_root_starts_a_trace_linked_to_the_previous_root() -> None:
    tracing, exporter = _tracing(agent_name="order-desk", provider_name="openai")
    root = tracing.emit_activation(ActivationSpan(STEP, 10, 20, previous_root=ROOT))
    span = _only(exporter)
    context = span.get_span_context()
    assert context is not None
    assert root == f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert int(context.trace_flags) & 1  # sampled
    assert span.parent is None and span.name == "invoke_agent order-desk" and span.kind is SpanKind.INTERNAL
    assert (span.start_time, span.end_time) == (10, 20)
    assert [f"00-{link.context.trace_id:032x}-{link.context.span_id:016x}-01" for link in span.links] == [
        ROOT
    ]
    assert context.trace_id != int(ROOT.split("-")[1], 16)
    assert dict(span.attributes or {}) == {
        **COMMON,
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "order-desk",
        "gen_ai.provider.name": "openai",
    }


def test_an_unsampled_root_still_has_a_context_and_no_sdk_has_none() -> None:
    tracing, exporter = _tracing(sampler=ParentBased(ALWAYS_OFF))
    root = tracing.emit_activation(ActivationSpan(STEP, 10, 20, previous_root=None))
    assert root is not None and not int(root[-2:], 16) & 1  # valid, not sampled
    tracing.emit_model_call(_model_call(parent=root))
    assert not exporter.get_finished_spans()
    # Without an SDK the API hands out invalid contexts: nothing to store.
    assert (
        AgentTracing(tracer_provider=NoOpTracerProvider()).emit_activation(ActivationSpan(STEP, 1, 2, None))
        is None
    )


def test_chat_span_is_a_client_span_with_usage_and_model_metadata() -> None:
    tracing, exporter = _tracing(agent_name="order-desk", provider_name="openai")
    tracing.emit_model_call(_model_call(usage=AgentUsage(1, 120, 30, 100, 7)))
    span = _only(exporter)
    assert span.name == "chat gpt-test" and span.kind is SpanKind.CLIENT
    assert span.parent is not None and f"{span.parent.span_id:016x}" == ROOT.split("-")[2]
    assert dict(span.attributes or {}) == {
        **COMMON,
        "gen_ai.operation.name": "chat",
        "gen_ai.agent.name": "order-desk",
        # The runner's provider wins over the configured one.
        "gen_ai.provider.name": "azure.ai.openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.model": "gpt-test-2026",
        "gen_ai.response.id": "resp-1",
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.reasoning.output_tokens": 7,
        "dex.agent.input_messages.first_key": "000000000001",
        "dex.agent.input_messages.last_key": "000000000003",
        "dex.agent.input_messages.count": 3,
        "dex.agent.output_messages.first_key": "000000000004",
        "dex.agent.output_messages.last_key": "000000000005",
        "dex.agent.output_messages.count": 2,
        "dex.agent.tool_call_ids": ("call-1",),
    }
    assert span.status.status_code is StatusCode.UNSET


def test_chat_span_without_one_model_call_is_internal_without_usage_and_named_chat() -> None:
    tracing, exporter = _tracing()
    tracing.emit_model_call(_model_call(usage=None, metadata=None, tool_call_ids=()))
    span = _only(exporter)
    assert span.name == "chat" and span.kind is SpanKind.INTERNAL
    attributes = dict(span.attributes or {})
    assert not [key for key in attributes if key.startswith("gen_ai.usage.")]
    assert attributes["gen_ai.agent.name"] == "OrderDesk"  # the Flow type by default
    assert "gen_ai.provider.name" not in attributes and "dex.agent.tool_call_ids" not in attributes


def test_compatibility_conventions_name_the_provider_gen_ai_system_and_drop_newer_attributes() -> None:
    tracing, exporter = _tracing(conventions=GenAIConventions.V1_36_0)
    tracing.emit_model_call(_model_call(usage=AgentUsage(1, 120, 30, 100, 7)))
    attributes = dict(_only(exporter).attributes or {})
    assert attributes["gen_ai.system"] == "az.ai.openai"
    assert "gen_ai.provider.name" not in attributes
    assert "gen_ai.usage.cache_read.input_tokens" not in attributes
    assert "gen_ai.usage.reasoning.output_tokens" not in attributes
    assert attributes["gen_ai.usage.input_tokens"] == 120
    assert _only(exporter).instrumentation_scope.schema_url == "https://opentelemetry.io/schemas/1.36.0"  # pyright: ignore[reportOptionalMemberAccess]


def test_failed_attempt_records_the_error_type_and_status() -> None:
    tracing, exporter = _tracing()
    tracing.emit_model_call(
        _model_call(usage=None, error_type="ConnectionError", error_message="ConnectionError: reset")
    )
    span = _only(exporter)
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "ConnectionError: reset"
    assert (span.attributes or {})["error.type"] == "ConnectionError"


def test_content_is_by_reference_unless_recorded() -> None:
    messages = (
        _message(1, MessageRole.USER, text="Where is order A-1?"),
        _message(
            2, MessageRole.ASSISTANT, tool_call_id="c1", tool_name="lookup", tool_arguments='{"id":"A-1"}'
        ),
        _message(3, MessageRole.TOOL, tool_call_id="c1", tool_name="lookup", tool_output="shipped"),
    )
    answer = (_message(4, MessageRole.ASSISTANT, text="It shipped."),)
    by_reference, exporter = _tracing()
    by_reference.emit_model_call(_model_call(input_content=messages, output_content=answer))
    attributes = dict(_only(exporter).attributes or {})
    assert "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes
    assert "Where is order" not in json.dumps(attributes, default=str)
    recording, exporter = _tracing(record_message_content=True)
    recording.emit_model_call(_model_call(input_content=messages, output_content=answer))
    attributes: dict[str, object] = dict(_only(exporter).attributes or {})
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "Where is order A-1?"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"id": "A-1"}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "shipped"}]},
    ]
    assert json.loads(str(attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It shipped."}],
            "finish_reason": "tool_calls",
        }
    ]


def test_tool_span_names_the_tool_and_records_arguments_and_result_only_when_asked() -> None:
    call = ToolCallSpan(
        step=StepSpanContext("OrderDesk", "session-1", "run-1", "CallTool", "CallTool-1", 1, "turn-1"),
        parent=ROOT,
        start_ns=5,
        end_ns=9,
        tool_name="lookup_order",
        tool_call_id="c1",
        effect=ToolEffect.READ,
        status=ToolCallStatus.SUCCEEDED,
        tool_description="Look an order up.",
        arguments='{"order_id":"A-1"}',
        result="shipped",
    )
    tracing, exporter = _tracing(record_message_content=True)
    tracing.emit_tool_call(call)
    span = _only(exporter)
    assert span.name == "execute_tool lookup_order" and span.kind is SpanKind.INTERNAL
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gen_ai.tool.name"] == "lookup_order" and attributes["gen_ai.tool.call.id"] == "c1"
    assert attributes["dex.tool.effect"] == "read" and attributes["dex.tool.status"] == "succeeded"
    assert attributes["gen_ai.tool.type"] == "function"
    assert attributes["gen_ai.tool.description"] == "Look an order up."
    assert attributes["gen_ai.tool.call.arguments"] == '{"order_id":"A-1"}'
    assert attributes["gen_ai.tool.call.result"] == "shipped"
    by_reference, exporter = _tracing()
    by_reference.emit_tool_call(call)
    attributes = dict(_only(exporter).attributes or {})
    assert "gen_ai.tool.call.arguments" not in attributes and "gen_ai.tool.call.result" not in attributes


def test_a_stored_context_that_is_not_a_traceparent_raises_for_the_session_to_log() -> None:
    tracing, exporter = _tracing()
    with pytest.raises(ValueError, match="not a valid W3C traceparent"):
        tracing.emit_model_call(_model_call(parent="garbage"))
    assert not exporter.get_finished_spans()


def test_spans_the_framework_starts_while_the_runner_works_join_the_activation_root() -> None:
    tracing, exporter = _tracing()
    assert tracing.tracer_provider is not None
    framework = tracing.tracer_provider.get_tracer("some.framework")
    with tracing.parent_scope(ROOT):
        framework.start_span("framework model call").end()
    framework.start_span("after the runner returned").end()
    inside, after = exporter.get_finished_spans()
    assert inside.parent is not None
    assert (f"{inside.parent.trace_id:032x}", f"{inside.parent.span_id:016x}") == tuple(ROOT.split("-")[1:3])
    assert after.parent is None


STREAMED = ModelCallMetadata(
    request_model="gpt-test",
    provider_name="openai",
    finish_reasons=["stop"],
    request_parameters=ModelRequestParameters(
        max_tokens=256,
        temperature=0.2,
        top_p=1,
        stop_sequences=["END"],
        frequency_penalty=0.5,
        presence_penalty=-0.5,
    ),
    is_streaming=True,
    server_address="llm.example.com",
    server_port=8443,
    time_to_first_chunk_seconds=0.25,
    cache_creation_input_tokens=40,
    system_instructions="You run the order desk.",
    tool_definitions=[
        ModelToolDescription("lookup", "Look an order up.", '{"type":"object","properties":{}}')
    ],
)


def test_chat_span_records_the_request_parameters_streaming_endpoint_and_cache_writes() -> None:
    tracing, exporter = _tracing()
    tracing.emit_model_call(_model_call(metadata=STREAMED))
    attributes = dict(_only(exporter).attributes or {})
    assert {key: value for key, value in attributes.items() if not key.startswith("dex.")} | COMMON == {
        **COMMON,
        "gen_ai.operation.name": "chat",
        "gen_ai.agent.name": "OrderDesk",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-test",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.request.max_tokens": 256,
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.top_p": 1.0,
        "gen_ai.request.stop_sequences": ("END",),
        "gen_ai.request.frequency_penalty": 0.5,
        "gen_ai.request.presence_penalty": -0.5,
        "gen_ai.request.stream": True,
        "gen_ai.response.time_to_first_chunk": 0.25,
        "server.address": "llm.example.com",
        "server.port": 8443,
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 40,
    }
    # Instructions and tool definitions are content: recorded only when the application opts in.
    assert "gen_ai.system_instructions" not in attributes and "gen_ai.tool.definitions" not in attributes


def test_unset_request_details_leave_their_attributes_off_and_1_36_0_has_no_streaming_attributes() -> None:
    tracing, exporter = _tracing()
    tracing.emit_model_call(_model_call(metadata=ModelCallMetadata(request_model="gpt-test")))
    attributes = dict(_only(exporter).attributes or {})
    assert [key for key in attributes if key.startswith(("gen_ai.request.", "server."))] == [
        "gen_ai.request.model"
    ]
    compat, exporter = _tracing(conventions=GenAIConventions.V1_36_0)
    compat.emit_model_call(_model_call(metadata=STREAMED))
    attributes = dict(_only(exporter).attributes or {})
    assert "gen_ai.request.stream" not in attributes
    assert "gen_ai.response.time_to_first_chunk" not in attributes
    assert "gen_ai.usage.cache_creation.input_tokens" not in attributes
    assert attributes["gen_ai.request.max_tokens"] == 256 and attributes["server.port"] == 8443


def test_recorded_content_has_the_instructions_tool_definitions_and_the_calls_no_message_holds() -> None:
    tracing, exporter = _tracing(record_message_content=True)
    tracing.emit_model_call(
        _model_call(
            metadata=STREAMED,
            input_content=(_message(1, MessageRole.USER, text="Where is A-1?"),),
            input_tool_calls=(ToolCallContent("c1", "lookup", '{"id":"A-1"}', "shipped"),),
            output_tool_calls=(ToolCallContent("c2", "notify", '{"id":"A-1"}'),),
        )
    )
    attributes = dict(_only(exporter).attributes or {})
    assert json.loads(str(attributes["gen_ai.system_instructions"])) == [
        {"type": "text", "content": "You run the order desk."}
    ]
    assert json.loads(str(attributes["gen_ai.tool.definitions"])) == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look an order up.",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    assert json.loads(str(attributes["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "Where is A-1?"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c1", "name": "lookup", "arguments": {"id": "A-1"}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "shipped"}]},
    ]
    assert json.loads(str(attributes["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "c2", "name": "notify", "arguments": {"id": "A-1"}}],
            "finish_reason": "stop",
        }
    ]
