"""Stepwise continuations in a real session: a devserver, a Worker child, and LiteLLM's real code path."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from dex_agents import AgentEventType, AgentSessionClient, MessageRole
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    executed_step_types,
    read_agent_events,
    wait_for_turn_end,
)
from tests.stepwise_agents import CORE_DIR, KEEP_GOING, build_builderless_flow, build_continuation_flow

FLOW = build_continuation_flow()
BUILDERLESS = build_builderless_flow()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[AgentTestStack]:
    async with AgentTestStack(
        tmp_path_factory.mktemp("stepwise"),
        [FLOW, BUILDERLESS],
        "tests.stepwise_worker",
        worker_cwd=CORE_DIR,
    ) as stack:
        await stack.start_worker()
        yield stack


@pytest.fixture
def sessions(stack: AgentTestStack) -> AgentSessionClient:
    return stack.sessions(FLOW)


@pytest.mark.asyncio(loop_scope="module")
async def test_nine_continuations_in_a_row_fail_the_turn_and_the_session_goes_on(
    stack: AgentTestStack, sessions: AgentSessionClient
) -> None:
    session = stack.new_session_id("restless")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(text="Draft one.")], [ScriptedResponse(text="All done.")]]
    )
    await sessions.start_session(session, "Write a haiku")

    failed = await wait_for_turn_end(sessions, session, 1)

    assert failed.state is not None
    assert failed.state.last_turn_error == (
        "decide_turn_continuation asked for more than 8 continuations in a row, so the turn ended"
    )
    # Each continuation stored its answer and its user message; the ninth answer is kept with the failure.
    assert [(message.role, message.text) for message in failed.messages] == [
        (MessageRole.USER, "Write a haiku"),
        *[(MessageRole.ASSISTANT, "Draft one."), (MessageRole.USER, KEEP_GOING)] * 8,
        (MessageRole.ASSISTANT, "Draft one."),
    ]
    assert failed.usage.model_calls == 9
    history = await stack.read_step_history(session)
    assert executed_step_types(history) == ["StartAgentSession", *["RunModel"] * 9]
    calls = stack.invocations.model_calls(session, "turn-1")
    assert len({call.step_execution_id for call in calls}) == 9
    assert calls[1].model_input[-2:] == ("assistant: Draft one.", f"user: {KEEP_GOING}")
    events = await read_agent_events(sessions, session)
    turn_ends = [
        (event.type, json.loads(event.payload)) for event in events if event.type.startswith("turn_")
    ]
    assert [kind for kind, _ in turn_ends] == [AgentEventType.TURN_STARTED, AgentEventType.TURN_FAILED]

    assert await sessions.send_user_message(session, "Thanks, that is enough.")
    done = await wait_for_turn_end(sessions, session, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "All done."
    # The next turn's model reads the failed turn's whole transcript.
    assert calls[-1].model_input[-1] == f"user: {KEEP_GOING}"
    assert "assistant: Draft one." in stack.invocations.model_calls(session, "turn-2")[0].model_input_text


@pytest.mark.asyncio(loop_scope="module")
async def test_a_continuation_from_a_runner_without_unfinished_turn_messages_fails_the_turn_at_once(
    stack: AgentTestStack,
) -> None:
    sessions = stack.sessions(BUILDERLESS)
    session = stack.new_session_id("builderless")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(text="Draft one.")], [ScriptedResponse(text="All done.")]]
    )
    await sessions.start_session(session, "Write a haiku")

    failed = await wait_for_turn_end(sessions, session, 1)

    assert failed.state is not None and failed.state.last_turn_error == (
        "a runner that sets TurnContinued.new_messages must implement build_unfinished_turn_messages"
    )
    # Nothing of the continuation is stored, and the failure is not retried.
    assert [message.text for message in failed.messages] == ["Write a haiku"]
    assert executed_step_types(await stack.read_step_history(session)) == ["StartAgentSession", "RunModel"]
    assert len(stack.invocations.model_calls(session, "turn-1")) == 1
    assert await sessions.send_user_message(session, "Just finish it.")
    done = await wait_for_turn_end(sessions, session, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "All done."
