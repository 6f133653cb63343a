"""The shared projection check fails for the shapes adapters used to store."""

import json

import pytest

from dex_agents import (
    STEERED_REJECTION_MESSAGE,
    AgentToolCall,
    FrameworkMessage,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
)
from dex_agents.testing import ProjectedCall, check_message_projection

CALLS = [ProjectedCall("call-1", "lookup_order", {"order_id": "A-1"})]
OUTPUTS = {"call-1": "shipped"}


def _assistant(text: str | None = None, **tool: str) -> FrameworkMessage:
    return FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text=text, **tool)


def _result(**fields: str | None) -> FrameworkMessage:
    return FrameworkMessage(role=MessageRole.TOOL, framework_item="{}", **fields)  # pyright: ignore[reportArgumentType]


CALL = {"tool_call_id": "call-1", "tool_name": "lookup_order", "tool_arguments": '{"order_id": "A-1"}'}
RESULT = _result(tool_output="shipped", **CALL)


def test_the_shared_shape_passes_with_reasoning_items_anywhere() -> None:
    check_message_projection(
        [_assistant(), _assistant("Let me look."), _assistant(**CALL), RESULT, _assistant("Done.")],
        response_text="Let me look.",
        calls=CALLS,
        outputs=OUTPUTS,
    )


@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([_assistant("Let me look."), RESULT], "each call must be one assistant message"),
        ([_assistant("Let me look.", **CALL), RESULT], "without tool fields"),
        (
            [
                _assistant("Let me look."),
                _assistant(**CALL),
                _result(tool_output="shipped", tool_call_id="call-1"),
            ],
            "must carry the call's name and arguments",
        ),
        ([_assistant(**CALL), _assistant("Let me look."), RESULT], "comes before its calls"),
        ([_assistant("Let me look."), RESULT, _assistant(**CALL)], "comes after its call"),
    ],
)
def test_a_projection_that_breaks_the_shape_fails_with_its_reason(
    messages: list[FrameworkMessage], problem: str
) -> None:
    with pytest.raises(AssertionError, match=problem):
        check_message_projection(messages, response_text="Let me look.", calls=CALLS, outputs=OUTPUTS)


REJECTED = AgentToolCall(
    tool_call_id="call-1",
    turn_id="turn-1",
    tool_name="lookup_order",
    arguments='{"order_id":"A-1"}',
    effect=ToolEffect.READ,
    requires_approval=True,
    status=ToolCallStatus.REJECTED,
    rejection_message=STEERED_REJECTION_MESSAGE,
)


def test_a_non_succeeded_call_passes_with_exactly_its_outcome_text() -> None:
    check_message_projection(
        [
            _assistant("Let me look."),
            _assistant(**CALL),
            _result(tool_output=STEERED_REJECTION_MESSAGE, **CALL),
        ],
        response_text="Let me look.",
        calls=CALLS,
        outputs={},
        final_records=[REJECTED],
    )


@pytest.mark.parametrize(
    "stored",
    [
        json.dumps({"error": STEERED_REJECTION_MESSAGE}),
        json.dumps(json.loads(STEERED_REJECTION_MESSAGE), sort_keys=True),
        f"Error: {STEERED_REJECTION_MESSAGE}",
    ],
    ids=["error-envelope", "re-serialised", "prefixed"],
)
def test_a_non_succeeded_call_in_another_shape_fails(stored: str) -> None:
    with pytest.raises(AssertionError, match="must carry exactly"):
        check_message_projection(
            [_assistant("Let me look."), _assistant(**CALL), _result(tool_output=stored, **CALL)],
            response_text="Let me look.",
            calls=CALLS,
            outputs={},
            final_records=[REJECTED],
        )


def test_a_call_with_neither_an_output_nor_a_record_is_a_mistake_of_the_caller() -> None:
    with pytest.raises(AssertionError, match="in outputs or final_records"):
        check_message_projection(
            [_assistant("Let me look."), _assistant(**CALL), RESULT],
            response_text="Let me look.",
            calls=CALLS,
            outputs={},
        )
