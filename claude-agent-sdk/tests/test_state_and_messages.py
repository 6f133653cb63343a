"""Unit tests of the pure parts: run state, the transcript store, message projection, effects."""

from __future__ import annotations

import json
from typing import Any

import pytest
from claude_agent_sdk import ToolAnnotations
from claude_agent_sdk.types import SessionKey, SessionStoreEntry
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    STEERED_REJECTION_MESSAGE,
    AgentMessage,
    AgentToolCall,
    CancellationReason,
    MessageRole,
    RunStateFormatError,
    ToolCallStatus,
    ToolEffect,
)
from dex_agents.testing import ProjectedCall, check_message_projection

from dex_agents_claude_agent_sdk import ClaudeRunState, PendingToolUse, TranscriptStore, framework_effect
from dex_agents_claude_agent_sdk._messages import (
    project_items,
    read_stored_conversation,
    unfinished_turn_messages,
)
from dex_agents_claude_agent_sdk._state import RUN_STATE_FORMAT


def stored(sequence: int, role: MessageRole, framework_item: str, text: str | None = None) -> AgentMessage:
    return AgentMessage(
        sequence=sequence,
        turn_id="turn-1",
        role=role,
        text=text,
        tool_call_id=None,
        tool_name=None,
        tool_arguments=None,
        tool_output=None,
        framework_item=framework_item,
        created_at="2026-11-29T00:00:00Z",
    )


def pending_state(**fields: Any) -> ClaudeRunState:
    return ClaudeRunState(
        session_id="s-1",
        turn_entries=fields.get("entries", [{"type": "user", "uuid": "u-1"}]),
        turn_items=fields.get("items", [{"type": "text", "text": "Hi"}]),
        pending=PendingToolUse("toolu_1", "refund_order", {"order_id": "A-1"}),
    )


def test_run_state_round_trips_in_its_envelope_and_refuses_other_state() -> None:
    state = pending_state()
    text = state.to_json()
    assert json.loads(text)["format"] == "dex-agents-claude-agent-sdk/run-state"
    assert ClaudeRunState.from_json(text) == state
    with pytest.raises(RunStateFormatError, match="version 2 of 'dex-agents-claude-agent-sdk/run-state'"):
        ClaudeRunState.from_json(text.replace('"version":1', '"version":2'))
    with pytest.raises(RunStateFormatError, match="not written by ClaudeAgentRunner: it has format 'other'"):
        ClaudeRunState.from_json(json.dumps({"format": "other", "version": 1}))
    with pytest.raises(RunStateFormatError, match="not written by ClaudeAgentRunner: it has no format"):
        ClaudeRunState.from_json(json.dumps({"version": 99}))
    with pytest.raises(RunStateFormatError, match="lacks a field"):
        ClaudeRunState.from_json(RUN_STATE_FORMAT.wrap({"session_id": "s-1"}))


def test_a_run_state_that_release_0_1_0_wrote_still_resumes() -> None:
    # 0.1.0 wrote the same fields with a version and no format: a turn waiting for an approval across the
    # upgrade goes on.
    state = pending_state()
    unnamed = json.loads(state.to_json())
    del unnamed["format"]
    assert ClaudeRunState.from_json(json.dumps(unnamed)) == state


async def test_transcript_store_ignores_the_project_and_returns_only_new_entries() -> None:
    store = TranscriptStore()
    store.preload("s-1", [{"type": "user", "uuid": "u-1"}])
    key = SessionKey(project_key="-some-other-dir", session_id="s-1")
    assert await store.load(key) == [{"type": "user", "uuid": "u-1"}]
    await store.append(
        key,
        [
            SessionStoreEntry(type="user", uuid="u-1"),
            SessionStoreEntry(type="assistant", uuid="a-1"),
            SessionStoreEntry(type="tag"),
        ],
    )
    assert store.new_entries("s-1") == [{"type": "assistant", "uuid": "a-1"}, {"type": "tag"}]
    assert await store.load(SessionKey(project_key="x", session_id="unknown")) is None


TURN_ITEMS = [
    {"type": "text", "text": "Checking."},
    {"type": "tool_use", "id": "toolu_1", "name": "mcp__dex__lookup_order", "input": {"order_id": "A-1"}},
    {"type": "tool_use", "id": "toolu_2", "name": "mcp__dex__refund_order", "input": {"order_id": "A-1"}},
    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "shipped"}]},
]
"""A turn's items at its deferral: a read that ran inline, and the deferred refund without a result."""


def test_projection_is_the_shared_one_and_carries_the_cli_session_on_the_last_message() -> None:
    items = [
        *TURN_ITEMS[:2],
        TURN_ITEMS[3],
        {"type": "text", "text": "It shipped."},
    ]
    messages = project_items(items, {"session_id": "s-1", "entries": [{"type": "user"}]})
    assert [(m.role, m.text, m.tool_name, m.tool_arguments, m.tool_output) for m in messages] == [
        (MessageRole.ASSISTANT, "Checking.", None, None, None),
        (MessageRole.ASSISTANT, None, "lookup_order", '{"order_id": "A-1"}', None),
        (MessageRole.TOOL, None, "lookup_order", '{"order_id": "A-1"}', "shipped"),
        (MessageRole.ASSISTANT, "It shipped.", None, None, None),
    ]
    check_message_projection(
        messages,
        response_text="Checking.",
        calls=[ProjectedCall("toolu_1", "lookup_order", {"order_id": "A-1"})],
        outputs={"toolu_1": "shipped"},
    )
    assert "cli_session" not in json.loads(messages[0].framework_item)
    assert json.loads(messages[-1].framework_item)["cli_session"]["session_id"] == "s-1"
    # A turn without items still stores the session, on an empty assistant message.
    [empty] = project_items([], {"session_id": "s-2", "entries": []})
    assert empty.role is MessageRole.ASSISTANT and empty.text == ""


def record(call_id: str, status: ToolCallStatus, **fields: Any) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name="refund_order",
        arguments='{"order_id": "A-1"}',
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=True,
        status=status,
        **fields,
    )


TURN_ENTRIES = [
    {"type": "user", "uuid": "u-1", "parentUuid": None, "message": {"role": "user", "content": "Refund A-1"}},
    {
        "type": "assistant",
        "uuid": "a-1",
        "parentUuid": "u-1",
        "sessionId": "s-1",
        "cwd": "/tmp/run",
        "version": "2.1.332",
        "message": {"role": "assistant", "content": [TURN_ITEMS[2]]},
    },
    {"type": "tools-used", "tools": ["mcp__dex__refund_order"], "sessionId": "s-1"},
    {"type": "attachment", "uuid": "t-1", "parentUuid": "a-1"},
]


def test_a_steered_turn_keeps_its_items_and_closes_the_deferred_call_with_its_record() -> None:
    state = pending_state(items=TURN_ITEMS, entries=TURN_ENTRIES)
    rejected = record(
        "toolu_2",
        ToolCallStatus.REJECTED,
        rejection_message=STEERED_REJECTION_MESSAGE,
        cancellation_reason=CancellationReason.STEERED,
    )

    messages = unfinished_turn_messages(state, {"toolu_2": rejected})

    shown = [(m.role, m.tool_call_id, m.tool_output) for m in messages]
    assert shown == [
        (MessageRole.ASSISTANT, None, None),
        (MessageRole.ASSISTANT, "toolu_1", None),
        (MessageRole.ASSISTANT, "toolu_2", None),
        (MessageRole.TOOL, "toolu_1", "shipped"),
        (MessageRole.TOOL, "toolu_2", STEERED_REJECTION_MESSAGE),
    ]
    assert messages[-1].tool_arguments == '{"order_id": "A-1"}'
    # The transcript the next turn resumes ends with the result, after the turn's last entry, so the CLI
    # reads it instead of resuming the call as deferred.
    session = json.loads(messages[-1].framework_item)["cli_session"]
    assert session["session_id"] == "s-1"
    *kept, closing = session["entries"]
    assert kept == TURN_ENTRIES
    assert closing["type"] == "user" and closing["parentUuid"] == "t-1"
    assert closing["sourceToolAssistantUUID"] == "a-1"
    assert (closing["sessionId"], closing["cwd"], closing["version"]) == ("s-1", "/tmp/run", "2.1.332")
    assert closing["message"] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [{"type": "text", "text": STEERED_REJECTION_MESSAGE}],
                "is_error": True,
            }
        ],
    }
    # Built twice (a retried Step), the entry is the same one.
    again = json.loads(unfinished_turn_messages(state, {"toolu_2": rejected})[-1].framework_item)
    assert again["cli_session"]["entries"][-1]["uuid"] == closing["uuid"]


def test_a_call_without_a_record_or_a_result_is_closed_as_outcome_unknown() -> None:
    state = pending_state(items=TURN_ITEMS[:3], entries=TURN_ENTRIES)
    succeeded = record("toolu_2", ToolCallStatus.SUCCEEDED, output="refunded")

    messages = unfinished_turn_messages(state, {"toolu_2": succeeded})

    results = {m.tool_call_id: m.tool_output for m in messages if m.role is MessageRole.TOOL}
    assert results == {"toolu_1": OUTCOME_UNKNOWN_TOOL_RESULT, "toolu_2": "refunded"}
    entries = json.loads(messages[-1].framework_item)["cli_session"]["entries"]
    first, second = entries[-2:]
    assert second["parentUuid"] == first["uuid"], "each closing entry follows the one before"


def test_stored_conversation_joins_transcripts_and_prompts_since_the_last_turn() -> None:
    first = json.dumps({"type": "user", "text": "Hi"})
    answer = json.dumps(
        {"type": "text", "text": "Hello", "cli_session": {"session_id": "s-1", "entries": [{"n": 1}]}}
    )
    second = json.dumps(
        {"type": "text", "text": "Bye", "cli_session": {"session_id": "s-1", "entries": [{"n": 2}]}}
    )
    note = json.dumps({"type": "user", "text": "[Dex] The previous turn failed"})
    question = json.dumps({"type": "user", "text": "Did it work?"})
    conversation = read_stored_conversation(
        [
            stored(1, MessageRole.USER, first),
            stored(2, MessageRole.ASSISTANT, answer),
            stored(3, MessageRole.ASSISTANT, second),
            stored(4, MessageRole.USER, note),
            stored(5, MessageRole.USER, question),
        ]
    )
    assert conversation.session_id == "s-1"
    assert conversation.entries == [{"n": 1}, {"n": 2}]
    assert conversation.prompt == ["[Dex] The previous turn failed", "Did it work?"]
    with pytest.raises(ValueError, match="not a Claude Agent SDK item"):
        read_stored_conversation([stored(1, MessageRole.USER, "not json")])


def test_framework_effect_is_the_cores_reading_of_mcp_hints_under_its_0_1_0_name() -> None:
    assert framework_effect(None) is None
    assert framework_effect(ToolAnnotations(readOnlyHint=True)) is ToolEffect.READ
    assert (
        framework_effect(ToolAnnotations(idempotent_hint=True, destructive_hint=True))
        is ToolEffect.IDEMPOTENT_WRITE
    )
    assert framework_effect({"readOnlyHint": False}) is None
    assert framework_effect({"idempotentHint": True}) is ToolEffect.IDEMPOTENT_WRITE
