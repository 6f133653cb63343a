"""An agent with an `output_schema` and tools: ADK's `set_model_response` with ADK's real agent loop.

A model that cannot combine a response schema with tools (the canned model here, like Gemini outside
Vertex AI) answers through ADK's own `set_model_response` tool. The structured answer must end the turn
as ADK ends it: no tool Step and no approval for ADK's own tool, and no model call after it.
"""

from __future__ import annotations

import json

from dex_agents.runner import UNKNOWN_TOOL_POLICY, ToolCallsRequested, ToolPolicy, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import MessageRole, ToolCallStatus, ToolEffect
from google.adk.agents import LlmAgent
from pydantic import BaseModel

from dex_agents_google_adk import GoogleAdkRunner
from tests.support import CannedLlm, call, respond

ROME = {"city": "Rome", "summary": "sunny"}
ROME_ANSWER = json.dumps(ROME)


class Forecast(BaseModel):
    city: str
    summary: str


def forecaster(model: CannedLlm, runs: list[str]) -> GoogleAdkRunner:
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        runs.append(city)
        return f"sunny in {city}"

    agent = LlmAgent(
        name="forecaster",
        model=model,
        instruction="Forecast the weather. Last forecast: {forecast?}",
        tools=[get_weather],
        output_schema=Forecast,
        output_key="forecast",
    )
    return GoogleAdkRunner(agent)


def turn_summary(outcome: TurnCompleted) -> list[tuple[MessageRole, str | None, str | None]]:
    return [(m.role, m.text or None, m.tool_output) for m in outcome.new_messages]


async def test_a_structured_answer_ends_the_turn_without_an_approval_or_another_model_call() -> None:
    model = CannedLlm(
        responses=[
            respond(call("get_weather", {"city": "Rome"}, "w")),
            respond(call("set_model_response", ROME, "answer")),
            respond(call("set_model_response", {"city": "Rome", "summary": "still sunny"}, "again")),
        ]
    )
    runs: list[str] = []
    runner = forecaster(model, runs)
    session = SessionSide(tool_policies={"get_weather": ToolPolicy(ToolEffect.READ)})
    session.start_turn(runner.build_user_message("Weather in Rome?"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("w", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "w"))

    final = await runner.run_model_step(session.context())

    assert model.offered_tools[1] == ["get_weather", "set_model_response"]
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.calls == 2 and final.usage.model_calls == 1
    assert list(session.records) == ["w"], "ADK's own tool gets no tool Step and no approval"
    assert turn_summary(final) == [
        (MessageRole.ASSISTANT, None, None),
        (MessageRole.TOOL, None, "sunny in Rome"),
        (MessageRole.ASSISTANT, None, None),
        (MessageRole.TOOL, None, ROME_ANSWER),
        (MessageRole.ASSISTANT, ROME_ANSWER, None),
    ]
    assert "".join(session.text_deltas()) == ROME_ANSWER
    session.store(final.new_messages)
    session.start_turn(runner.build_user_message("Thanks"))
    assert isinstance(await runner.run_model_step(session.context()), TurnCompleted)
    assert model.texts_seen(3)[-2:] == [ROME_ANSWER, "Thanks"]
    assert f"Last forecast: {ROME}" in model.instructions_seen[2], "output_key stored the answer"


async def test_an_answer_that_fails_the_schema_reaches_the_model_at_its_next_call_in_a_new_step() -> None:
    model = CannedLlm(
        responses=[
            respond(call("set_model_response", {"city": "Rome"}, "bad")),
            respond(call("set_model_response", ROME, "good")),
        ]
    )
    runner = forecaster(model, [])
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Rome?"))

    first = await runner.run_model_step(session.context())

    assert model.calls == 1, "the validation error waits for the next model Step"
    assert isinstance(first, ToolCallsRequested)
    assert [(c.tool_name, c.policy) for c in first.tool_calls] == [
        ("set_model_response", UNKNOWN_TOOL_POLICY)
    ]
    session.defer(first)
    output = await session.execute(runner, "bad")
    assert "Validation Error" in output and "summary" in output
    session.finish("bad", ToolCallStatus.SUCCEEDED, output=output)

    final = await runner.run_model_step(session.context())

    assert model.responses_seen(2) == [json.loads(output)]
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert final.new_messages[-1].text == ROME_ANSWER and model.calls == 2


async def test_a_structured_answer_next_to_a_tool_call_ends_the_turn_once_the_tool_ran() -> None:
    model = CannedLlm(
        responses=[
            respond(call("get_weather", {"city": "Rome"}, "w"), call("set_model_response", ROME, "s")),
            respond(call("set_model_response", ROME, "again")),
        ]
    )
    runs: list[str] = []
    runner = forecaster(model, runs)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Rome?"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    assert [c.tool_call_id for c in first.tool_calls] == ["w"]
    assert runs == []
    session.defer(first)
    session.finish("w", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "w"))

    final = await runner.run_model_step(session.context())

    # ADK ends the turn with the structured answer once the other calls have run, as here.
    assert model.calls == 1 and runs == ["Rome"]
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert final.usage.model_calls == 0
    # One response with two calls: one assistant message per call, as every adapter stores them.
    assert turn_summary(final) == [
        (MessageRole.ASSISTANT, None, None),
        (MessageRole.ASSISTANT, None, None),
        (MessageRole.TOOL, None, "sunny in Rome"),
        (MessageRole.TOOL, None, ROME_ANSWER),
        (MessageRole.ASSISTANT, ROME_ANSWER, None),
    ]
    assert [m.tool_name for m in final.new_messages[:2]] == ["get_weather", "set_model_response"]
    assert "".join(session.text_deltas()) == ROME_ANSWER
    session.store(final.new_messages)
    session.start_turn(runner.build_user_message("And tomorrow?"))
    assert isinstance(await runner.run_model_step(session.context()), TurnCompleted)
    assert model.responses_seen(2) == [{"result": "sunny in Rome"}, ROME], (
        "the next turn replays both results"
    )
