"""Stored messages: the shared projection, and replaying a history the previous release stored.

The SDK keeps a response's text in a `message` item and each call in a `function_call` item of its own,
so one stored message per item is already the projection every adapter shares; nothing is split or
joined, and a history stored by the previous release replays exactly as stored.
"""

from __future__ import annotations

import json

from agents import Agent, function_tool
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import ProjectedCall, SessionSide, check_message_projection
from dex_agents.values import FrameworkMessage, MessageRole, ToolCallStatus

from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedResponsesModel, call_item, reasoning_item, text_item

# A turn as dex-agents-openai-agents 0.1.0 stored it: one SDK input item per message.
_PREVIOUS_RELEASE_TURN = [
    (MessageRole.USER, '{"role":"user","content":"Where is A-1?"}'),
    (
        MessageRole.ASSISTANT,
        '{"id":"msg","content":[{"annotations":[],"text":"Let me check.","type":"output_text",'
        '"logprobs":[]}],"role":"assistant","status":"completed","type":"message"}',
    ),
    (
        MessageRole.ASSISTANT,
        '{"arguments":"{\\"order_id\\": \\"A-1\\"}","call_id":"read-1","name":"lookup_order",'
        '"type":"function_call","id":"read-1"}',
    ),
    (MessageRole.TOOL, '{"call_id":"read-1","output":"A-1: shipped Monday","type":"function_call_output"}'),
    (
        MessageRole.ASSISTANT,
        '{"id":"msg","content":[{"annotations":[],"text":"A-1 shipped on Monday.","type":"output_text",'
        '"logprobs":[]}],"role":"assistant","status":"completed","type":"message"}',
    ),
]


@function_tool
async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id}: shipped Monday"


@function_tool
async def send_receipt(order_id: str) -> str:
    """Mail an order's receipt."""
    return f"receipt for {order_id} sent"


async def test_a_history_stored_by_the_previous_release_replays_item_for_item() -> None:
    model = ScriptedResponsesModel.from_answers(["You are welcome."])
    runner = OpenAIAgentsRunner(Agent(name="orders", model=model, tools=[lookup_order]))
    session = SessionSide()
    session.turn_number = 1
    session.store([FrameworkMessage(role=role, framework_item=item) for role, item in _PREVIOUS_RELEASE_TURN])
    session.start_turn(runner.build_user_message("Thanks!"))

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    [call] = model.calls
    assert call.input_items == [
        *(json.loads(item) for _, item in _PREVIOUS_RELEASE_TURN),
        {"role": "user", "content": "Thanks!"},
    ]


async def test_reasoning_text_and_calls_are_stored_in_the_shared_projection() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [
                reasoning_item("Two orders, two tools."),
                text_item("Checking A-1 and mailing C-3."),
                call_item("lookup_order", {"order_id": "A-1"}, "call-1"),
                call_item("send_receipt", {"order_id": "C-3"}, "call-2"),
            ],
            "Done.",
        ]
    )
    runner = OpenAIAgentsRunner(Agent(name="orders", model=model, tools=[lookup_order, send_receipt]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Check A-1 and mail C-3"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    outputs = {"call-1": "A-1: shipped Monday", "call-2": "receipt for C-3 sent"}
    for call_id, output in outputs.items():
        session.finish(call_id, ToolCallStatus.SUCCEEDED, output=output)

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    check_message_projection(
        final.new_messages,
        response_text="Checking A-1 and mailing C-3.",
        calls=[
            ProjectedCall("call-1", "lookup_order", {"order_id": "A-1"}),
            ProjectedCall("call-2", "send_receipt", {"order_id": "C-3"}),
        ],
        outputs=outputs,
    )
    # The reasoning item is kept (without text) so the SDK gets it back; a UI skips it.
    assert (final.new_messages[0].role, final.new_messages[0].text) == (MessageRole.ASSISTANT, None)
    assert json.loads(final.new_messages[0].framework_item)["type"] == "reasoning"
