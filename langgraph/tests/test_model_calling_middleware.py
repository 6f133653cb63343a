"""Middleware that makes model calls of its own, or rewrites the conversation, in the model Step.

`SummarizationMiddleware` is refused when the runner is built: it would replace the graph's conversation
with a summary that the session's stored conversation cannot follow, so every turn past its trigger would
summarize again and store the summary as a user message (or, with a model, fail on a second model call).
A middleware's own model call that LangChain marks as internal (`LLMToolSelectorMiddleware`) is a counted
model call of the `RunModel` Step. Trimming the model request in `wrap_model_call`, the fix the refusal
names, keeps working past any length.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

import pytest
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import AgentUsage, MessageRole, ToolCallStatus
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    LLMToolSelectorMiddleware,
    ModelRequest,
    ModelResponse,
    SummarizationMiddleware,
    wrap_model_call,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, trim_messages
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call


@tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Return the local time of a city."""
    return f"noon in {city}"


def _runner(model: ScriptedChatModel, *middleware: AgentMiddleware) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model,
            tools=[get_weather, get_time],
            middleware=[*middleware, DexToolGate()],
            checkpointer=checkpointer,
        )

    return LangGraphRunner(build)


def _plain_summary(messages: Sequence[BaseMessage]) -> str:
    return f"{len(messages)} earlier messages"


@pytest.mark.parametrize("summarizer", ["model", "function"])
def test_summarization_middleware_is_refused_when_the_runner_is_built(summarizer: str) -> None:
    summary_model = ScriptedChatModel(responses=[respond("The user asked about the weather.")])
    middleware = SummarizationMiddleware(
        summary_model,
        trigger=("messages", 6),
        keep=("messages", 2),
        summarizer=_plain_summary if summarizer == "function" else None,
    )

    with pytest.raises(TypeError) as refused:
        _runner(ScriptedChatModel(responses=[]), middleware)

    message = str(refused.value)
    assert "SummarizationMiddleware" in message
    assert "wrap_model_call" in message and "trim_messages" in message, "the error must name the fix"
    assert len(summary_model.inputs) == 0


def _trimmed_to_last_four() -> AgentMiddleware:
    # The fix the refusal names: bound what one model call sees, not what the session stores.
    @wrap_model_call(name="last_four")
    async def last_four(
        request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | AIMessage:
        kept = trim_messages(
            request.messages, max_tokens=4, token_counter=len, strategy="last", start_on="human"
        )
        return await handler(request.override(messages=cast(list[AnyMessage], kept)))

    return last_four


async def test_trimming_the_model_request_keeps_every_turn_working_past_any_length() -> None:
    turns = 8
    # The scripted model answers by the number of answers in its input; a trimmed input always holds one.
    model = ScriptedChatModel(responses=[respond("answer 0"), respond("noted")])
    runner = _runner(model, _trimmed_to_last_four())
    session = SessionSide()

    for number in range(turns):
        session.start_turn(runner.build_user_message(f"question {number}"))
        outcome = await runner.run_model_step(session.context())
        assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None, outcome
        assert outcome.usage.model_calls == 1
        session.store(outcome.new_messages)

    assert model.input_texts(turns) == [
        "user: question 6",
        "assistant: noted",
        "user: question 7",
    ]
    # The session keeps the whole conversation; only the model's input was trimmed.
    assert [m.text for m in session.messages][:2] == ["question 0", "answer 0"]
    assert len(session.messages) == 2 * turns


async def test_context_editing_past_its_trigger_clears_old_tool_outputs_only_in_the_model_input() -> None:
    model = ScriptedChatModel(
        responses=[
            respond("", tool_call("get_weather", {"city": "Oslo"}, "call-1")),
            respond("Sunny in Oslo."),
            respond("Still sunny."),
        ]
    )
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=10, keep=0)])
    runner = _runner(model, editing)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-1"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, TurnCompleted) and first.turn_error is None
    session.store(first.new_messages)
    session.start_turn(runner.build_user_message("And now?"))

    second = await runner.run_model_step(session.context())

    assert isinstance(second, TurnCompleted) and second.turn_error is None
    assert second.usage.model_calls == 1
    assert "tool get_weather [call-1] success: [cleared]" in model.input_texts(3)
    assert [m.tool_output for m in session.messages if m.role is MessageRole.TOOL] == ["sunny in Oslo"]


async def test_a_model_call_a_middleware_makes_is_a_counted_model_call_of_the_step() -> None:
    # The selection call sees only the user's request, never an answer, so it answers its first response.
    selector_model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("ToolSelectionResponse", {"tools": ["get_weather"]}, "select-1"),
                input_tokens=40,
                output_tokens=3,
            )
        ]
    )
    model = ScriptedChatModel(
        responses=[
            respond("Checking.", tool_call("get_weather", {"city": "Oslo"}, "call-1")),
            respond("Sunny in Oslo.", input_tokens=11),
        ]
    )
    runner = _runner(model, LLMToolSelectorMiddleware(model=selector_model, max_tools=1))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested), requested
    assert (len(selector_model.inputs), len(model.inputs)) == (1, 1)
    assert model.offered_tools[0] == ["get_weather"], "the selection reached the agent's model call"
    assert requested.usage == AgentUsage(model_calls=2, input_tokens=50, output_tokens=8)
    assert "".join(session.text_deltas()) == "Checking.", "the selection call must not stream as text"
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-1"))

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert (len(selector_model.inputs), len(model.inputs)) == (2, 2)
    assert final.usage == AgentUsage(model_calls=2, input_tokens=51, output_tokens=8)
    assert final.new_messages[-1].text == "Sunny in Oslo."
