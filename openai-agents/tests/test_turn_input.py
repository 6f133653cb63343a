"""What a turn keeps of its input between Steps, and what it stores when an input filter rewrote it.

The run state must not repeat the stored conversation (it would grow with every turn until it no longer
fits a stored value), and the turn's new messages are the SDK run's own items, wherever its input came
from: the stored history, a handoff input filter's rewrite of it, or a `call_model_input_filter` that
trimmed what one model call saw.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from agents import Agent, RunConfig, TResponseInputItem, function_tool, handoff
from agents.extensions.handoff_filters import remove_all_tools
from agents.run_config import CallModelData, ModelInputData
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import MessageRole, ToolCallStatus

from dex_agents_openai_agents import UNKNOWN_TOOL_POLICY, OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedResponsesModel, call_item, text_item

_NOT_FOUND = "Tool launch_rocket not found in agent assistant"


@function_tool
async def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"{city}: 21C, sunny"


def _assistant(model: ScriptedResponsesModel, run_config: RunConfig | None = None) -> OpenAIAgentsRunner[Any]:
    return OpenAIAgentsRunner(
        Agent(name="assistant", model=model, tools=[get_weather]), run_config=run_config
    )


def _session_with_history(runner: OpenAIAgentsRunner[Any], turns: int) -> SessionSide:
    """A session with ``turns`` earlier question/answer pairs of about 2 KB each."""
    session = SessionSide()
    for number in range(turns):
        session.start_turn(runner.build_user_message(f"question {number} " + "x" * 2000))
        session.store([runner.build_user_message(f"answer {number}")])
    return session


async def _defer_and_finish(
    runner: OpenAIAgentsRunner[Any], session: SessionSide, call_id: str, status: ToolCallStatus, text: str
) -> ToolCallsRequested:
    """Make a model Step that asks for one tool call, and record the call with ``text``."""
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested), requested
    session.defer(requested)
    if status is ToolCallStatus.FAILED:
        session.finish(call_id, status, error=text)
    else:
        session.finish(call_id, status, output=text)
    return requested


def _texts(items: list[TResponseInputItem]) -> list[str]:
    """What a model call saw: each item as its text, tool call ID or output."""
    texts: list[str] = []
    for raw in items:
        item = cast(Mapping[str, Any], raw)
        if item.get("type") == "function_call":
            texts.append(f"call {item['call_id']}")
        elif item.get("type") == "function_call_output":
            texts.append(f"output {item['call_id']}: {item['output']}")
        else:
            texts.append(str(item.get("content")))
    return texts


async def _unknown_tool_run_state(turns: int) -> tuple[int, int]:
    """Return the history's size and the run state's size after an unknown tool, then end the turn."""
    model = ScriptedResponsesModel.from_answers(
        [[call_item("launch_rocket", {}, "call-1")], [text_item("No rockets.")]]
    )
    runner = _assistant(model)
    session = _session_with_history(runner, turns)
    session.start_turn(runner.build_user_message("Launch a rocket"))
    history_bytes = sum(len(message.framework_item) for message in session.messages)

    requested = await _defer_and_finish(runner, session, "call-1", ToolCallStatus.FAILED, _NOT_FOUND)

    assert [c.policy for c in requested.tool_calls] == [UNKNOWN_TOOL_POLICY]
    final = await runner.run_model_step(session.context())
    # The next model call still sees the whole conversation, and the turn stores only its own items.
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.calls[1].input_items) == len(session.messages) + 2
    assert [(m.role, m.tool_call_id) for m in final.new_messages] == [
        (MessageRole.ASSISTANT, "call-1"),
        (MessageRole.TOOL, "call-1"),
        (MessageRole.ASSISTANT, None),
    ]
    return history_bytes, len(requested.framework_run_state.encode())


async def test_the_unknown_tool_run_state_does_not_grow_with_the_conversation() -> None:
    short_history, short_state = await _unknown_tool_run_state(turns=10)
    long_history, long_state = await _unknown_tool_run_state(turns=40)

    assert (short_history > 20_000, long_history > 80_000) == (True, True)
    # The stored message count has two digits in both runs, so the states are the same size.
    assert long_state == short_state, (short_state, long_state)
    assert short_state < 2_000


async def test_an_unknown_tool_then_more_tool_calls_keep_the_whole_turn_and_a_small_run_state() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("launch_rocket", {}, "call-1")],
            [call_item("get_weather", {"city": "Oslo"}, "call-2")],
            [text_item("Oslo is sunny; no rockets.")],
        ]
    )
    runner = _assistant(model)
    session = _session_with_history(runner, turns=20)
    session.start_turn(runner.build_user_message("A rocket, then the weather"))
    await _defer_and_finish(runner, session, "call-1", ToolCallStatus.FAILED, _NOT_FOUND)

    second = await _defer_and_finish(runner, session, "call-2", ToolCallStatus.SUCCEEDED, "Oslo: sunny")

    assert len(second.framework_run_state) < 10_000
    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert _texts(model.calls[2].input_items)[: len(session.messages)] == _texts(
        [json.loads(m.framework_item) for m in session.messages]
    )
    assert [(m.role, m.tool_call_id) for m in final.new_messages] == [
        (MessageRole.ASSISTANT, "call-1"),
        (MessageRole.TOOL, "call-1"),
        (MessageRole.ASSISTANT, "call-2"),
        (MessageRole.TOOL, "call-2"),
        (MessageRole.ASSISTANT, None),
    ]


def _last_four_items(data: CallModelData[Any]) -> ModelInputData:
    """A sliding window, as users write it: each model call sees a note and the last four items."""
    note = cast(TResponseInputItem, {"role": "developer", "content": "Earlier messages are omitted."})
    return ModelInputData(input=[note, *data.model_data.input[-4:]], instructions=None)


async def test_a_call_model_input_filter_that_trims_the_input_loses_nothing_after_an_unknown_tool() -> None:
    model = ScriptedResponsesModel.from_answers(
        [[call_item("launch_rocket", {}, "call-1")], [text_item("No rockets.")]]
    )
    runner = _assistant(model, RunConfig(call_model_input_filter=_last_four_items))
    session = _session_with_history(runner, turns=5)
    session.start_turn(runner.build_user_message("Launch a rocket"))
    await _defer_and_finish(runner, session, "call-1", ToolCallStatus.FAILED, _NOT_FOUND)

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    # The filter applies once per model call, to the whole conversation, not to its own earlier output.
    assert _texts(model.calls[1].input_items) == [
        "Earlier messages are omitted.",
        "answer 4",
        "Launch a rocket",
        "call call-1",
        f"output call-1: The tool call failed: {_NOT_FOUND}",
    ]
    assert [(m.role, m.tool_call_id, m.text) for m in final.new_messages] == [
        (MessageRole.ASSISTANT, "call-1", None),
        (MessageRole.TOOL, "call-1", None),
        (MessageRole.ASSISTANT, None, "No rockets."),
    ]


def _triage_with_filtered_handoff(
    triage_model: ScriptedResponsesModel, billing_model: ScriptedResponsesModel
) -> OpenAIAgentsRunner[Any]:
    billing = Agent(name="billing", model=billing_model, tools=[get_weather])
    # The SDK's own filter: the billing agent sees the conversation without any tool items.
    triage = Agent(
        name="triage",
        model=triage_model,
        tools=[get_weather],
        handoffs=[handoff(billing, input_filter=remove_all_tools)],
    )
    return OpenAIAgentsRunner(triage, resume_last_agent=False)


async def _turn_with_a_tool_call(runner: OpenAIAgentsRunner[Any], session: SessionSide) -> None:
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    await _defer_and_finish(runner, session, "w-1", ToolCallStatus.SUCCEEDED, "Oslo: sunny")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    session.store(final.new_messages)


async def test_a_handoff_input_filter_that_rewrites_the_history_keeps_the_turns_answer() -> None:
    triage_model = ScriptedResponsesModel.from_answers(
        [
            [call_item("get_weather", {"city": "Oslo"}, "w-1")],
            [text_item("Sunny in Oslo.")],
            [call_item("transfer_to_billing", {}, "handoff-1")],
        ]
    )
    billing_model = ScriptedResponsesModel.from_answers([[text_item("Billing here: your invoice is paid.")]])
    runner = _triage_with_filtered_handoff(triage_model, billing_model)
    session = SessionSide()
    await _turn_with_a_tool_call(runner, session)
    stored_before = len(session.messages)
    session.start_turn(runner.build_user_message("Is my invoice paid?"))

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert "call w-1" not in _texts(billing_model.calls[0].input_items), (
        "the filter must have rewritten the input"
    )
    assert final.new_messages and final.new_messages[-1].text == "Billing here: your invoice is paid."
    session.store(final.new_messages)
    # Nothing of the stored conversation is stored again.
    assert len(session.messages) == stored_before + 1 + len(final.new_messages)
    assert [m.text for m in session.messages].count("Sunny in Oslo.") == 1


async def test_a_handoff_input_filter_then_tool_calls_keep_the_turn_across_the_resume() -> None:
    triage_model = ScriptedResponsesModel.from_answers(
        [
            [call_item("get_weather", {"city": "Oslo"}, "w-1")],
            [text_item("Sunny in Oslo.")],
            [call_item("transfer_to_billing", {}, "handoff-1")],
        ]
    )
    billing_model = ScriptedResponsesModel.from_answers(
        [[call_item("get_weather", {"city": "Rome"}, "w-2")], [text_item("Rome is sunny too.")]]
    )
    runner = _triage_with_filtered_handoff(triage_model, billing_model)
    session = SessionSide()
    await _turn_with_a_tool_call(runner, session)
    session.start_turn(runner.build_user_message("And Rome, billing?"))
    await _defer_and_finish(runner, session, "w-2", ToolCallStatus.SUCCEEDED, "Rome: sunny")

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    # The billing agent keeps seeing the filtered history, and the turn keeps its own items.
    assert "call w-1" not in _texts(billing_model.calls[1].input_items)
    assert _texts(billing_model.calls[1].input_items)[-2:] == ["call w-2", "output w-2: Rome: sunny"]
    new = [(m.role, m.tool_call_id, m.text) for m in final.new_messages]
    assert new[-3:] == [
        (MessageRole.ASSISTANT, "w-2", None),
        (MessageRole.TOOL, "w-2", None),
        (MessageRole.ASSISTANT, None, "Rome is sunny too."),
    ]
