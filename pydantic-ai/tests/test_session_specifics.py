"""Pydantic AI specifics through a whole session: devserver, Worker child, real agent loop, scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest
import pytest_asyncio
from dex_agents import AgentEvent, AgentEventType, AgentSessionClient, MessageRole
from dex_agents.testing import (
    AgentTestStack,
    ProviderFault,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    read_provider_requests,
    recorded_usage,
    run_mcp_inventory_scenario,
    stored_calls_without_result,
    text_by_model_step,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.matrix import wait_for_turn_end
from pydantic_ai.messages import INTERRUPTED_TOOL_RETURN_CONTENT

from tests.matrix_spec import PACKAGE_DIR
from tests.specifics_agents import build_flows, mcp_log_path

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Session:
    stack: AgentTestStack
    plain: AgentSessionClient
    forecast: AgentSessionClient
    mcp: AgentSessionClient
    provider: AgentSessionClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    flows = build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("specifics"), flows, "tests.specifics_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        await stack.start_worker()
        yield Session(stack, *(stack.sessions(flow) for flow in flows))


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
        "RunModel",
    ]


async def test_a_steer_during_an_approval_closes_the_output_call_the_response_held(session: Session) -> None:
    # One response asks for a read, a refund that needs approval, and the final output. The steer abandons
    # the refund; Pydantic AI never processes the output call, and the next turn's model must still see a
    # result for each of the three calls.
    session_id = session.stack.new_session_id("steer-output")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", output="A-1 is 21C in Lima")
    refund = ScriptedToolCall("refund_order", {"order_id": "A-1"}, "refund-1")
    output = ScriptedToolCall("final_result", {"city": "Lima", "temperature_c": 21}, "output-1")
    answer = ScriptedToolCall("final_result", {"city": "Lima", "temperature_c": 20}, "output-2")
    session.stack.scripts.set_turns(
        session_id,
        [[ScriptedResponse(tool_calls=(read, refund, output))], [ScriptedResponse(tool_calls=(answer,))]],
    )
    await session.forecast.start_session(session_id, "Forecast for Lima, and refund A-1")
    await wait_for_agent_snapshot(
        session.forecast,
        session_id,
        lambda snapshot: snapshot.pending_interrupts or None,
        description="the refund's approval",
    )
    await wait_until(
        "the read to run", lambda: session.stack.invocations.tool_calls(session_id, "lookup_order")
    )
    assert await session.forecast.steer_user_message(session_id, "No refund. Just the forecast.")
    done = await wait_for_turn_end(session.forecast, session_id, 2)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert stored_calls_without_result(done.messages) == [], done.messages
    [next_call] = session.stack.invocations.model_calls(session_id, "turn-2")
    for seen in (
        "tool lookup_order [read-1] success: A-1 is 21C in Lima",
        "tool refund_order [refund-1] denied: "
        + '{"status":"cancelled","reason":"superseded_by_steered_user_message"}',
        f"tool final_result [output-1] interrupted: {INTERRUPTED_TOOL_RETURN_CONTENT}",
        "user: No refund. Just the forecast.",
    ):
        assert seen in next_call.model_input, (seen, next_call.model_input)
    assert not session.stack.invocations.tool_calls(session_id, "refund_order")
    assert json.loads(done.messages[-3].text or "") == {"city": "Lima", "temperature_c": 20}


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
    assert assistant_texts == ["Let me check order A-1.", None, "A-1 shipped."], "text, the call, the answer"
    recorded = recorded_usage(events)
    assert [usage["model_calls"] for usage in recorded] == [1, 1]
    assert snapshot.usage.model_calls == 2
    assert snapshot.usage.input_tokens == sum(usage["input_tokens"] for usage in recorded) > 0
    assert snapshot.tool_calls == (), "a completed turn keeps no tool call records"


async def test_mcp_tools_run_one_tools_call_per_tool_step_with_effects_from_annotations(
    session: Session,
) -> None:
    # The shared scenario asserts the effects, the approvals of set_stock (trusted, destructive) and
    # order_more (unclassified), one tools/call per tool Step beside any tools/list, and the Step shape.
    session_id = session.stack.new_session_id("mcp")
    log = mcp_log_path(session.stack.state_dir)
    await run_mcp_inventory_scenario(session.mcp, session.stack, session_id, log)


def _text_by_attempt(events: Sequence[AgentEvent]) -> dict[int, str]:
    text: dict[int, str] = {}
    for event in events:
        if event.type == AgentEventType.TEXT_DELTA:
            text[event.attempt] = text.get(event.attempt, "") + json.loads(event.payload)["text"]
    return text


async def test_a_first_byte_later_than_the_client_timeout_fails_the_attempt_and_the_next_one_answers(
    session: Session,
) -> None:
    """OpenAIChatModel with `timeout=1` and one client retry: both requests of attempt 1 time out."""
    session_id = session.stack.new_session_id("slow")
    slow = ProviderFault("slow_first_byte", attempts=(1,), requests=None, delay_seconds=3.0)
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(text="Order A-1 has shipped.", provider_faults=(slow,))]]
    )
    await session.provider.start_session(session_id, "Where is order A-1?")
    snapshot = await wait_for_turn_end(session.provider, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    assert snapshot.messages[-1].text == "Order A-1 has shipped."
    requests = read_provider_requests(session.stack.state_dir, session_id)
    assert [(request.attempt, request.request, request.fault) for request in requests] == [
        (1, 1, "slow_first_byte"),
        (1, 2, "slow_first_byte"),
        (2, 1, None),
    ]
    # The client gave up on each after its timeout, not after the server's 3 s.
    assert requests[1].at - requests[0].at < 3.0
    events = await read_agent_events(session.provider, session_id)
    assert _text_by_attempt(events) == {2: "Order A-1 has shipped."}


async def test_a_stream_cut_halfway_is_superseded_by_the_next_attempts_whole_answer(session: Session) -> None:
    """The live text shows attempt 1's partial answer, then attempt 2's; only the whole one is stored."""
    session_id = session.stack.new_session_id("cut")
    final = "Order A-1 was refunded in full and the receipt is on its way."
    cut = ProviderFault("cut_stream", attempts=(1,), requests=None)
    session.stack.scripts.set_turns(session_id, [[ScriptedResponse(text=final, provider_faults=(cut,))]])
    await session.provider.start_session(session_id, "Refund order A-1")
    snapshot = await wait_for_turn_end(session.provider, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    assert [message.text for message in snapshot.messages if message.role is MessageRole.ASSISTANT] == [final]
    by_attempt = _text_by_attempt(await read_agent_events(session.provider, session_id))
    assert sorted(by_attempt) == [1, 2], by_attempt
    assert final.startswith(by_attempt[1]) and by_attempt[1] != final, by_attempt
    assert by_attempt[2] == final
    requests = read_provider_requests(session.stack.state_dir, session_id)
    assert [request.attempt for request in requests] == [1, 2]
