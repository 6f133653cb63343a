"""Provider faults through ChatOpenAI (Chat Completions, Responses) and ChatAnthropic, attempt by attempt.

Each test plays the session's side (`SessionSide`) against the runner of `tests.provider_matrix_spec`,
whose real provider client streams over HTTP to the kit's scripted provider server, so what a fault does
to one RunModel attempt is visible directly: what the attempt raised or returned, the events it wrote,
and the HTTP requests the server got.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from dex_agents import (
    AgentEventType,
    ContextWindowExceeded,
    ToolCallsRequested,
    ToolCallStatus,
    ToolExecutionError,
    TurnCompleted,
    UnfinishedModelResponse,
)
from dex_agents.testing import (
    ModelCallScope,
    ProviderFault,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    model_call_scope,
    read_provider_requests,
    scripted_provider_server,
)
from dex_agents.testing.runner_contract import SessionSide

from dex_agents_langgraph import LangGraphRunner
from tests.provider_matrix_spec import PROVIDER_TIMEOUT_SECONDS, build_provider_runner

# LangChain's clients share one HTTP client per base URL and timeout in the process, whose connections
# belong to the event loop that opened them: every test of the module runs on one loop.
pytestmark = pytest.mark.asyncio(loop_scope="module")

LOOKUP = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "call-1")
ANSWER = "A-1 was refunded, because it arrived broken."
CLIENTS = ("chat_openai", "chat_openai_responses", "chat_anthropic")

_executions = itertools.count(1)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptStore]:
    monkeypatch.setenv("DEX_AGENTS_TEST_STATE_DIR", str(tmp_path))
    scripted_provider_server()
    yield ScriptStore(tmp_path)


@pytest.fixture(params=CLIENTS)
def runner(request: pytest.FixtureRequest) -> LangGraphRunner:
    return build_provider_runner(request.param)


async def run_attempt(runner: LangGraphRunner, session: SessionSide, store: ScriptStore):
    """One RunModel attempt: the runner's model Step inside its call's scope, as the matrix Worker runs it."""
    # The server counts an attempt's requests per Step execution, for the whole process: each is new.
    scope = ModelCallScope(
        session.flow_id, session.turn_id, session.attempt, f"{store.state_dir.name}-{next(_executions)}"
    )
    with model_call_scope(scope):
        return await runner.run_model_step(session.context())


def text_of(session: SessionSide, attempt: int) -> str:
    return "".join(
        json.loads(event.payload)["text"]
        for event in session.events
        if event.type == AgentEventType.TEXT_DELTA and event.attempt == attempt
    )


def start(store: ScriptStore, runner: LangGraphRunner, *responses: ScriptedResponse) -> SessionSide:
    session = SessionSide()
    store.set_turns(session.flow_id, [list(responses)])
    session.start_turn(runner.build_user_message("Where is A-1? Refund it if it arrived broken."))
    return session


async def test_an_answer_without_a_finish_reason_fails_the_attempt_and_the_next_one_is_kept(
    store: ScriptStore, runner: LangGraphRunner
) -> None:
    unfinished = ProviderFault("unfinished_stream")
    session = start(store, runner, ScriptedResponse(text=ANSWER, provider_faults=(unfinished,)))

    with pytest.raises(UnfinishedModelResponse, match="stream stopped early"):
        await run_attempt(runner, session, store)
    # The partial answer streamed as it came; the attempt that failed owns it.
    assert text_of(session, 1) == ANSWER

    session.attempt = 2
    final = await run_attempt(runner, session, store)
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert [message.text for message in final.new_messages] == [ANSWER]
    assert text_of(session, 2) == ANSWER


async def test_a_tool_call_answer_without_a_finish_reason_defers_nothing(
    store: ScriptStore, runner: LangGraphRunner
) -> None:
    unfinished = ProviderFault("unfinished_stream")
    session = start(
        store,
        runner,
        ScriptedResponse(text="Let me look.", tool_calls=(LOOKUP,), provider_faults=(unfinished,)),
        ScriptedResponse(text=ANSWER),
    )

    with pytest.raises(UnfinishedModelResponse):
        await run_attempt(runner, session, store)
    assert not session.records

    session.attempt = 2
    requested = await run_attempt(runner, session, store)
    assert isinstance(requested, ToolCallsRequested)
    assert [(call.tool_call_id, call.arguments) for call in requested.tool_calls] == [
        ("call-1", '{"order_id":"A-1"}')
    ]


async def test_a_cut_stream_fails_the_attempt(store: ScriptStore, runner: LangGraphRunner) -> None:
    cut = ProviderFault("cut_stream")
    session = start(store, runner, ScriptedResponse(text=ANSWER, provider_faults=(cut,)))

    with pytest.raises(Exception) as raised:
        await run_attempt(runner, session, store)
    assert not isinstance(raised.value, UnfinishedModelResponse | ContextWindowExceeded)
    # A stream cut mid-body is no HTTP answer the client retries: one request, and the attempt fails.
    assert [request.fault for request in read_provider_requests(store.state_dir)] == ["cut_stream"]
    assert ANSWER.startswith(text_of(session, 1))


async def test_malformed_arguments_reach_the_tool_step_which_fails_without_running_the_tool(
    store: ScriptStore, runner: LangGraphRunner
) -> None:
    malformed = ProviderFault("malformed_arguments")
    session = start(
        store,
        runner,
        ScriptedResponse(tool_calls=(LOOKUP,), provider_faults=(malformed,)),
        ScriptedResponse(text=ANSWER),
    )

    requested = await run_attempt(runner, session, store)
    assert isinstance(requested, ToolCallsRequested)
    # The provider's own text, cut short: LangChain's lenient parse would have made it {"order_id": "A-1"}.
    assert [(call.tool_call_id, call.arguments) for call in requested.tool_calls] == [
        ("call-1", '{"order_id":"A-1"')
    ]
    session.defer(requested)
    with pytest.raises(ToolExecutionError) as refused:
        await session.execute(runner, "call-1")
    session.finish("call-1", ToolCallStatus.FAILED, error=str(refused.value))
    assert not [invocation for invocation in store.invocations.read() if invocation.kind == "tool"]

    final = await run_attempt(runner, session, store)
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert final.new_messages[-1].text == ANSWER
    [*_, last_call] = [i for i in store.invocations.read() if i.kind == "model"]
    [result] = [text for text in last_call.model_input if text.startswith("tool lookup_order")]
    # Chat Completions has no error flag on a tool result; the text says it.
    assert "The tool call failed" in result and "not strict JSON" in result


async def test_a_context_length_refusal_raises_context_window_exceeded(
    store: ScriptStore, runner: LangGraphRunner
) -> None:
    refusal = ProviderFault("context_length", requests=None)
    session = start(store, runner, ScriptedResponse(text=ANSWER, provider_faults=(refusal,)))

    with pytest.raises(ContextWindowExceeded):
        await run_attempt(runner, session, store)
    # A refusal is final: the client did not send it again.
    assert len(read_provider_requests(store.state_dir)) == 1


async def test_a_request_the_provider_refuses_ends_the_turn_with_its_message(
    store: ScriptStore, runner: LangGraphRunner
) -> None:
    session = start(store, runner, ScriptedResponse(turn_error="the scripted model refuses this request"))

    outcome = await run_attempt(runner, session, store)
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None
    assert "HTTP 400" in outcome.turn_error
    assert "the scripted model refuses this request" in outcome.turn_error


async def test_a_first_byte_slower_than_the_timeout_is_a_failed_request_the_client_retries(
    store: ScriptStore, runner: LangGraphRunner
) -> None:
    slow = ProviderFault("slow_first_byte", delay_seconds=PROVIDER_TIMEOUT_SECONDS + 2)
    session = start(store, runner, ScriptedResponse(text=ANSWER, provider_faults=(slow,)))

    final = await run_attempt(runner, session, store)
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert final.new_messages[-1].text == ANSWER
    first, second = read_provider_requests(store.state_dir)
    assert (first.fault, second.fault, second.request) == ("slow_first_byte", None, 2)
