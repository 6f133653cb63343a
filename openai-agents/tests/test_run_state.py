"""What the run state holds: its versioned envelope, and the items of a turn that ends without an answer.

A turn that steering, `cancel_turn` or a failure ends keeps its own items, read from the run state, with a
result for every tool call (`build_unfinished_turn_messages`), so the next turn's model input has no call
without an output. The shared contract checks one response; these cover the SDK's own cases: a turn
resumed before it ended, the unknown-tool fallback, and a handoff.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

import pytest
from agents import Agent, TResponseInputItem, function_tool
from dex_agents import (
    STEERED_REJECTION_MESSAGE,
    TURN_CANCELLED_REJECTION_MESSAGE,
    CancellationReason,
    RunStateFormatError,
)
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide, stored_calls_without_result
from dex_agents.values import MessageRole, ToolCallStatus

from dex_agents_openai_agents import OpenAIAgentsRunner, OpenAIAgentsRunState
from dex_agents_openai_agents.testing import ScriptedResponsesModel, call_item, text_item


@function_tool
async def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"{city}: 21C, sunny"


@function_tool
async def refund(order_id: str) -> str:
    """Refund an order."""
    return f"refunded {order_id}"


def _runner(model: ScriptedResponsesModel) -> OpenAIAgentsRunner[Any]:
    return OpenAIAgentsRunner(Agent(name="assistant", model=model, tools=[get_weather, refund]))


async def _defer(runner: OpenAIAgentsRunner[Any], session: SessionSide) -> ToolCallsRequested:
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested), outcome
    session.defer(outcome)
    return outcome


def _calls_and_results(session: SessionSide) -> list[tuple[MessageRole, str | None, str | None, str | None]]:
    """The stored tool messages and calls: role, tool call ID, tool name and output."""
    return [
        (message.role, message.tool_call_id, message.tool_name, message.tool_output)
        for message in session.messages
        if message.tool_call_id is not None
    ]


def _outputs(items: list[TResponseInputItem]) -> list[tuple[str, str]]:
    parsed = [cast(Mapping[str, Any], item) for item in items]
    return [(str(i["call_id"]), str(i["output"])) for i in parsed if i.get("type") == "function_call_output"]


async def test_the_run_state_travels_in_a_versioned_envelope() -> None:
    model = ScriptedResponsesModel.from_answers([[call_item("get_weather", {"city": "Oslo"}, "call-1")]])
    runner = _runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))

    requested = await _defer(runner, session)

    data = json.loads(requested.framework_run_state)
    assert (data["format"], data["version"], data["kind"]) == (
        "dex-agents-openai-agents/run-state",
        3,
        "run_state",
    )
    data["version"] = 4
    with pytest.raises(RunStateFormatError, match="has version 4 of 'dex-agents-openai-agents/run-state'"):
        OpenAIAgentsRunState.from_json(json.dumps(data))


@pytest.mark.parametrize("earlier", ["dex-agents-openai-agents/1", "dex-agents-openai-agents/2"])
async def test_a_run_state_of_an_earlier_release_ends_the_turn_with_a_clear_error(earlier: str) -> None:
    model = ScriptedResponsesModel.from_answers(["Hello again."])
    runner = _runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go"))
    session.framework_run_state = json.dumps(
        {"format": earlier, "kind": "items", "agent_name": "assistant", "pending_call_ids": []}
    )

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and model.calls == []
    assert outcome.turn_error and f"format {earlier!r} of an earlier release" in outcome.turn_error
    with pytest.raises(RunStateFormatError, match="earlier release"):
        await runner.build_unfinished_turn_messages(session.context())
    # The session stays usable: the next turn starts without a run state and is answered.
    session.start_turn(runner.build_user_message("Hi"))
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.new_messages[-1].text == "Hello again."


async def test_a_turn_ended_before_its_first_tool_calls_has_nothing_unstored() -> None:
    runner = _runner(ScriptedResponsesModel.from_answers([]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    assert await session.end_turn_early(runner) == []


async def test_a_turn_ended_after_a_resume_keeps_each_call_once_with_its_result() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("get_weather", {"city": "Oslo"}, "call-1")],
            [text_item("Sunny. Refunding now."), call_item("refund", {"order_id": "A-1"}, "call-2")],
            "Understood, no refund.",
        ]
    )
    runner = _runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather, then refund A-1"))
    await _defer(runner, session)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="Oslo: sunny")
    await _defer(runner, session)
    session.abandon("call-2", CancellationReason.STEERED)

    await session.end_turn_early(runner)

    assert len(model.calls) == 2, "building the unstored items made a model call"
    assert [m.role for m in session.messages] == [
        MessageRole.USER,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
    ]
    assert session.messages[3].text == "Sunny. Refunding now."
    assert _calls_and_results(session) == [
        (MessageRole.ASSISTANT, "call-1", "get_weather", None),
        (MessageRole.TOOL, "call-1", "get_weather", "Oslo: sunny"),
        (MessageRole.ASSISTANT, "call-2", "refund", None),
        (MessageRole.TOOL, "call-2", "refund", STEERED_REJECTION_MESSAGE),
    ]
    assert session.messages[-1].tool_arguments == '{"order_id": "A-1"}'
    session.start_turn(runner.build_user_message("Do not refund"))
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert _outputs(model.calls[2].input_items) == [
        ("call-1", "Oslo: sunny"),
        ("call-2", STEERED_REJECTION_MESSAGE),
    ]


async def test_a_turn_ended_after_an_unknown_tool_keeps_its_items() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("launch_rocket", {}, "call-1"), call_item("get_weather", {"city": "Oslo"}, "call-2")],
            "Stopped.",
        ]
    )
    runner = _runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Launch, then the weather"))
    requested = await _defer(runner, session)
    assert json.loads(requested.framework_run_state)["kind"] == "items"
    session.finish("call-1", ToolCallStatus.FAILED, error="Tool launch_rocket not found in agent assistant")
    session.abandon("call-2", CancellationReason.TURN_CANCELLED)

    await session.end_turn_early(runner)

    assert stored_calls_without_result(session.messages) == []
    assert _calls_and_results(session) == [
        (MessageRole.ASSISTANT, "call-1", "launch_rocket", None),
        (MessageRole.ASSISTANT, "call-2", "get_weather", None),
        (
            MessageRole.TOOL,
            "call-1",
            "launch_rocket",
            "The tool call failed: Tool launch_rocket not found in agent assistant",
        ),
        (MessageRole.TOOL, "call-2", "get_weather", TURN_CANCELLED_REJECTION_MESSAGE),
    ]
    session.start_turn(runner.build_user_message("Never mind"))
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.new_messages[-1].text == "Stopped."


async def test_a_turn_ended_after_a_handoff_keeps_it_and_the_next_turn_stays_with_its_agent() -> None:
    triage_model = ScriptedResponsesModel.from_answers([[call_item("transfer_to_billing", {}, "handoff-1")]])
    billing_model = ScriptedResponsesModel.from_answers(
        [
            [text_item("Billing here."), call_item("refund", {"order_id": "A-1"}, "call-1")],
            "Billing again: nothing was refunded.",
        ]
    )
    billing = Agent(name="billing", model=billing_model, tools=[refund])
    runner = OpenAIAgentsRunner(Agent(name="triage", model=triage_model, handoffs=[billing]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Refund A-1"))
    await _defer(runner, session)
    session.abandon("call-1", CancellationReason.TURN_CANCELLED)

    await session.end_turn_early(runner)

    assert [(m.role, m.tool_name, m.text) for m in session.messages[1:]] == [
        (MessageRole.ASSISTANT, "transfer_to_billing", None),
        (MessageRole.TOOL, "transfer_to_billing", None),
        (MessageRole.ASSISTANT, None, "Billing here."),
        (MessageRole.ASSISTANT, "refund", None),
        (MessageRole.TOOL, "refund", None),
    ]
    assert stored_calls_without_result(session.messages) == []
    session.start_turn(runner.build_user_message("Did it go through?"))
    final = await runner.run_model_step(session.context())
    # The stored handoff names the agent the next turn starts with.
    assert (
        isinstance(final, TurnCompleted)
        and final.new_messages[-1].text == "Billing again: nothing was refunded."
    )
    assert (len(triage_model.calls), len(billing_model.calls)) == (1, 2)
