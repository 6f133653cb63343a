"""Stored messages: the shared projection of a tool-calling `AIMessage`, joined back on replay, and histories
that release 0.1.0 stored (one stored message per LangChain message) replaying as they are."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dex_agents import AgentMessage, FrameworkMessage, MessageRole
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import ProjectedCall, SessionSide, check_message_projection
from dex_agents.values import ToolCallStatus
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph._messages import history_from_stored_messages, project_messages
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call

RELEASE_0_1_0_HISTORY = Path(__file__).with_name("data") / "history-written-by-0.1.0.json"


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


@tool
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"{order_id} refunded"


def order_runner(model: ScriptedChatModel) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model, tools=[lookup_order, refund_order], middleware=[DexToolGate()], checkpointer=checkpointer
        )

    return LangGraphRunner(build)


def stored_round_trip(messages: list[BaseMessage]) -> tuple[list[FrameworkMessage], list[BaseMessage]]:
    """Project ``messages``, store them as the session does, and rebuild the history from the store."""
    projected = project_messages(messages)
    session = SessionSide()
    session.store(projected)
    return projected, history_from_stored_messages(session.messages)


def answer_with_two_calls(content: str | list[str | dict[str, Any]]) -> AIMessage:
    return AIMessage(
        content=content,
        id="lc_run--answer-1",
        tool_calls=[
            tool_call("lookup_order", {"order_id": "A-1"}, "call-1"),
            tool_call("refund_order", {"order_id": "B-2"}, "call-2"),
        ],
        usage_metadata={"input_tokens": 31, "output_tokens": 7, "total_tokens": 38},
        response_metadata={"model_name": "gpt-5", "finish_reason": "tool_calls"},
    )


def results() -> list[BaseMessage]:
    return [
        ToolMessage("A-1 shipped", tool_call_id="call-1", name="lookup_order", id="tool-1"),
        ToolMessage(
            "No refunds today.", tool_call_id="call-2", name="refund_order", status="error", id="tool-2"
        ),
    ]


def test_a_tool_calling_answer_is_stored_in_parts_and_replays_as_the_same_message() -> None:
    answer = answer_with_two_calls("Let me check both.")

    projected, replayed = stored_round_trip([answer, *results()])

    check_message_projection(
        projected,
        response_text="Let me check both.",
        calls=[
            ProjectedCall("call-1", "lookup_order", {"order_id": "A-1"}),
            ProjectedCall("call-2", "refund_order", {"order_id": "B-2"}),
        ],
        outputs={"call-1": "A-1 shipped", "call-2": "No refunds today."},
    )
    assert [(message.role, message.text, message.tool_arguments) for message in projected[:3]] == [
        (MessageRole.ASSISTANT, "Let me check both.", None),
        (MessageRole.ASSISTANT, None, '{"order_id":"A-1"}'),
        (MessageRole.ASSISTANT, None, '{"order_id":"B-2"}'),
    ]
    # The framework gets its own message back: same ID, content, calls, usage and metadata.
    assert replayed == [answer, *results()]


def test_content_blocks_and_an_answer_without_text_replay_unchanged() -> None:
    blocks: list[str | dict[str, Any]] = [
        {"type": "thinking", "thinking": "Two orders."},
        {"type": "tool_use", "id": "call-1", "name": "lookup_order", "input": {"order_id": "A-1"}},
        {"type": "tool_use", "id": "call-2", "name": "refund_order", "input": {"order_id": "B-2"}},
    ]
    answer = answer_with_two_calls(blocks)

    projected, replayed = stored_round_trip([answer, *results()])

    # No text, so no empty text message: the first call's message starts the answer.
    assert [(message.role, message.tool_call_id, message.text) for message in projected] == [
        (MessageRole.ASSISTANT, "call-1", None),
        (MessageRole.ASSISTANT, "call-2", None),
        (MessageRole.TOOL, "call-1", None),
        (MessageRole.TOOL, "call-2", None),
    ]
    assert replayed == [answer, *results()]


def release_0_1_0_session() -> SessionSide:
    session = SessionSide()
    stored = json.loads(RELEASE_0_1_0_HISTORY.read_text())
    session.messages = [AgentMessage(**message, created_at="2026-10-01T00:00:00Z") for message in stored]
    session.turn_number = 1
    return session


async def test_a_history_stored_by_release_0_1_0_replays_and_the_next_turns_build_on_it() -> None:
    session = release_0_1_0_session()
    # 0.1.0 stored the tool-calling answer as one message, with its calls in the LangChain item only.
    assert [(message.role, message.tool_call_id) for message in session.messages[1:3]] == [
        (MessageRole.ASSISTANT, None),
        (MessageRole.TOOL, "call-1"),
    ]
    model = ScriptedChatModel(
        responses=[
            "(answered in release 0.1.0)",
            "(answered in release 0.1.0)",
            respond("Let me check C-3.", tool_call("lookup_order", {"order_id": "C-3"}, "call-3")),
            respond("C-3 shipped too."),
        ]
    )
    runner = order_runner(model)
    session.start_turn(runner.build_user_message("And C-3?"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested), requested
    assert model.input_texts(1) == [
        "user: Where is A-1? Refund B-2.",
        "assistant: Let me check both.",
        'assistant calls lookup_order {"order_id": "A-1"} [call-1]',
        'assistant calls refund_order {"order_id": "B-2"} [call-2]',
        "tool lookup_order [call-1] success: A-1 shipped",
        "tool refund_order [call-2] error: No refunds today.",
        "assistant: A-1 has shipped; I did not refund B-2.",
        "user: And C-3?",
    ]
    # The run state leaves the old stored messages out and finds them again when the turn resumes.
    session.defer(requested)
    session.finish("call-3", ToolCallStatus.SUCCEEDED, output="C-3 shipped")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.turn_error is None, final
    session.store(final.new_messages)
    old_answer = history_from_stored_messages(session.messages)[1]
    assert isinstance(old_answer, AIMessage)
    assert [call["id"] for call in old_answer.tool_calls] == ["call-1", "call-2"]
    assert old_answer.usage_metadata == {"input_tokens": 31, "output_tokens": 7, "total_tokens": 38}
    assert [message.text for message in session.messages[-4:]] == [
        "Let me check C-3.",
        None,
        None,
        "C-3 shipped too.",
    ]


async def test_a_stored_part_without_the_parts_before_it_ends_the_turn_with_a_clear_error() -> None:
    session = SessionSide()
    answer_parts = project_messages([answer_with_two_calls("Let me check both."), *results()])
    # The answer's first part, which holds the LangChain message, is missing.
    session.store([*project_messages([HumanMessage("Where is A-1?")]), *answer_parts[1:]])
    model = ScriptedChatModel(responses=["Never said."])
    runner = order_runner(model)
    session.start_turn(runner.build_user_message("Hello?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None
    assert "stored message 2 is part 1 of AI message 'lc_run--answer-1'" in outcome.turn_error
    assert "cannot be replayed" in outcome.turn_error
    assert model.inputs == []


def test_a_release_0_1_0_answer_and_its_stored_copy_in_parts_are_the_same_message() -> None:
    old = release_0_1_0_session().messages
    old_history = history_from_stored_messages(old)

    _, replayed = stored_round_trip(old_history[1:])

    assert replayed == old_history[1:]
