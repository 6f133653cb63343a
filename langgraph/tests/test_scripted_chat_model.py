"""`ScriptedChatModel` on its own: a chat model that runs inside `create_agent`, offline."""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
from dex_agents.testing import ScriptedResponse, ScriptedToolCall
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call

# The docs page that holds the snippet (it moved there from the README).
MODELS_PAGE = Path(__file__).resolve().parents[2] / "docs/pages/frameworks/langgraph/models.md"


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"order {order_id}: shipped"


def two_answers() -> ScriptedChatModel:
    return ScriptedChatModel(
        responses=[
            AIMessage(
                "Let me look that up.", tool_calls=[tool_call("lookup_order", {"order_id": "7"}, "c-1")]
            ),
            "Order 7 has shipped.",
        ]
    )


def test_the_models_page_snippet_runs_as_written() -> None:
    section = MODELS_PAGE.read_text().split("## Offline development and tests: `ScriptedChatModel`", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(match.group(1), "models.md", "exec"), {"__name__": "docs_snippet"})
    lines = printed.getvalue().splitlines()
    assert lines[0] == "Order 7 shipped on Monday."
    assert "'input_tokens'" in lines[1] and "'output_tokens': 5" in lines[1], lines[1]


async def test_it_streams_text_in_words_then_the_calls_and_the_usage_in_a_last_chunk() -> None:
    model = two_answers()

    chunks = [chunk async for chunk in model.astream([HumanMessage("Where is order 7?")])]

    assert [chunk.content for chunk in chunks] == ["Let ", "me ", "look ", "that ", "up.", ""]
    assert isinstance(chunks[-1], AIMessageChunk)
    assert [(call["name"], call["args"], call["id"]) for call in chunks[-1].tool_calls] == [
        ("lookup_order", {"order_id": "7"}, "c-1")
    ]
    # Without usage of its own, an answer reports one token per word: of "user: Where is order 7?", and of
    # its text and the call's arguments, '{"order_id": "7"}'.
    assert chunks[-1].usage_metadata == {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12}
    assert chunks[-1].response_metadata["model_name"] == "dex-scripted"


async def test_inside_create_agent_it_calls_the_tool_and_answers_from_the_conversation_so_far() -> None:
    model = ScriptedChatModel(
        responses=[
            respond("Checking.", tool_call("lookup_order", {"order_id": "7"}, "c-1"), input_tokens=40),
            respond("Order 7 has shipped.", input_tokens=60),
        ]
    )
    agent = create_agent(model, tools=[lookup_order])

    result = await agent.ainvoke({"messages": [{"role": "user", "content": "Where is order 7?"}]})

    assert [message.text for message in result["messages"]] == [
        "Where is order 7?",
        "Checking.",
        "order 7: shipped",
        "Order 7 has shipped.",
    ]
    assert result["messages"][-1].usage_metadata["input_tokens"] == 60
    assert model.offered_tools == [["lookup_order"], ["lookup_order"]]
    assert model.input_texts(2)[-1] == "tool lookup_order [c-1] success: order 7: shipped"
    # Another instance (another Worker process) given the same conversation answers the same next reply.
    fresh = two_answers()
    assert (await fresh.ainvoke(result["messages"][:3])).text == "Order 7 has shipped."


def test_a_call_past_the_end_of_the_script_says_which_answer_is_missing() -> None:
    model = ScriptedChatModel(responses=["Hello."])

    with pytest.raises(ValueError, match="no answer for model call 2 of this conversation"):
        model.invoke([HumanMessage("Hi"), AIMessage("Hello."), HumanMessage("And now?")])


async def test_without_responses_it_needs_a_run_model_call_of_the_session_script() -> None:
    with pytest.raises(RuntimeError, match=r"with_model_call_scope\(\).*responses=\[\.\.\.\]"):
        await ScriptedChatModel().ainvoke([HumanMessage("Hi")])
    with pytest.raises(RuntimeError, match="only asynchronously"):
        ScriptedChatModel().invoke([HumanMessage("Hi")])


def answer_from_the_tool_result(messages: Sequence[BaseMessage]) -> AIMessage | str:
    """Looks the order up first, then repeats what the lookup returned, or says why it has nothing."""
    results = [message for message in messages if isinstance(message, ToolMessage)]
    if not results:
        return respond("Checking.", tool_call("lookup_order", {"order_id": "7"}, "c-1"), input_tokens=40)
    if results[-1].status == "error":
        return f"I could not look it up: {results[-1].text}"
    return f"The desk says: {results[-1].text}."


async def test_with_respond_it_answers_from_what_the_conversation_holds() -> None:
    model = ScriptedChatModel(respond=answer_from_the_tool_result)
    agent = create_agent(model, tools=[lookup_order])

    result = await agent.ainvoke({"messages": [{"role": "user", "content": "Where is order 7?"}]})

    assert result["messages"][-1].text == "The desk says: order 7: shipped."
    assert result["messages"][1].usage_metadata["input_tokens"] == 40
    # A text answer reports the word estimate, as with a list of answers.
    assert result["messages"][-1].usage_metadata["output_tokens"] == 6
    # The same conversation with a failed lookup gets another answer: the function read the result.
    failed = [*result["messages"][:2], ToolMessage("no such order", tool_call_id="c-1", status="error")]
    assert model.invoke(failed).text == "I could not look it up: no such order"
    chunks = [chunk async for chunk in model.astream(failed)]
    assert "".join(str(chunk.content) for chunk in chunks) == "I could not look it up: no such order"


def test_respond_and_responses_are_one_or_the_other_and_respond_returns_a_message() -> None:
    with pytest.raises(ValueError, match="responses or respond, not both"):
        ScriptedChatModel(responses=["Hi."], respond=answer_from_the_tool_result)
    model = ScriptedChatModel(respond=lambda messages: 42)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="must return an AIMessage or text, got int"):
        model.invoke([HumanMessage("Hi")])


def test_the_cores_scripted_response_shapes_work_and_a_left_out_tool_call_id_is_generated() -> None:
    model = ScriptedChatModel(
        responses=[
            ScriptedResponse(
                text="Looking.",
                tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "7"}, "lookup-7"),),
                input_tokens=12,
                output_tokens=4,
            ),
            ScriptedResponse(
                text="And again.", tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "8"}, ""),)
            ),
            ScriptedResponse(text="Both have shipped."),
        ]
    )
    agent = create_agent(model, tools=[lookup_order])

    result = agent.invoke({"messages": [HumanMessage("Where are 7 and 8?")]})

    first, second = [message for message in result["messages"] if isinstance(message, AIMessage)][:2]
    assert first.text == "Looking." and first.tool_calls[0]["id"] == "lookup-7"
    assert first.usage_metadata is not None and first.usage_metadata["input_tokens"] == 12
    generated = second.tool_calls[0]["id"]
    assert generated is not None and re.fullmatch(r"call-[0-9a-f]{12}", generated)
    results = [message for message in result["messages"] if isinstance(message, ToolMessage)]
    assert [(message.tool_call_id, message.text) for message in results] == [
        ("lookup-7", "order 7: shipped"),
        (generated, "order 8: shipped"),
    ]
    assert result["messages"][-1].text == "Both have shipped."
