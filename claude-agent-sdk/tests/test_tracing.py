"""A traced session's `chat` spans carry the model call metadata the Claude Code CLI streamed.

The traced agent (`tests.feature_agents`) writes every span its Worker emits to a file. One `RunModel` is
one CLI run: the first makes two model calls (a read runs inline between them), so its `chat` span is
INTERNAL without usage; the resumed one makes a single call, so its span is CLIENT with usage. Both name
the request model and carry the last response's model, ID and stop reason. With Claude Code's own
telemetry turned on, the CLI's spans join the trace of the span that is current while the runner works.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from dex_agents import TurnCompleted
from dex_agents.testing import ScriptedResponse, ScriptedToolCall, SessionSide, wait_for_turn_end, wait_until
from dex_agents.testing.genai_conventions import (
    CONVENTIONS_COMMIT,
    attribute_table,
    conventions_problems,
    load_conventions,
)
from dex_agents.testing.otel_spans import ExportedSpan, read_exported_spans
from opentelemetry.sdk.trace import TracerProvider

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from dex_agents_claude_agent_sdk.testing import ApiReply, ScriptedClaudeApi
from tests.conftest import Features
from tests.feature_agents import SPAN_FILE, TRACED_SYSTEM_PROMPT
from tests.scripted_claude import BASE_OPTIONS

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_chat_spans_carry_the_model_call_metadata(features: Features) -> None:
    stack, sessions = features.stack, features.traced
    session = stack.new_session_id("traced")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", output="A-1 shipped")
    receipt = ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1", output="receipt sent")
    stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(read,)),
                ScriptedResponse(tool_calls=(receipt,)),
                ScriptedResponse(text="Shipped; receipt sent."),
            ]
        ],
    )
    await sessions.start_session(session, "Where is A-1? Send me the receipt.")
    done = await wait_for_turn_end(sessions, session, 1, timeout=90)
    assert done.state is not None and done.state.last_turn_error is None, done.state

    span_file = stack.state_dir / SPAN_FILE

    def chat_spans() -> list[ExportedSpan] | None:
        spans = [span for span in read_exported_spans(span_file, session) if span.name.startswith("chat")]
        return spans if len(spans) == 2 else None

    first, resumed = await wait_until("two chat spans", chat_spans, timeout=30)
    model = BASE_OPTIONS.model
    for span in (first, resumed):
        assert span.name == f"chat {model}"
        assert span.attributes["gen_ai.request.model"] == model
        # The scripted API answers as the model it was asked for, with IDs msg_scripted_<n>.
        assert span.attributes["gen_ai.response.model"] == model
        assert span.attributes["gen_ai.provider.name"] == "anthropic"
        assert str(span.attributes["gen_ai.response.id"]).startswith("msg_scripted_")
    assert first.attributes["gen_ai.response.id"] != resumed.attributes["gen_ai.response.id"]
    # Two model calls in one CLI run: no single call to describe, so INTERNAL and no usage.
    assert first.kind == "INTERNAL" and "gen_ai.usage.input_tokens" not in first.attributes
    assert first.attributes["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert resumed.kind == "CLIENT" and resumed.attributes["gen_ai.usage.output_tokens"] == 5
    assert resumed.attributes["gen_ai.response.finish_reasons"] == ["end_turn"]
    every_span = read_exported_spans(span_file, session)
    # The deferred tool's span says what it does, in the words its `@tool` description gave the model.
    executions = [span for span in every_span if span.attribute("gen_ai.operation.name") == "execute_tool"]
    assert {span.name: span.attribute("gen_ai.tool.description") for span in executions} == {
        "execute_tool send_receipt": "Email the receipt of an order."
    }
    conventions = load_conventions()
    print(f"\nClaude Agent SDK, GenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, every_span))
    # The CLI streams every model call.
    assert conventions_problems(conventions, every_span, lambda span: span in (first, resumed)) == []
    for span in (first, resumed):
        assert span.attributes["gen_ai.request.stream"] is True
        # The endpoint the options point the CLI at (ANTHROPIC_BASE_URL: the scripted API on loopback).
        assert span.attributes["server.address"] == "127.0.0.1"
        assert span.attributes["server.port"] == first.attributes["server.port"]
        assert int(str(span.attributes["server.port"])) > 0
        instructions = json.loads(str(span.attributes["gen_ai.system_instructions"]))
        assert instructions == [{"type": "text", "content": TRACED_SYSTEM_PROMPT}]
        offered = json.loads(str(span.attributes["gen_ai.tool.definitions"]))
        assert {"lookup_order", "send_receipt"} <= {tool["name"] for tool in offered}
    # The scripted API reports the cache writes of each response; the one model call's span carries them.
    assert resumed.attributes["gen_ai.usage.cache_creation.input_tokens"] == 0
    receipt_call = {
        "type": "tool_call",
        "id": "receipt-1",
        "name": "send_receipt",
        "arguments": {"order_id": "A-1"},
    }
    assert [part for message in _content(first, "output") for part in message["parts"]] == [receipt_call]
    # The answering call received both results (the inline read's, and the receipt's from its tool Step)
    # and produced only the answer.
    received = _content(resumed, "input")
    assert received[0]["parts"] == [{"type": "text", "content": "Where is A-1? Send me the receipt."}]
    parts = [(part["type"], part["id"]) for message in received[1:] for part in message["parts"]]
    assert parts == [
        ("tool_call", "read-1"),
        ("tool_call_response", "read-1"),
        ("tool_call", "receipt-1"),
        ("tool_call_response", "receipt-1"),
    ]
    assert [part for message in _content(resumed, "output") for part in message["parts"]] == [
        {"type": "text", "content": "Shipped; receipt sent."}
    ]


def _content(span: ExportedSpan, direction: str) -> list[dict[str, Any]]:
    """A chat span's recorded ``gen_ai.input.messages`` or ``gen_ai.output.messages``."""
    return json.loads(str(span.attributes[f"gen_ai.{direction}.messages"]))


class _OtlpJsonReceiver:
    """An OTLP/HTTP JSON endpoint on loopback that keeps the spans it receives (name, trace, parent)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str]] = []
        self._server: asyncio.Server | None = None

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def __aenter__(self) -> _OtlpJsonReceiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_line = await reader.readline()
        length = 0
        while (line := (await reader.readline()).strip()) != b"":
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        body = json.loads(await reader.readexactly(length) or b"{}")
        if request_line.split()[1].endswith(b"/v1/traces"):
            for resource in body.get("resourceSpans", []):
                for scope in resource.get("scopeSpans", []):
                    for span in scope.get("spans", []):
                        self.spans.append((span["name"], span["traceId"], span.get("parentSpanId", "")))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()


async def test_claude_codes_own_spans_join_the_current_trace_when_its_telemetry_is_on() -> None:
    async with _OtlpJsonReceiver() as receiver:
        telemetry = {
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
            "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        }
        api = ScriptedClaudeApi([ApiReply(text="Hello.")])
        runner = ClaudeAgentRunner(api.options(dataclasses.replace(BASE_OPTIONS, env=telemetry)))
        session = SessionSide()
        session.start_turn(runner.build_user_message("Hi"))
        # The session's root is the current span while the runner works; a local provider stands in for it.
        with TracerProvider().get_tracer("test").start_as_current_span("invoke_agent order-desk") as root:
            outcome = await runner.run_model_step(session.context())
        await api.aclose()
        assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None, outcome
        context = root.get_span_context()
        trace_id, root_id = f"{context.trace_id:032x}", f"{context.span_id:016x}"

        def interaction() -> tuple[str, str, str] | None:
            return next((span for span in receiver.spans if span[0] == "claude_code.interaction"), None)

        assert await wait_until("the CLI's interaction span", interaction, timeout=30) == (
            "claude_code.interaction",
            trace_id,
            root_id,
        )
        assert all(span[1] == trace_id for span in receiver.spans), receiver.spans
