"""A conversation that release 0.1.0 stored goes on with this release, with the real CLI.

`fixtures/release-0.1.0-history.json` is the stored messages of one turn recorded with the package at
its 0.1.0 state (commit 4c70642): a read that ran inline and a refund that ran in its Step, one message
per content block, tool messages without the call's arguments, and the CLI session on the last message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from claude_agent_sdk import tool
from dex_agents import AgentMessage, MessageRole, TurnCompleted
from dex_agents.testing import SessionSide

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from dex_agents_claude_agent_sdk.testing import ApiReply, ScriptedClaudeApi

HISTORY = Path(__file__).with_name("fixtures") / "release-0.1.0-history.json"


@tool("lookup_order", "Look up an order.", {"order_id": str})
async def lookup_order(arguments: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("the new turn calls no tool")


@tool("refund_order", "Refund an order.", {"order_id": str})
async def refund_order(arguments: dict[str, Any]) -> dict[str, Any]:
    raise AssertionError("the new turn calls no tool")


def stored_history() -> list[AgentMessage]:
    stored: list[dict[str, Any]] = json.loads(HISTORY.read_text(encoding="utf-8"))
    messages: list[AgentMessage] = []
    for fields in stored:
        fields["role"] = MessageRole(fields["role"])
        messages.append(AgentMessage(**fields))
    return messages


async def test_a_history_stored_by_release_0_1_0_resumes_its_cli_conversation() -> None:
    api = ScriptedClaudeApi([ApiReply(text="Yes: 40 EUR are on their way back to your card.")])
    runner = ClaudeAgentRunner(api.options(), [lookup_order, refund_order])
    session = SessionSide()
    session.messages = stored_history()
    session.turn_number = 1
    session.start_turn(runner.build_user_message("Is the refund through?"))
    try:
        outcome = await runner.run_model_step(session.context())
    finally:
        await api.aclose()

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None, outcome
    assert outcome.new_messages[-1].text == "Yes: 40 EUR are on their way back to your card."
    [request] = api.requests
    # The CLI resumed the stored conversation: the model reads the earlier turn and the new question.
    assert request.tool_results == {
        "lookup-1": ("A-17 arrived broken", False),
        "refund-1": ("Refunded 40 EUR for A-17.", False),
    }
    seen = json.dumps(request.messages)
    for expected in (
        "My order A-17 arrived broken. Refund it, please.",
        "A-17 arrived broken, so I refunded it.",
        "Is the refund through?",
    ):
        assert expected in seen, (expected, seen)
