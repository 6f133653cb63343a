"""Provider faults the matrix does not cover, through ADK's `LiteLlm` on the scripted provider server.

Each test drives `run_model_step` in process, as a `RunModel` attempt does, with LiteLLM's real OpenAI or
Anthropic provider talking HTTP to `scripted_provider_server`: a non-streaming run (the matrix streams), a
first byte slower than the client's timeout, and a refused request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from dex_agents import UnfinishedModelResponse
from dex_agents.events import AgentEventType
from dex_agents.runner import TurnCompleted
from dex_agents.testing import (
    STATE_DIR_ENV,
    ProviderFault,
    ScriptedResponse,
    ScriptStore,
    SessionSide,
    read_provider_requests,
    scripted_provider_server,
    with_model_call_scope,
)
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import (
    RunConfig,
    StreamingMode,  # pyright: ignore[reportPrivateImportUsage]
)
from google.adk.apps import App
from google.adk.models.lite_llm import LiteLlm

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk._litellm_answers import provider_finished
from tests.provider_matrix_spec import Provider

pytestmark = [
    # Pydantic warns about LiteLLM 1.108.14's own types while it builds stream chunks in this process (the
    # Workers of the matrix do not turn warnings into errors); the warnings are LiteLLM's to fix.
    pytest.mark.filterwarnings(r"ignore:Item '\w+' on TypedDict class '\w+' is using the `ReadOnly`"),
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211"),
    # The scripted provider server's uvicorn 0.34 (the lowest versions) imports websockets' legacy API.
    pytest.mark.filterwarnings(r"ignore:websockets\..* is deprecated:DeprecationWarning"),
]

FINAL = "Order A-1 has shipped and arrives on Monday."


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptStore]:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    yield ScriptStore(tmp_path)


def build_runner(provider: Provider, *, stream: bool, **model_arguments: object) -> GoogleAdkRunner:
    server = scripted_provider_server()
    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    model = LiteLlm(
        model=f"{provider}/scripted-model", api_base=base_url, api_key="sk-scripted", **model_arguments
    )
    agent = LlmAgent(name="orders", model=model, instruction="You answer questions about orders.")
    mode = StreamingMode.SSE if stream else StreamingMode.NONE
    return GoogleAdkRunner(App(name="orders", root_agent=agent), run_config=RunConfig(streaming_mode=mode))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_non_streamed_answer_without_finish_reason_fails_the_attempt_and_the_next_one_completes(
    store: ScriptStore, provider: Provider
) -> None:
    session = SessionSide()
    unfinished = ProviderFault("unfinished_stream", attempts=(1,), requests=None)
    store.set_turns(session.flow_id, [[ScriptedResponse(text=FINAL, provider_faults=(unfinished,))]])
    runner = with_model_call_scope(build_runner(provider, stream=False))
    session.start_turn(runner.build_user_message("Where is order A-1?"))

    with pytest.raises(UnfinishedModelResponse, match="no finish reason"):
        await runner.run_model_step(session.context())
    session.attempt = 2
    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert [message.text for message in outcome.new_messages] == [FINAL]
    faults = [request.fault for request in read_provider_requests(store.state_dir, session.flow_id)]
    assert faults == ["unfinished_stream", None]


async def test_a_first_byte_slower_than_the_client_timeout_fails_the_attempt(store: ScriptStore) -> None:
    session = SessionSide()
    slow = ProviderFault("slow_first_byte", attempts=(1,), requests=None, delay_seconds=3.0)
    store.set_turns(session.flow_id, [[ScriptedResponse(text=FINAL, provider_faults=(slow,))]])
    # LiteLLM's OpenAI client would retry the timeout itself; without that, one request shows the rule.
    runner = with_model_call_scope(build_runner("openai", stream=True, timeout=0.5, max_retries=0))
    session.start_turn(runner.build_user_message("Where is order A-1?"))

    with pytest.raises(Exception, match=r"(?i)timed? ?out") as raised:
        await runner.run_model_step(session.context())
    assert not isinstance(raised.value, UnfinishedModelResponse)
    assert not any(event.type == AgentEventType.TEXT_DELTA for event in session.events)
    session.attempt = 2
    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert [message.text for message in outcome.new_messages] == [FINAL]
    deltas = [event for event in session.events if event.type == AgentEventType.TEXT_DELTA]
    assert {event.attempt for event in deltas} == {2}
    assert "".join(json.loads(event.payload)["text"] for event in deltas) == FINAL


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_request_the_provider_refuses_ends_the_turn_naming_the_status(
    store: ScriptStore, provider: Provider
) -> None:
    session = SessionSide()
    refused = ScriptedResponse(turn_error="the scripted model refused the request")
    store.set_turns(session.flow_id, [[refused]])
    runner = with_model_call_scope(build_runner(provider, stream=True))
    session.start_turn(runner.build_user_message("Where is order A-1?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None
    assert "HTTP 400" in outcome.turn_error and "the scripted model refused the request" in outcome.turn_error
    assert len(read_provider_requests(store.state_dir, session.flow_id)) == 1


@pytest.mark.parametrize(
    ("raw_answer", "finished"),
    [
        ('{"choices": [{"index": 0, "finish_reason": "stop", "message": {}}]}', True),
        ('{"choices": [{"index": 0, "finish_reason": null, "message": {}}]}', False),
        ('{"type": "message", "stop_reason": "tool_use", "content": []}', True),
        ('{"type": "message", "stop_reason": null, "content": []}', False),
        ('{"candidates": []}', None),
        ("not json", None),
    ],
)
def test_provider_finished_reads_openai_and_anthropic_answers_and_trusts_any_other(
    raw_answer: str, finished: bool | None
) -> None:
    assert provider_finished(raw_answer) is finished
