"""How ADK events become stored messages and come back: split into the shared projection, joined on replay.

ADK keeps a response's text and function calls in one event, and the results of one response in another.
The session stores them the way every adapter does (text, one message per call, one per result); the next
turn must still hand ADK its own events, and a history that release 0.1.0 stored (one message per model
response) must replay the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import FrameworkMessage, MessageRole, ToolCallStatus
from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedResponse, ScriptedToolCall
from tests.support import CannedLlm, call, respond

HISTORY_0_1_0 = Path(__file__).with_name("data") / "history_0_1_0.json"
"""What release 0.1.0 stored for the conversation `_previous_release_conversation` runs."""


async def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def _contents(seen: list[types.Content]) -> list[dict[str, Any]]:
    return [content.model_dump(exclude_none=True) for content in seen]


async def test_a_response_with_text_and_calls_is_stored_in_pieces_and_replayed_as_adks_own_event() -> None:
    def remember_the_cities(callback_context: CallbackContext, llm_response: LlmResponse) -> None:
        parts = llm_response.content.parts or () if llm_response.content else ()
        cities = [str((part.function_call.args or {})["city"]) for part in parts if part.function_call]
        if cities and not llm_response.partial:
            callback_context.state["checked"] = ", ".join(cities)

    model = CannedLlm(
        responses=[
            respond(
                types.Part(text="Two cities.", thought=True),
                "Let me check both.",
                call("get_weather", {"city": "Rome"}, "w-1"),
                call("get_weather", {"city": "Oslo"}, "w-2"),
            ),
            respond("Both are sunny."),
            respond("You are welcome."),
        ]
    )
    agent = LlmAgent(
        name="weather",
        model=model,
        instruction="Cities checked so far: {checked?}",
        tools=[get_weather],
        after_model_callback=remember_the_cities,
    )
    runner = GoogleAdkRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Rome and Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("w-1", ToolCallStatus.SUCCEEDED, output="sunny in Rome")
    session.finish("w-2", ToolCallStatus.SUCCEEDED, output="sunny in Oslo")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted)

    assert [(m.role, m.text, m.tool_call_id, m.tool_name, m.tool_arguments) for m in final.new_messages] == [
        (MessageRole.ASSISTANT, "Let me check both.", None, None, None),
        (MessageRole.ASSISTANT, None, "w-1", "get_weather", '{"city": "Rome"}'),
        (MessageRole.ASSISTANT, None, "w-2", "get_weather", '{"city": "Oslo"}'),
        (MessageRole.TOOL, None, "w-1", "get_weather", '{"city": "Rome"}'),
        (MessageRole.TOOL, None, "w-2", "get_weather", '{"city": "Oslo"}'),
        (MessageRole.ASSISTANT, "Both are sunny.", None, None, None),
    ]
    session.store(final.new_messages)
    session.start_turn(runner.build_user_message("Thanks!"))
    await runner.run_model_step(session.context())

    # The next turn's model call sees the conversation exactly as the live invocation showed it: one
    # model content with the thought, the text and both calls, one user content with both results.
    replayed, live = _contents(model.seen[2]), _contents(model.seen[1])
    assert replayed[: len(live)] == live
    assert [part.keys() for part in replayed[1]["parts"]] == [
        {"text", "thought"},
        {"text"},
        {"function_call"},
        {"function_call"},
    ]
    assert "Cities checked so far: Rome, Oslo" in model.instructions_seen[2], "the event's state is kept"


async def _previous_release_conversation(history: list[FrameworkMessage] | None) -> list[types.Content]:
    """Run the conversation of `HISTORY_0_1_0`, or replay ``history`` in its place, then one more turn.

    Returns:
        What the model saw at the next turn's call.
    """

    async def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return order_id

    async def refund_order(order_id: str) -> str:
        """Refund an order."""
        return order_id

    asks = ScriptedResponse(
        text="Let me look A-1 up and refund A-2.",
        tool_calls=(
            ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "call-1"),
            ScriptedToolCall("refund_order", {"order_id": "A-2"}, "call-2"),
        ),
    )
    answers = ScriptedResponse(text="A-1 has shipped; the refund of A-2 was refused.")
    welcome = ScriptedResponse(text="You are welcome.")
    model = CannedLlm(responses=[asks, answers, welcome] if history is None else [welcome])
    runner = GoogleAdkRunner(LlmAgent(name="orders", model=model, tools=[lookup_order, refund_order]))
    session = SessionSide()
    if history is None:
        session.start_turn(runner.build_user_message("Where is A-1? Refund A-2."))
        requested = await runner.run_model_step(session.context())
        assert isinstance(requested, ToolCallsRequested)
        session.defer(requested)
        session.finish("call-1", ToolCallStatus.SUCCEEDED, output="A-1 shipped on Monday")
        session.finish("call-2", ToolCallStatus.REJECTED, rejection_message="Refunds need a manager.")
        final = await runner.run_model_step(session.context())
        assert isinstance(final, TurnCompleted)
        session.store(final.new_messages)
    else:
        session.start_turn(history[0])
        session.store(history[1:])
    session.start_turn(runner.build_user_message("Thanks!"))
    await runner.run_model_step(session.context())
    return model.seen[-1]


async def test_a_history_stored_by_release_0_1_0_replays_as_this_releases_history_does() -> None:
    stored = [
        FrameworkMessage(**{**item, "role": MessageRole(item["role"])})
        for item in json.loads(HISTORY_0_1_0.read_text())
    ]
    assert [(m.role, m.tool_call_id) for m in stored][1:3] == [
        (MessageRole.ASSISTANT, None),
        (MessageRole.TOOL, "call-1"),
    ], "release 0.1.0 stored the text and both calls of a response as one message"

    seen_after_old = await _previous_release_conversation(stored)
    seen_after_new = await _previous_release_conversation(None)

    assert _contents(seen_after_old) == _contents(seen_after_new)
    assert [content.role for content in seen_after_old] == ["user", "model", "user", "model", "user"]
