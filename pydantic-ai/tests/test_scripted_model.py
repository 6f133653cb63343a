"""`dex_agents_pydantic_ai.testing.ScriptedModel` on its own: the offline model a user develops against."""

from __future__ import annotations

from typing import Any, cast

import pytest
from dex_agents import ToolCallsRequested, ToolCallStatus, TurnCompleted
from dex_agents.testing import ScriptedResponse, ScriptedToolCall, SessionSide
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BaseToolReturnPart,
    FilePart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel

LOOKUPS: list[str] = []


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    LOOKUPS.append(order_id)
    return f"Order {order_id} shipped on Monday."


async def test_a_list_of_answers_drives_an_ordinary_agent_run_without_dex() -> None:
    # The README's example.
    model = ScriptedModel(
        [
            ModelResponse(
                parts=[
                    TextPart("Let me look that up."),
                    ToolCallPart("lookup_order", {"order_id": "A-17"}, tool_call_id="lookup-1"),
                ]
            ),
            "Order A-17 shipped on Monday.",
        ]
    )
    agent = Agent(model, tools=[lookup_order])
    LOOKUPS.clear()

    result = await agent.run("Where is order A-17?")

    assert result.output == "Order A-17 shipped on Monday."
    assert LOOKUPS == ["A-17"]
    [first, second] = model.calls
    assert first.user_prompts == ["Where is order A-17?"] and first.tool_names == ("lookup_order",)
    assert [part.model_response_str() for part in second.tool_returns] == ["Order A-17 shipped on Monday."]


async def test_streamed_answers_arrive_in_word_chunks() -> None:
    agent = Agent(ScriptedModel(["It is  sunny today."]))

    async with agent.run_stream("Weather?") as stream:
        chunks = [chunk async for chunk in stream.stream_text(delta=True, debounce_by=None)]

    assert "".join(chunks) == "It is  sunny today."
    assert chunks == ["It ", "is  ", "sunny ", "today."]


async def test_the_answer_follows_from_the_conversation_so_a_retried_call_gets_the_same_one() -> None:
    model = ScriptedModel(
        [
            ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "A-1"}, tool_call_id="lookup-1")]),
            "A-1 shipped.",
        ]
    )
    runner = PydanticAiRunner(Agent(model, tools=[lookup_order]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Where is A-1?"))

    first = await runner.run_model_step(session.context())
    session.attempt = 2  # RunModel's second attempt, perhaps in another Worker process
    retried = await runner.run_model_step(session.context())

    assert isinstance(first, ToolCallsRequested) and isinstance(retried, ToolCallsRequested)
    assert first.tool_calls == retried.tool_calls
    session.defer(retried)
    session.finish("lookup-1", ToolCallStatus.SUCCEEDED, output="shipped")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.new_messages[-1].text == "A-1 shipped."


async def test_a_function_answers_from_what_the_call_is_shown() -> None:
    def answer(messages: list[ModelMessage]) -> str | ModelResponse:
        results = [
            part.model_response_str()
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, BaseToolReturnPart)
        ]
        if not results:
            return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "B-2"})])
        return f"Found it: {results[-1]}"

    result = await Agent(ScriptedModel(answer), tools=[lookup_order]).run("Where is B-2?")

    assert result.output == "Found it: Order B-2 shipped on Monday."


async def test_a_call_beyond_the_script_fails_with_a_clear_error() -> None:
    agent = Agent(ScriptedModel(["Hi."]))
    first = await agent.run("Hello")

    with pytest.raises(LookupError, match="has 1 answers, and this call is shown 1 model responses"):
        await agent.run("Hello again", message_history=first.all_messages())


def test_an_answer_the_model_cannot_give_is_refused_when_the_model_is_built() -> None:
    with pytest.raises(TypeError, match="a str, a ModelResponse or a ScriptedResponse, got int"):
        ScriptedModel(cast(list[str], [42]))
    image = FilePart(content=cast(Any, None))  # the part's kind is refused before its content is read
    with pytest.raises(TypeError, match="cannot answer with a FilePart"):
        ScriptedModel([ModelResponse(parts=[image])])


async def test_the_cores_scripted_responses_work_and_a_call_without_an_id_gets_the_same_one_each_time() -> (
    None
):
    lookup = ScriptedToolCall("lookup_order", {"order_id": "A-18"}, tool_call_id="")
    model = ScriptedModel(
        [ScriptedResponse(text="Checking.", tool_calls=(lookup,)), ScriptedResponse(text="Done.")]
    )

    first = await Agent(model, tools=[lookup_order]).run("Where is A-18?")
    # The same conversation again, as a retried model call or another Worker would have it.
    second = await Agent(model, tools=[lookup_order]).run("Where is A-18?")

    assert (first.output, second.output) == ("Done.", "Done.")
    returned = [call.tool_returns[0] for call in model.calls if call.tool_returns]
    assert [(part.tool_call_id, part.content) for part in returned] == [
        ("call-1-1", "Order A-18 shipped on Monday."),
        ("call-1-1", "Order A-18 shipped on Monday."),
    ]
