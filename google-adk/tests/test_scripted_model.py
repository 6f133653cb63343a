"""The public scripted model's list mode, as a user tries an agent with it: plain ADK, no Dex at all.

A call left without an ID also runs through `GoogleAdkRunner` here. Its script-store mode runs in every
session test (the matrix, the runner contract, the ADK specifics).
"""

from __future__ import annotations

import pytest
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import MessageRole, ToolCallStatus
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import RunConfig, StreamingMode  # pyright: ignore[reportPrivateImportUsage]
from google.adk.events import Event
from google.adk.runners import InMemoryRunner
from google.genai import types
from pydantic import BaseModel

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedLlm, ScriptedResponse, ScriptedToolCall

SSE = RunConfig(streaming_mode=StreamingMode.SSE)


async def run_turn(runner: InMemoryRunner, text: str) -> list[Event]:
    """Run one user message through ADK's own runner and return the events it yielded."""
    if (
        await runner.session_service.get_session(app_name=runner.app_name, user_id="u", session_id="s")
        is None
    ):
        await runner.session_service.create_session(app_name=runner.app_name, user_id="u", session_id="s")
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(user_id="u", session_id="s", new_message=message, run_config=SSE)
    ]


def final_text(events: list[Event]) -> str:
    return "".join(
        part.text or ""
        for event in events
        if not event.partial and event.content is not None
        for part in event.content.parts or ()
    )


async def test_a_list_of_responses_drives_an_agent_through_adks_own_runner() -> None:
    looked_up: list[str] = []

    async def lookup_order(order_id: str) -> str:
        """Look up an order."""
        looked_up.append(order_id)
        return f"{order_id} shipped on Monday"

    model = ScriptedLlm(
        responses=[
            ScriptedResponse(
                text="Let me look.",
                tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "call-1"),),
                input_tokens=30,
            ),
            ScriptedResponse(text="A-1 shipped on Monday."),
            ScriptedResponse(text="You are welcome."),
        ]
    )
    runner = InMemoryRunner(agent=LlmAgent(name="orders", model=model, tools=[lookup_order]))

    first = await run_turn(runner, "Where is A-1?")
    second = await run_turn(runner, "Thanks!")

    assert looked_up == ["A-1"], "ADK ran the scripted call's tool with its arguments"
    streamed = [
        part.text or ""
        for event in first
        if event.partial and event.content is not None
        for part in event.content.parts or ()
    ]
    assert streamed[:2] == ["Let ", "me "] and "".join(streamed[:3]) == "Let me look."
    assert final_text(first) == "Let me look.A-1 shipped on Monday."
    usage = next(event.usage_metadata for event in first if event.usage_metadata and not event.partial)
    assert usage.prompt_token_count == 30
    assert final_text(second) == "You are welcome.", "the next turn answers with the next response"


async def test_adks_echo_of_a_structured_answer_is_not_counted_as_a_response() -> None:
    class Forecast(BaseModel):
        city: str
        summary: str

    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        return f"sunny in {city}"

    def answer(summary: str, call_id: str) -> ScriptedResponse:
        arguments = {"city": "Rome", "summary": summary}
        return ScriptedResponse(tool_calls=(ScriptedToolCall("set_model_response", arguments, call_id),))

    # The first answer fails the schema, so ADK asks the model again in the same turn: a real response.
    invalid = ScriptedResponse(
        tool_calls=(ScriptedToolCall("set_model_response", {"city": "Rome"}, "answer-0"),)
    )
    model = ScriptedLlm(responses=[invalid, answer("sunny", "answer-1"), answer("still sunny", "answer-2")])
    agent = LlmAgent(name="forecaster", model=model, tools=[get_weather], output_schema=Forecast)
    runner = InMemoryRunner(agent=agent)

    first = await run_turn(runner, "Rome?")
    second = await run_turn(runner, "And now?")

    assert '"summary": "sunny"' in final_text(first).replace('":"', '": "')
    assert '"summary": "still sunny"' in final_text(second).replace('":"', '": "')


async def test_a_call_past_the_last_response_fails_with_an_error_naming_the_script() -> None:
    runner = InMemoryRunner(
        agent=LlmAgent(name="solo", model=ScriptedLlm(responses=[ScriptedResponse(text="Hello.")]))
    )
    await run_turn(runner, "Hi")

    with pytest.raises(RuntimeError, match="has 1 scripted responses") as error:
        await run_turn(runner, "Hi again")
    assert "no answer for call 2" in str(error.value)


def test_a_list_refuses_fields_only_the_sessions_script_honours() -> None:
    with pytest.raises(ValueError, match=r"responses\[1\] sets gate, fail_attempts, which only"):
        ScriptedLlm(responses=[ScriptedResponse(text="Hi."), ScriptedResponse(gate="g", fail_attempts=(1,))])


async def test_a_tool_call_without_an_id_gets_one_in_plain_adk_and_in_a_durable_session() -> None:
    """The kit's shapes with the ID left out, as a new user writes them (issue 32: a TypeError before)."""

    def lookup_order(order_id: str) -> str:
        """Look up an order."""
        return f"{order_id} shipped"

    def build_agent() -> LlmAgent:
        responses: list[ScriptedResponse] = [
            ScriptedResponse(tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-1"}),)),
            ScriptedResponse(text="A-1 shipped."),
        ]
        return LlmAgent(name="orders", model=ScriptedLlm(responses=list(responses)), tools=[lookup_order])

    plain = await run_turn(InMemoryRunner(agent=build_agent()), "Where is A-1?")
    assert final_text(plain) == "A-1 shipped."

    runner = GoogleAdkRunner(build_agent())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Where is A-1?"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    [deferred] = first.tool_calls
    assert deferred.tool_call_id.startswith("adk-"), deferred
    session.defer(first)
    session.finish(deferred.tool_call_id, ToolCallStatus.SUCCEEDED, output="A-1 shipped")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert [(m.role, m.tool_call_id) for m in final.new_messages if m.tool_call_id] == [
        (MessageRole.ASSISTANT, deferred.tool_call_id),
        (MessageRole.TOOL, deferred.tool_call_id),
    ]
