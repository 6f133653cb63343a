"""The scripted provider server, read by the real OpenAI client: answers, streams and faults."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from dex_agents.testing import (
    ModelCallScope,
    ProviderFault,
    ScriptedProviderServer,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    model_call_scope,
    read_provider_requests,
    scripted_provider_server,
)

pytestmark = pytest.mark.asyncio

SESSION = "provider-1"
LOOKUP = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "call-1")


_execution_prefix = ""


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptStore]:
    global _execution_prefix  # noqa: PLW0603
    _execution_prefix = tmp_path.name
    monkeypatch.setenv("DEX_AGENTS_TEST_STATE_DIR", str(tmp_path))
    yield ScriptStore(tmp_path)


def _client(max_retries: int = 2) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=scripted_provider_server().openai_base_url, api_key="sk-scripted", max_retries=max_retries
    )


def _scope(attempt: int = 1) -> ModelCallScope:
    # The server counts a call's requests for its whole process: each test's calls are its own.
    return ModelCallScope(SESSION, "turn-1", attempt, f"{_execution_prefix}-{attempt}")


async def test_chat_completions_answers_the_script_streamed_and_not(store: ScriptStore) -> None:
    store.set_turns(
        SESSION, [[ScriptedResponse(tool_calls=(LOOKUP,)), ScriptedResponse(text="A-1 has shipped today.")]]
    )
    client = _client()
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Where is A-1?"}]
    with model_call_scope(_scope()):
        first = await client.chat.completions.create(model="gpt-scripted", messages=messages)
    [call] = first.choices[0].message.tool_calls or []
    assert first.choices[0].finish_reason == "tool_calls"
    assert call.type == "function"
    assert (call.id, call.function.name, call.function.arguments) == (
        "call-1",
        "lookup_order",
        '{"order_id":"A-1"}',
    )
    assistant: ChatCompletionMessageParam = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments},
            }
        ],
    }
    messages.append(assistant)
    messages.append({"role": "tool", "tool_call_id": "call-1", "content": "shipped"})
    with model_call_scope(_scope()):
        stream = await client.chat.completions.create(
            model="gpt-scripted", messages=messages, stream=True, stream_options={"include_usage": True}
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "A-1 has shipped today."
    assert [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 10
    logged = store.invocations.read()
    assert logged[-1].model_input == (
        "user: Where is A-1?",
        'assistant calls lookup_order {"order_id":"A-1"} [call-1]',
        "tool lookup_order [call-1] ok: shipped",
    )


async def test_a_rate_limit_is_retried_by_the_client_after_retry_after(store: ScriptStore) -> None:
    fault = ProviderFault("rate_limit", retry_after_seconds=1.0)
    store.set_turns(SESSION, [[ScriptedResponse(text="Done.", provider_faults=(fault,))]])
    with model_call_scope(_scope()):
        answer = await _client().chat.completions.create(
            model="gpt-scripted", messages=[{"role": "user", "content": "Hi"}]
        )
    assert answer.choices[0].message.content == "Done."
    first, second = read_provider_requests(store.state_dir, SESSION)
    assert (first.fault, second.fault, second.request) == ("rate_limit", None, 2)
    assert second.at - first.at >= 1.0


async def test_a_cut_stream_fails_the_read_and_an_unfinished_one_has_no_finish_reason(
    store: ScriptStore,
) -> None:
    cut = ProviderFault("cut_stream")
    unfinished = ProviderFault("unfinished_stream", attempts=(2,))
    store.set_turns(
        SESSION,
        [[ScriptedResponse(text="It was an accident, so I refund it.", provider_faults=(cut, unfinished))]],
    )
    client = _client()
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hi"}]
    with model_call_scope(_scope(1)), pytest.raises(openai.APIError):
        stream = await client.chat.completions.create(model="gpt-scripted", messages=messages, stream=True)
        async for _ in stream:
            pass
    with model_call_scope(_scope(2)):
        stream = await client.chat.completions.create(model="gpt-scripted", messages=messages, stream=True)
        chunks = [chunk async for chunk in stream]
    assert all(chunk.choices[0].finish_reason is None for chunk in chunks if chunk.choices)
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == (
        "It was an accident, so I refund it."
    )


async def test_responses_api_streams_text_and_tool_calls_and_completes(store: ScriptStore) -> None:
    store.set_turns(SESSION, [[ScriptedResponse(text="Looking.", tool_calls=(LOOKUP,))]])
    with model_call_scope(_scope()):
        stream = await _client().responses.create(model="gpt-scripted", input="Where is A-1?", stream=True)
        events = [event async for event in stream]
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "Looking."
    [call] = [item for item in completed.response.output if item.type == "function_call"]
    assert (call.call_id, call.name, call.arguments) == ("call-1", "lookup_order", '{"order_id":"A-1"}')
    deltas = "".join(
        event.delta for event in events if event.type == "response.function_call_arguments.delta"
    )
    assert deltas == '{"order_id":"A-1"}'


@pytest.mark.parametrize(
    ("kind", "status", "error"),
    [("context_length", 400, openai.BadRequestError), ("server_error", 500, openai.InternalServerError)],
)
async def test_refusals_carry_the_providers_status_and_body(
    store: ScriptStore, kind: str, status: int, error: type[openai.APIStatusError]
) -> None:
    fault = ProviderFault(kind, requests=None)  # type: ignore[arg-type]
    store.set_turns(SESSION, [[ScriptedResponse(text="never", provider_faults=(fault,))]])
    with model_call_scope(_scope()), pytest.raises(error) as raised:
        await _client(max_retries=0).chat.completions.create(
            model="gpt-scripted", messages=[{"role": "user", "content": "Hi"}]
        )
    assert raised.value.status_code == status
    if kind == "context_length":
        assert raised.value.code == "context_length_exceeded"
    assert not store.invocations.read()  # a refused request never reached the model


async def test_a_request_outside_a_run_model_call_is_refused_by_name(store: ScriptStore) -> None:
    with pytest.raises(openai.BadRequestError, match="no RunModel call is registered"):
        await _client().chat.completions.create(
            model="gpt-scripted", messages=[{"role": "user", "content": "Hi"}]
        )


async def test_without_a_run_model_call_it_answers_by_the_conversations_position() -> None:
    unfinished = ProviderFault("unfinished_stream", requests=(1,))
    replies = [
        ScriptedResponse(tool_calls=(LOOKUP,)),
        ScriptedResponse(text="Shipped.", provider_faults=(unfinished,)),
    ]
    with ScriptedProviderServer(replies=replies) as server:
        client = openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="sk-scripted")
        first = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "A-1?"}]
        )
        [call] = first.choices[0].message.tool_calls or []
        assert call.id == "call-1"
        assistant: ChatCompletionMessageParam = {
            "role": "assistant",
            "tool_calls": [
                {"id": "call-1", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
            ],
        }
        messages: list[ChatCompletionMessageParam] = [
            {"role": "user", "content": "A-1?"},
            assistant,
            {"role": "tool", "tool_call_id": "call-1", "content": "shipped"},
        ]
        unfinished_answer = await client.chat.completions.create(model="m", messages=messages)
        again = await client.chat.completions.create(model="m", messages=messages)
    assert unfinished_answer.choices[0].finish_reason is None
    assert (again.choices[0].message.content, again.choices[0].finish_reason) == ("Shipped.", "stop")
    assert [request.fault for request in server.requests] == [None, "unfinished_stream", None]
