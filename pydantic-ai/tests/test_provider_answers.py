"""The runner on Pydantic AI's real provider models, reading provider answers from an in-memory transport.

Each test hands `run_model_step` an answer as the provider's HTTP API sends it (server-sent events, or an
error body) and asserts what the session gets: a final answer or tool calls only when the provider said
the answer finished, `UnfinishedModelResponse` (the attempt fails and `RunModel` retries it) when the
stream ended without a finish reason, `ContextWindowExceeded` for a context-length refusal, and a
``turn_error`` for a refusal every attempt would meet. The provider matrix (`test_provider_matrix`)
runs whole sessions through the same models against the scripted provider server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import httpx2
import pytest
from dex_agents import (
    ContextWindowExceeded,
    ToolCallsRequested,
    TurnCompleted,
    UnfinishedModelResponse,
)
from dex_agents.testing import SessionSide
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from dex_agents_pydantic_ai import PydanticAiRunner

Handler = Callable[[httpx2.Request], httpx2.Response]


def _sse(events: Sequence[tuple[str | None, object]], *, done: bool = False) -> bytes:
    lines: list[str] = []
    for event, data in events:
        if event is not None:
            lines.append(f"event: {event}")
        lines.append(f"data: {json.dumps(data)}")
        lines.append("")
    if done:
        lines += ["data: [DONE]", ""]
    return ("\n".join(lines) + "\n").encode()


def _stream(body: bytes) -> Handler:
    def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return handle


def _chat_model(handler: Handler) -> Model:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIChatModel(
        "gpt-4.1",
        provider=OpenAIProvider(base_url="http://provider.test/v1", api_key="sk-test", http_client=client),
    )


def _responses_model(handler: Handler) -> Model:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIResponsesModel(
        "gpt-4.1",
        provider=OpenAIProvider(base_url="http://provider.test/v1", api_key="sk-test", http_client=client),
    )


def _anthropic_model(handler: Handler) -> Model:
    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return AnthropicModel(
        "claude-sonnet-4-5",
        provider=AnthropicProvider(base_url="http://provider.test", api_key="sk-test", http_client=client),
    )


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


async def _model_step(model: Model) -> object:
    # No SDK retries: each answer below is what one request gets.
    runner = PydanticAiRunner(Agent(model, tools=[lookup_order]), model_settings=ModelSettings(max_retries=0))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Where is order 7?"))
    return await runner.run_model_step(session.context())


def _chat_chunk(delta: dict[str, object], finish_reason: str | None = None) -> tuple[None, object]:
    return None, {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4.1",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


_CHAT_TEXT = [_chat_chunk({"role": "assistant", "content": "It was "}), _chat_chunk({"content": "shipped"})]
_CHAT_TOOL_CALL = [
    _chat_chunk(
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_'},
                }
            ],
        }
    ),
    _chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'id": "7"}'}}]}),
]


async def test_a_chat_answer_is_final_only_with_a_finish_reason() -> None:
    finished = await _model_step(
        _chat_model(_stream(_sse([*_CHAT_TEXT, _chat_chunk({}, "stop")], done=True)))
    )
    assert isinstance(finished, TurnCompleted)
    assert finished.turn_error is None
    assert finished.new_messages[-1].text == "It was shipped"

    # Pydantic AI reads this one as finish_reason 'stop'; the provider never said so.
    with pytest.raises(UnfinishedModelResponse, match="without a finish reason"):
        await _model_step(_chat_model(_stream(_sse(_CHAT_TEXT, done=True))))
    # Nor with the connection closed before `[DONE]`.
    with pytest.raises(UnfinishedModelResponse):
        await _model_step(_chat_model(_stream(_sse(_CHAT_TEXT))))


async def test_chat_tool_calls_count_only_with_a_finish_reason() -> None:
    finished = await _model_step(
        _chat_model(_stream(_sse([*_CHAT_TOOL_CALL, _chat_chunk({}, "tool_calls")], done=True)))
    )
    assert isinstance(finished, ToolCallsRequested)
    assert [(call.tool_name, json.loads(call.arguments)) for call in finished.tool_calls] == [
        ("lookup_order", {"order_id": "7"})
    ]

    with pytest.raises(UnfinishedModelResponse):
        await _model_step(_chat_model(_stream(_sse(_CHAT_TOOL_CALL, done=True))))


def _response_event(kind: str, **fields: object) -> tuple[str, object]:
    return kind, {"type": kind, "sequence_number": 0, **fields}


def _response(status: str, output: list[object]) -> dict[str, object]:
    return {
        "id": "resp-1",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4.1",
        "status": status,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 5,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 2,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 7,
        },
    }


_MESSAGE: dict[str, object] = {
    "id": "msg-1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "It was shipped", "annotations": []}],
}
_RESPONSES_TEXT = [
    _response_event("response.created", response=_response("in_progress", [])),
    _response_event(
        "response.output_item.added",
        output_index=0,
        item={**_MESSAGE, "status": "in_progress", "content": []},
    ),
    _response_event(
        "response.output_text.delta",
        item_id="msg-1",
        output_index=0,
        content_index=0,
        delta="It was ",
        logprobs=[],
    ),
    _response_event(
        "response.output_text.delta",
        item_id="msg-1",
        output_index=0,
        content_index=0,
        delta="shipped",
        logprobs=[],
    ),
    _response_event("response.output_item.done", output_index=0, item=_MESSAGE),
]


async def test_a_responses_answer_is_final_only_after_response_completed() -> None:
    completed = _response_event("response.completed", response=_response("completed", [_MESSAGE]))
    finished = await _model_step(_responses_model(_stream(_sse([*_RESPONSES_TEXT, completed]))))
    assert isinstance(finished, TurnCompleted)
    assert finished.new_messages[-1].text == "It was shipped"

    with pytest.raises(UnfinishedModelResponse):
        await _model_step(_responses_model(_stream(_sse(_RESPONSES_TEXT))))


_ANTHROPIC_TEXT: list[tuple[str | None, object]] = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg-1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "It was "}},
    ),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "shipped"}},
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
]


async def test_an_anthropic_answer_is_final_only_with_a_stop_reason() -> None:
    ending: list[tuple[str | None, object]] = [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 2},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    finished = await _model_step(_anthropic_model(_stream(_sse([*_ANTHROPIC_TEXT, *ending]))))
    assert isinstance(finished, TurnCompleted)
    assert finished.new_messages[-1].text == "It was shipped"

    with pytest.raises(UnfinishedModelResponse):
        await _model_step(_anthropic_model(_stream(_sse(_ANTHROPIC_TEXT))))


def _error(status: int, body: object) -> Handler:
    def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json=body)

    return handle


async def test_a_context_length_refusal_raises_context_window_exceeded() -> None:
    openai_refusal = {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130000 tokens.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }
    with pytest.raises(ContextWindowExceeded):
        await _model_step(_chat_model(_error(400, openai_refusal)))
    anthropic_refusal = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
    }
    with pytest.raises(ContextWindowExceeded):
        await _model_step(_anthropic_model(_error(400, anthropic_refusal)))


async def test_a_refusal_every_attempt_would_meet_ends_the_turn_naming_it() -> None:
    unauthorized = {
        "error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": None}
    }
    outcome = await _model_step(_chat_model(_error(401, unauthorized)))
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None
    assert "401" in outcome.turn_error
    assert "Incorrect API key provided" in outcome.turn_error
