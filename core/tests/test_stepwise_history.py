"""How Stepwise stores an answer (the projection every runner shares) and replays stored messages to LiteLLM.

Each test drives the runner against `SessionSide` and reads the chat messages LiteLLM handed the provider,
so it checks the request a real provider would get.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dex_agents import (
    AgentMessage,
    AgentTurnOutcome,
    FrameworkMessage,
    MessageRole,
    RunStateFormat,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
    build_turn_failure_note,
)
from dex_agents.stepwise import MISSING_TOOL_RESULT, AgentDefinition, StepwiseRunner, function_tool
from dex_agents.testing import ProjectedCall, SessionSide, check_message_projection
from tests.stepwise_litellm import CHUNK_MODEL, chunk, chunk_model, tool_delta, usage_chunk

INSTRUCTIONS = {"role": "system", "content": "You handle orders."}


async def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    return f"{order_id} has shipped"


def runner_for(model_name: str, *answers: list[object]) -> StepwiseRunner:
    definition = AgentDefinition(
        name="orders",
        model=chunk_model(model_name, answers=answers),
        instructions=INSTRUCTIONS["content"],
        tools=[function_tool(lookup_order, effect="read")],
    )
    return StepwiseRunner(definition)


async def step(runner: StepwiseRunner, side: SessionSide) -> AgentTurnOutcome:
    """One `RunModel`: the outcome's messages and run state are stored as the session stores them."""
    outcome = await runner.run_model_step(side.context())
    if isinstance(outcome, ToolCallsRequested):
        side.defer(outcome)
    else:
        side.store(outcome.new_messages)
    return outcome


def requests(model_name: str) -> list[list[dict[str, Any]]]:
    return CHUNK_MODEL.requests[model_name]


def chat_call(tool_call_id: str, order_id: str) -> dict[str, object]:
    arguments = json.dumps({"order_id": order_id}, separators=(",", ":"))
    return {
        "id": tool_call_id,
        "type": "function",
        "function": {"name": "lookup_order", "arguments": arguments},
    }


def two_lookups(text: str | None) -> list[object]:
    """An answer that looks up A-1 and B-2, with ``text`` before the calls when given."""
    pieces: list[object] = [] if text is None else [chunk(content=text)]
    return [
        *pieces,
        tool_delta(0, "read-1", "lookup_order", '{"order_id":"A-1"}'),
        tool_delta(1, "read-2", "lookup_order", '{"order_id":"B-2"}'),
        usage_chunk(10, 5, finish="tool_calls"),
    ]


def finish_lookups(side: SessionSide) -> None:
    side.finish("read-1", ToolCallStatus.SUCCEEDED, output="A-1 has shipped")
    side.finish("read-2", ToolCallStatus.SUCCEEDED, output="B-2 has shipped")


def as_framework_message(message: AgentMessage) -> FrameworkMessage:
    fields = ("role", "framework_item", "text", "tool_call_id", "tool_name", "tool_arguments", "tool_output")
    return FrameworkMessage(**{name: getattr(message, name) for name in fields})


RESULTS = [
    {"role": "tool", "tool_call_id": "read-1", "content": "A-1 has shipped"},
    {"role": "tool", "tool_call_id": "read-2", "content": "B-2 has shipped"},
]


async def test_an_answer_is_stored_as_text_then_one_message_per_call_and_replayed_as_the_one_answer() -> None:
    runner = runner_for(
        "projection",
        [chunk(reasoning_content="Two orders."), *two_lookups("Checking both.")],
        [chunk(content="Both shipped."), usage_chunk(20, 3)],
    )
    side = SessionSide()
    side.start_turn(runner.build_user_message("Where are A-1 and B-2?"))

    requested = await step(runner, side)
    finish_lookups(side)
    completed = await step(runner, side)

    assert isinstance(requested, ToolCallsRequested) and isinstance(completed, TurnCompleted)
    # The answer and its calls are stored with the calls, before any tool runs.
    assert [(message.text, message.tool_call_id) for message in requested.new_messages] == [
        ("Checking both.", None),
        (None, "read-1"),
        (None, "read-2"),
    ]
    stored = [as_framework_message(message) for message in side.messages[1:]]
    check_message_projection(
        stored,
        response_text="Checking both.",
        calls=[
            ProjectedCall("read-1", "lookup_order", {"order_id": "A-1"}),
            ProjectedCall("read-2", "lookup_order", {"order_id": "B-2"}),
        ],
        outputs={"read-1": "A-1 has shipped", "read-2": "B-2 has shipped"},
    )
    # The provider gets the answer back as it sent it: one message, its reasoning and both calls.
    assert requests("projection")[1] == [
        INSTRUCTIONS,
        {"role": "user", "content": "Where are A-1 and B-2?"},
        {
            "role": "assistant",
            "content": "Checking both.",
            "reasoning_content": "Two orders.",
            "tool_calls": [chat_call("read-1", "A-1"), chat_call("read-2", "B-2")],
        },
        *RESULTS,
    ]


LEGACY_ANSWER = {
    "role": "assistant",
    "content": "Checking both.",
    "tool_calls": [chat_call("read-1", "A-1"), chat_call("read-2", "B-2")],
}


def legacy_history(side: SessionSide) -> None:
    """A turn as Stepwise stored it before each call had its own message: one message per answer."""

    def stored(role: MessageRole, item: Mapping[str, object], **projection: str) -> FrameworkMessage:
        return FrameworkMessage(role=role, framework_item=json.dumps(item), **projection)

    side.start_turn(stored(MessageRole.USER, {"role": "user", "content": "Where are A-1 and B-2?"}))
    side.store(
        [
            stored(MessageRole.ASSISTANT, LEGACY_ANSWER, text="Checking both."),
            *(
                stored(MessageRole.TOOL, result, tool_call_id=str(result["tool_call_id"]))
                for result in RESULTS
            ),
            stored(
                MessageRole.ASSISTANT, {"role": "assistant", "content": "Both shipped."}, text="Both shipped."
            ),
        ]
    )


async def test_a_history_stored_one_message_per_answer_still_replays_next_to_the_new_projection() -> None:
    runner = runner_for("legacy", two_lookups(None), [chunk(content="All shipped."), usage_chunk(30, 3)])
    side = SessionSide()
    legacy_history(side)
    side.start_turn(runner.build_user_message("Check them once more."))

    requested = await step(runner, side)
    finish_lookups(side)
    await step(runner, side)

    # An answer with calls and no text stores no empty text message: only its calls.
    assert isinstance(requested, ToolCallsRequested)
    assert [(message.text, message.tool_call_id) for message in requested.new_messages] == [
        (None, "read-1"),
        (None, "read-2"),
    ]
    earlier_turn = [
        {"role": "user", "content": "Where are A-1 and B-2?"},
        LEGACY_ANSWER,
        *RESULTS,
        {"role": "assistant", "content": "Both shipped."},
    ]
    assert requests("legacy") == [
        [INSTRUCTIONS, *earlier_turn, {"role": "user", "content": "Check them once more."}],
        [
            INSTRUCTIONS,
            *earlier_turn,
            {"role": "user", "content": "Check them once more."},
            # LiteLLM leaves out the answer's empty content for the provider.
            {"role": "assistant", "tool_calls": [chat_call("read-1", "A-1"), chat_call("read-2", "B-2")]},
            *RESULTS,
        ],
    ]


FOREIGN_RUN_STATE = RunStateFormat("dex-agents-stepwise/run-state", 2, "StepwiseRunner").wrap({})


async def test_a_run_state_of_another_release_ends_the_turn_and_the_next_request_closes_its_calls() -> None:
    runner = runner_for(
        "upgrade", two_lookups("Checking both."), [chunk(content="Sorry."), usage_chunk(9, 1)]
    )
    side = SessionSide()
    side.start_turn(runner.build_user_message("Where are A-1 and B-2?"))
    await step(runner, side)
    finish_lookups(side)
    # A Worker of a later release wrote the run state of this turn's last model call.
    side.framework_run_state = FOREIGN_RUN_STATE

    ended = await runner.run_model_step(side.context())

    assert isinstance(ended, TurnCompleted) and ended.new_messages == ()
    assert ended.turn_error is not None
    assert "version 2 of 'dex-agents-stepwise/run-state'" in ended.turn_error
    assert len(requests("upgrade")) == 1  # refused before any model call
    # The session keeps the results in its turn-failure note; the calls' own results were never stored.
    note = build_turn_failure_note(list(side.records.values()))
    side.store([runner.build_user_message(note)])
    side.start_turn(runner.build_user_message("Did it work?"))
    await step(runner, side)

    # Providers refuse a call without a result, so the next request gives each one that says so.
    assert requests("upgrade")[1][2:] == [
        {
            "role": "assistant",
            "content": "Checking both.",
            "tool_calls": [chat_call("read-1", "A-1"), chat_call("read-2", "B-2")],
        },
        {"role": "tool", "tool_call_id": "read-1", "content": MISSING_TOOL_RESULT},
        {"role": "tool", "tool_call_id": "read-2", "content": MISSING_TOOL_RESULT},
        {"role": "user", "content": note},
        {"role": "user", "content": "Did it work?"},
    ]
