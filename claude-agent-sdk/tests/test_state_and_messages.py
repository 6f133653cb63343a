"""Unit tests of the pure parts: run state, the transcript store, message projection, effects."""

from __future__ import annotations

import json

import pytest
from claude_agent_sdk import ToolAnnotations
from claude_agent_sdk.types import SessionKey, SessionStoreEntry
from dex_agents import AgentMessage, MessageRole, ToolEffect

from dex_agents_claude_agent_sdk import ClaudeRunState, PendingToolUse, TranscriptStore, framework_effect
from dex_agents_claude_agent_sdk._messages import project_items, read_stored_conversation


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


def test_run_state_round_trips_and_refuses_other_state() -> None:
    state = ClaudeRunState(
        session_id="s-1",
        turn_entries=[{"type": "user", "uuid": "u-1"}],
        turn_items=[{"type": "text", "text": "Hi"}],
        pending=PendingToolUse("toolu_1", "refund_order", {"order_id": "A-1"}),
    )
    assert ClaudeRunState.from_json(state.to_json()) == state
    with pytest.raises(ValueError, match="unsupported version"):
        ClaudeRunState.from_json(json.dumps({"version": 99}))
    with pytest.raises(ValueError, match="not a Claude Agent SDK run state"):
        ClaudeRunState.from_json("[]")


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


def test_projection_names_tools_and_carries_the_cli_session_on_the_last_message() -> None:
    items = [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "mcp__dex__lookup_order", "input": {"order_id": "A-1"}},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "shipped"}]},
        {"type": "text", "text": "It shipped."},
    ]
    messages = project_items(items, {"session_id": "s-1", "entries": [{"type": "user"}]})
    assert [(m.role, m.text, m.tool_name, m.tool_arguments, m.tool_output) for m in messages] == [
        (MessageRole.ASSISTANT, "Checking.", None, None, None),
        (MessageRole.ASSISTANT, None, "lookup_order", '{"order_id": "A-1"}', None),
        (MessageRole.TOOL, None, "lookup_order", None, "shipped"),
        (MessageRole.ASSISTANT, "It shipped.", None, None, None),
    ]
    assert "cli_session" not in json.loads(messages[0].framework_item)
    assert json.loads(messages[-1].framework_item)["cli_session"]["session_id"] == "s-1"
    # A turn without items still stores the session, on an empty assistant message.
    [empty] = project_items([], {"session_id": "s-2", "entries": []})
    assert empty.role is MessageRole.ASSISTANT and empty.text == ""


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


def test_framework_effect_reads_mcp_hints_in_either_spelling() -> None:
    assert framework_effect(None) is None
    assert framework_effect(ToolAnnotations(readOnlyHint=True)) is ToolEffect.READ
    assert (
        framework_effect(ToolAnnotations(idempotent_hint=True, destructive_hint=True))
        is ToolEffect.IDEMPOTENT_WRITE
    )
    assert framework_effect({"readOnlyHint": False}) is None
    assert framework_effect({"idempotentHint": True}) is ToolEffect.IDEMPOTENT_WRITE
