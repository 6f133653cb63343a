"""How a turn's Pydantic AI messages are stored and replayed, and what a turn that ends early keeps.

A response is stored split in the shared projection and joined again on replay; histories the previous
release stored (one message per response) replay unchanged; a steered, cancelled or failed turn keeps its
own messages with a result for every call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pytest
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    STEERED_REJECTION_MESSAGE,
    TURN_CANCELLED_REJECTION_MESSAGE,
    AgentEventWriter,
    CancellationReason,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import (
    ProjectedCall,
    SessionSide,
    check_message_projection,
    stored_calls_without_result,
)
from pydantic import BaseModel
from pydantic_ai import Agent, AgentRun, UserError
from pydantic_ai.messages import (
    INTERRUPTED_TOOL_RETURN_CONTENT,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolReturnPart,
)

from dex_agents_pydantic_ai import PydanticAiRunner, _runner
from dex_agents_pydantic_ai._messages import encode_message
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.support import respond, tool_call


def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


def send_postcard(city: str) -> str:
    """Send a postcard from a city."""
    return f"postcard sent from {city}"


def responses_seen(messages: Sequence[ModelMessage]) -> list[str]:
    return [encode_message(message) for message in messages if isinstance(message, ModelResponse)]


async def run_the_tools(
    runner: PydanticAiRunner[None], session: SessionSide, outputs: Mapping[str, str]
) -> None:
    """Make the turn's model call, which asks for tools, and record these calls succeeded with an output."""
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested), requested
    session.defer(requested)
    for tool_call_id, output in outputs.items():
        session.finish(tool_call_id, ToolCallStatus.SUCCEEDED, output=output)


async def test_a_tool_calling_response_is_stored_split_and_replayed_as_the_same_response() -> None:
    asks = respond(
        TextPart("Checking Oslo first."),
        tool_call("get_weather", {"city": "Oslo"}, "call-1"),
        ThinkingPart("A postcard too."),
        tool_call("send_postcard", {"city": "Oslo"}, "call-2"),
    )
    model = ScriptedModel([asks, "Sunny, and the postcard is on its way.", "You asked about Oslo."])
    runner = PydanticAiRunner(Agent(model, tools=[get_weather, send_postcard]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo, and send a postcard"))
    await run_the_tools(runner, session, {"call-1": "sunny in Oslo", "call-2": "postcard sent from Oslo"})
    completed = await runner.run_model_step(session.context())
    assert isinstance(completed, TurnCompleted)
    session.store(completed.new_messages)

    check_message_projection(
        completed.new_messages,
        response_text="Checking Oslo first.",
        calls=[
            ProjectedCall("call-1", "get_weather", {"city": "Oslo"}),
            ProjectedCall("call-2", "send_postcard", {"city": "Oslo"}),
        ],
        outputs={"call-1": "sunny in Oslo", "call-2": "postcard sent from Oslo"},
    )
    # The thinking stays with the response's text, out of the call messages.
    assert [message.text for message in completed.new_messages[:3]] == ["Checking Oslo first.", None, None]

    session.start_turn(runner.build_user_message("What did I ask?"))
    answered = await runner.run_model_step(session.context())

    assert isinstance(answered, TurnCompleted) and answered.turn_error is None
    in_the_turn = responses_seen(model.calls[1].messages)
    replayed = responses_seen(model.calls[2].messages)
    assert replayed[: len(in_the_turn)] == in_the_turn, "replay gives Pydantic AI its own responses back"
    assert len(replayed) == 2


def stored_as_the_previous_release_did(messages: Sequence[ModelMessage]) -> list[FrameworkMessage]:
    """One stored message per Pydantic AI message, each holding the whole message, as 0.1.0 stored them."""
    stored: list[FrameworkMessage] = []
    for message in messages:
        if isinstance(message, ModelResponse):
            stored.append(FrameworkMessage(MessageRole.ASSISTANT, encode_message(message), text=message.text))
        else:
            role = MessageRole.TOOL if isinstance(message.parts[0], ToolReturnPart) else MessageRole.USER
            stored.append(FrameworkMessage(role, encode_message(message)))
    return stored


async def test_a_history_the_previous_release_stored_replays_unchanged() -> None:
    earlier_turn: list[ModelMessage] = [
        respond(TextPart("Let me check."), tool_call("get_weather", {"city": "Rome"}, "call-1")),
        ModelRequest(parts=[ToolReturnPart("get_weather", "sunny in Rome", tool_call_id="call-1")]),
        respond(TextPart("Rome is sunny.")),
    ]
    model = ScriptedModel(lambda messages: "Yes, Rome.")
    runner = PydanticAiRunner(Agent(model, tools=[get_weather]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Rome?"))
    session.store(stored_as_the_previous_release_did(earlier_turn))
    session.start_turn(runner.build_user_message("Did you say Rome?"))

    answered = await runner.run_model_step(session.context())

    assert isinstance(answered, TurnCompleted) and answered.turn_error is None
    [call] = model.calls
    assert responses_seen(call.messages) == responses_seen(earlier_turn)
    assert [part.model_response_str() for part in call.tool_returns] == ["sunny in Rome"]
    assert call.user_prompts == ["Weather in Rome?", "Did you say Rome?"]


async def test_a_split_response_missing_a_piece_ends_the_turn_before_any_model_call() -> None:
    model = ScriptedModel(
        [respond(TextPart("Both."), tool_call("get_weather", {"city": "Oslo"}, "call-1")), "Sunny.", "Hi."]
    )
    runner = PydanticAiRunner(Agent(model, tools=[get_weather]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    await run_the_tools(runner, session, {"call-1": "sunny"})
    completed = await runner.run_model_step(session.context())
    assert isinstance(completed, TurnCompleted)
    # Someone removed the stored call message (a piece) of the response.
    session.store([message for message in completed.new_messages if message.tool_call_id is None])
    session.store([message for message in completed.new_messages if message.role is MessageRole.TOOL])
    session.start_turn(runner.build_user_message("And tomorrow?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is not None
    assert "missing pieces" in outcome.turn_error or "interrupts the pieces" in outcome.turn_error
    assert len(model.calls) == 2, "no model call with a broken history"


class Forecast(BaseModel):
    city: str
    temperature_c: int


async def test_a_steered_turn_keeps_its_response_and_closes_an_unprocessed_output_call() -> None:
    asks = respond(
        TextPart("Checking, and here is my guess."),
        tool_call("get_weather", {"city": "Lima"}, "call-1"),
        tool_call("send_postcard", {"city": "Lima"}, "call-2"),
        tool_call("final_result", {"city": "Lima", "temperature_c": 21}, "output-1"),
    )
    model = ScriptedModel([asks, "Understood: no postcard."])
    agent = Agent(model, tools=[get_weather, send_postcard], output_type=[Forecast, str])
    runner = PydanticAiRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Forecast for Lima, and send a postcard"))
    await run_the_tools(runner, session, {"call-1": "21C in Lima"})
    assert list(session.records) == ["call-1", "call-2"], "the output call is not a tool Step"
    session.abandon("call-2", CancellationReason.STEERED)

    kept = await session.end_turn_early(runner)

    assert len(model.calls) == 1, "ending the turn made no model call"
    assert stored_calls_without_result(session.messages) == []
    results = {
        message.tool_call_id: message.tool_output for message in kept if message.role is MessageRole.TOOL
    }
    assert results == {
        "call-1": "21C in Lima",
        "call-2": STEERED_REJECTION_MESSAGE,
        # Pydantic AI never processed the output call, so it is closed the way Pydantic AI closes an
        # interrupted call.
        "output-1": INTERRUPTED_TOOL_RETURN_CONTENT,
    }
    session.start_turn(runner.build_user_message("Never mind the postcard"))
    answered = await runner.run_model_step(session.context())
    assert isinstance(answered, TurnCompleted) and answered.turn_error is None
    outcomes = {part.tool_call_id: part.outcome for part in model.calls[1].tool_returns}
    assert outcomes == {"call-1": "success", "call-2": "denied", "output-1": "interrupted"}
    assert model.calls[1].user_prompts[-1] == "Never mind the postcard"


async def test_a_turn_that_fails_after_its_tools_ran_keeps_every_result_and_is_not_retried() -> None:
    model = ScriptedModel([respond(tool_call("get_weather", {"city": "Oslo"}, "call-1"))])
    runner = PydanticAiRunner(Agent(model, tools=[get_weather]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    await run_the_tools(runner, session, {"call-1": "sunny in Oslo"})

    async def refuse(run: AgentRun[None, str], events: AgentEventWriter, watch: object) -> object:
        del run, events, watch
        raise UserError("the provider refused the history")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_runner, "_run_to_boundary", refuse)
        outcome = await runner.run_model_step(session.context())

    # A turn_error ends the turn without a retry, and the call's result is stored with it.
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error == "Pydantic AI refused the run: the provider refused the history"
    session.store(outcome.new_messages)
    assert stored_calls_without_result(session.messages) == []
    [result] = [message for message in outcome.new_messages if message.role is MessageRole.TOOL]
    assert (result.tool_call_id, result.tool_output) == ("call-1", "sunny in Oslo")
    assert json.loads(result.tool_arguments or "") == {"city": "Oslo"}


async def test_every_final_call_stores_the_sessions_outcome_text_while_the_model_sees_its_envelope() -> None:
    calls = [tool_call("get_weather", {"city": f"City {n}"}, f"call-{n}") for n in range(6)]
    for goes_on in (True, False):
        model = ScriptedModel([respond(*calls), "Done."])
        runner = PydanticAiRunner(Agent(model, tools=[get_weather]))
        session = SessionSide()
        session.start_turn(runner.build_user_message("Weather everywhere?"))
        deferred = await runner.run_model_step(session.context())
        assert isinstance(deferred, ToolCallsRequested)
        session.defer(deferred)
        # A JSON output with its own spacing stays as the tool wrote it.
        session.finish("call-0", ToolCallStatus.SUCCEEDED, output='{"sky": "clear",  "c":21}')
        session.finish("call-1", ToolCallStatus.FAILED, error="the weather service timed out")
        session.finish("call-2", ToolCallStatus.REJECTED, rejection_message="Not that city.")
        session.finish("call-3", ToolCallStatus.OUTCOME_UNKNOWN)
        session.abandon("call-4", CancellationReason.STEERED)
        session.abandon("call-5", CancellationReason.TURN_CANCELLED)
        records = dict(session.records)
        if goes_on:
            # The turn goes on: Pydantic AI writes the returns from `DeferredToolResults`.
            outcome = await runner.run_model_step(session.context())
            assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
            stored = outcome.new_messages
            shown = {part.tool_call_id: part.model_response_str() for part in model.calls[-1].tool_returns}
            assert shown["call-1"] == json.dumps(
                {"error": "The tool call failed: the weather service timed out"}, separators=(",", ":")
            ), "Pydantic AI's model still sees its own envelope"
        else:
            # The turn ends early (steered, cancelled, failed): the runner writes the returns itself.
            stored = await session.end_turn_early(runner)

        outputs = {message.tool_call_id: message.tool_output for message in stored if message.tool_output}
        assert outputs == {
            record.tool_call_id: describe_tool_call_outcome(record) for record in records.values()
        }
        assert outputs == {
            "call-0": '{"sky": "clear",  "c":21}',
            "call-1": "The tool call failed: the weather service timed out",
            "call-2": "Not that city.",
            "call-3": OUTCOME_UNKNOWN_TOOL_RESULT,
            "call-4": STEERED_REJECTION_MESSAGE,
            "call-5": TURN_CANCELLED_REJECTION_MESSAGE,
        }
