"""Pydantic AI specifics through a whole session: devserver, Worker child, real agent loop, scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from dex_agents import (
    AgentSessionClient,
    MessageRole,
)
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    recorded_usage,
    run_mcp_inventory_scenario,
    text_by_model_step,
)
from dex_agents.testing.matrix import wait_for_turn_end

from tests.matrix_spec import PACKAGE_DIR
from tests.specifics_agents import build_flows, mcp_log_path

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Session:
    stack: AgentTestStack
    plain: AgentSessionClient
    forecast: AgentSessionClient
    mcp: AgentSessionClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    flows = build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("specifics"), flows, "tests.specifics_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        await stack.start_worker()
        yield Session(stack, stack.sessions(flows[0]), stack.sessions(flows[1]), stack.sessions(flows[2]))


async def test_structured_output_next_to_a_read_call_ends_the_turn_without_another_model_call(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("forecast")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    output = ScriptedToolCall("final_result", {"city": "Lima", "temperature_c": 21}, "output-1")
    session.stack.scripts.set_turns(session_id, [[ScriptedResponse(tool_calls=(read, output))]])
    await session.forecast.start_session(session_id, "Forecast for Lima")
    snapshot = await wait_for_turn_end(session.forecast, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert len(session.stack.invocations.model_calls(session_id)) == 1
    assert len(session.stack.invocations.tool_calls(session_id, "lookup_order")) == 1
    answer = next(message for message in snapshot.messages if message.role is MessageRole.ASSISTANT)
    assert json.loads(answer.text or "") == {"city": "Lima", "temperature_c": 21}
    assert snapshot.usage.model_calls == 1
    assert executed_step_types(await session.stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "ResumeTurn",
        "RunModel",
    ]


async def test_invalid_structured_output_fails_the_turn_after_one_model_call(session: Session) -> None:
    session_id = session.stack.new_session_id("invalid-output")
    session.stack.scripts.set_turns(session_id, [[ScriptedResponse(text="It is warm in Lima.")]])
    await session.forecast.start_session(session_id, "Forecast for Lima")
    snapshot = await wait_for_turn_end(session.forecast, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is not None
    assert "could not be used as the agent's output" in snapshot.state.last_turn_error
    [call] = session.stack.invocations.model_calls(session_id)
    assert call.attempt == 1, "a deterministic output failure is not retried"
    # The answer and Pydantic AI's feedback are stored for the next turn's model.
    assert [message.role for message in snapshot.messages] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.USER,
    ]


async def test_text_streams_as_deltas_of_each_model_call_and_usage_is_per_call(session: Session) -> None:
    session_id = session.stack.new_session_id("streaming")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check order A-1.", tool_calls=(read,)),
                ScriptedResponse(text="A-1 shipped."),
            ]
        ],
    )
    await session.plain.start_session(session_id, "Where is A-1?")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)
    events = await read_agent_events(session.plain, session_id)

    assert list(text_by_model_step(events).values()) == ["Let me check order A-1.", "A-1 shipped."]
    assistant_texts = [message.text for message in snapshot.messages if message.role is MessageRole.ASSISTANT]
    assert assistant_texts == ["Let me check order A-1.", "A-1 shipped."]
    recorded = recorded_usage(events)
    assert [usage["model_calls"] for usage in recorded] == [1, 1]
    assert snapshot.usage.model_calls == 2
    assert snapshot.usage.input_tokens == sum(usage["input_tokens"] for usage in recorded) > 0
    assert snapshot.tool_calls == (), "a completed turn keeps no tool call records"


async def test_mcp_tools_run_one_tools_call_per_tool_step_with_effects_from_annotations(
    session: Session,
) -> None:
    # The shared scenario asserts the effects, order_more's approval, one tools/call per tool Step beside
    # any tools/list, and the Step shape.
    session_id = session.stack.new_session_id("mcp")
    log = mcp_log_path(session.stack.state_dir)
    await run_mcp_inventory_scenario(session.mcp, session.stack, session_id, log)
