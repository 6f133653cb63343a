"""Provider faults the matrix does not cover, through whole sessions with the SDK's real OpenAI models.

A first byte slower than the client's timeout (the client retries by itself, then the `RunModel` attempt
fails and the next one answers); an unfinished Chat Completions stream from a model name the run's
`OpenAIProvider` resolves (the finish check covers provider-resolved models, not only model objects); and a
request the provider refuses, which ends the turn at once instead of retrying.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from dex_agents import AgentSessionClient, AgentSnapshot
from dex_agents.events import AgentEventType
from dex_agents.testing import (
    AgentTestStack,
    ProviderFault,
    ScriptedResponse,
    read_agent_events,
    read_provider_requests,
    wait_for_turn_end,
)

from tests.matrix_spec import PACKAGE_DIR
from tests.provider_fault_agents import CLIENT_TIMEOUT_SECONDS, build_flows

pytestmark = pytest.mark.asyncio(loop_scope="module")

FINAL = "Order A-1 shipped on Monday and arrives on Thursday."


@dataclass
class Sessions:
    stack: AgentTestStack
    timeout: AgentSessionClient
    by_name: AgentSessionClient

    async def run_turn(self, client: AgentSessionClient, prefix: str, *responses: ScriptedResponse) -> str:
        """Start a session whose first turn answers ``responses``; return its ID once the turn ended."""
        session = self.stack.new_session_id(prefix)
        self.stack.scripts.set_turns(session, [list(responses)])
        await client.start_session(session, "Where is order A-1?")
        await wait_for_turn_end(client, session, 1)
        return session


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sessions]:
    flows = build_flows()
    state_dir = tmp_path_factory.mktemp("provider-faults")
    worker = "tests.provider_fault_worker"
    async with AgentTestStack(state_dir, flows, worker, worker_cwd=PACKAGE_DIR) as stack:
        await stack.start_worker()
        yield Sessions(stack, *(stack.sessions(flow) for flow in flows))


async def _text_by_attempt(client: AgentSessionClient, session: str) -> dict[int, str]:
    text: dict[int, str] = {}
    for event in await read_agent_events(client, session):
        if event.type == AgentEventType.TEXT_DELTA:
            text[event.attempt] = text.get(event.attempt, "") + json.loads(event.payload)["text"]
    return text


def _answered(snapshot: AgentSnapshot) -> str | None:
    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    return snapshot.messages[-1].text


async def test_a_first_byte_slower_than_the_client_timeout_fails_the_attempt(sessions: Sessions) -> None:
    slow = ProviderFault("slow_first_byte", requests=None, delay_seconds=CLIENT_TIMEOUT_SECONDS + 2)
    session = await sessions.run_turn(
        sessions.timeout, "slow", ScriptedResponse(text=FINAL, provider_faults=(slow,))
    )

    snapshot = await sessions.timeout.get_agent_snapshot(session)
    assert _answered(snapshot) == FINAL
    requests = read_provider_requests(sessions.stack.state_dir, session)
    # The client timed out and sent its one retry, which timed out too: the attempt failed, and the
    # next attempt of the same RunModel execution answered.
    assert [(r.attempt, r.request, r.fault) for r in requests] == [
        (1, 1, "slow_first_byte"),
        (1, 2, "slow_first_byte"),
        (2, 1, None),
    ], requests
    assert len({r.step_execution_id for r in requests}) == 1, requests
    history = await sessions.stack.read_step_history(session)
    [run_model] = [entry for entry in history if entry.step_type == "RunModel"]
    assert run_model.final_attempt == 2, run_model
    assert await _text_by_attempt(sessions.timeout, session) == {2: FINAL}


async def test_an_unfinished_stream_of_a_model_the_provider_resolves_is_retried(sessions: Sessions) -> None:
    unfinished = ProviderFault("unfinished_stream")
    session = await sessions.run_turn(
        sessions.by_name, "by-name", ScriptedResponse(text=FINAL, provider_faults=(unfinished,))
    )

    snapshot = await sessions.by_name.get_agent_snapshot(session)
    assert _answered(snapshot) == FINAL
    requests = read_provider_requests(sessions.stack.state_dir, session)
    assert [(r.api, r.attempt, r.fault) for r in requests] == [
        ("chat_completions", 1, "unfinished_stream"),
        ("chat_completions", 2, None),
    ], requests
    # Both attempts streamed their text live, each under its own attempt number; what is stored is the
    # answer of the attempt whose stream the provider finished.
    text = await _text_by_attempt(sessions.by_name, session)
    assert sorted(text) == [1, 2] and text[2] == FINAL, text


async def test_a_request_the_provider_refuses_ends_the_turn_without_a_retry(sessions: Sessions) -> None:
    refused = "The model `gpt-4.1` does not exist or you do not have access to it."
    session = sessions.stack.new_session_id("refused")
    sessions.stack.scripts.set_turns(
        session, [[ScriptedResponse(turn_error=refused)], [ScriptedResponse(text="Hello again.")]]
    )
    await sessions.by_name.start_session(session, "Hi")
    snapshot = await wait_for_turn_end(sessions.by_name, session, 1)

    assert snapshot.state is not None
    error = snapshot.state.last_turn_error or ""
    assert error.startswith("the model provider refused the call (HTTP 400): ") and refused in error, error
    requests = read_provider_requests(sessions.stack.state_dir, session)
    assert [(r.attempt, r.request) for r in requests] == [(1, 1)], requests
    assert await sessions.by_name.send_user_message(session, "Hi again")
    assert _answered(await wait_for_turn_end(sessions.by_name, session, 2)) == "Hello again."
