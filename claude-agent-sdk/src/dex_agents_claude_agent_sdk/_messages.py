"""Conversation items of the Claude harness and their stored projection.

A turn's items are the content blocks the CLI streams: assistant `text` and `tool_use` blocks and the
`tool_result` blocks of the user turns in between, as plain JSON. Each becomes one stored message whose
`framework_item` is the block itself, which is the projection every adapter shares: a response's text on
an assistant message of its own, each tool use an assistant message with the call's ID, name and
arguments, each result a tool message with the call's ID, name, arguments and output. The CLI splits a
response into one transcript entry per block too, and the next turn replays the transcript itself, so
nothing needs joining. The last message of a turn also carries the CLI session: its ID and the transcript
entries the turn appended, so the next turn resumes the same CLI conversation from stored messages alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT, describe_tool_call_outcome
from dex_agents.values import AgentMessage, AgentToolCall, FrameworkMessage, MessageRole, ToolCallStatus

from dex_agents_claude_agent_sdk._state import ClaudeRunState, tool_result_entries

__all__ = [
    "MCP_SERVER_NAME",
    "TOOL_NAME_PREFIX",
    "StoredConversation",
    "build_user_framework_message",
    "project_items",
    "read_stored_conversation",
    "recorded_tool_result",
    "tool_result_text",
    "unfinished_turn_messages",
]

MCP_SERVER_NAME = "dex"
"""The in-process MCP server that carries the user's tools into the CLI."""
TOOL_NAME_PREFIX = f"mcp__{MCP_SERVER_NAME}__"
"""The CLI's name of a user tool is this prefix plus the tool's own name."""


def build_user_framework_message(text: str) -> FrameworkMessage:
    """Return a user message holding ``text``."""
    item = {"type": "user", "text": text}
    return FrameworkMessage(role=MessageRole.USER, framework_item=_dump(item), text=text)


def tool_result_text(content: object) -> str:
    """Return the text of a `tool_result` block's content (a string or a list of content blocks)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in cast(list[Any], content):
        if isinstance(block, Mapping):
            part = cast(Mapping[str, Any], block)
            if part.get("type") == "text":
                texts.append(str(part.get("text", "")))
    return "\n".join(texts)


def _user_tool_name(cli_name: str) -> str:
    return cli_name.removeprefix(TOOL_NAME_PREFIX)


def _arguments(tool_use: Mapping[str, Any]) -> str:
    return json.dumps(tool_use.get("input", {}), sort_keys=True)


def recorded_tool_result(record: AgentToolCall) -> tuple[str, bool]:
    """Return what the model reads for a final record, and whether it reads it as an error."""
    return describe_tool_call_outcome(record), record.status is not ToolCallStatus.SUCCEEDED


def project_items(
    items: Sequence[Mapping[str, Any]], cli_session: Mapping[str, Any] | None = None
) -> list[FrameworkMessage]:
    """Project a turn's items onto stored messages.

    Args:
        items: The turn's items in order.
        cli_session: The CLI session (`session_id`, `entries`) to carry on the last message.

    Returns:
        One message per item; an empty assistant message carries the session when there are no items.
    """
    uses = {str(item.get("id")): item for item in items if item.get("type") == "tool_use"}
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "text":
            messages.append({"role": MessageRole.ASSISTANT, "item": item, "text": str(item.get("text", ""))})
        elif kind == "tool_use":
            messages.append(
                {
                    "role": MessageRole.ASSISTANT,
                    "item": item,
                    "tool_call_id": str(item.get("id")),
                    "tool_name": _user_tool_name(str(item.get("name"))),
                    "tool_arguments": _arguments(item),
                }
            )
        elif kind == "tool_result":
            call_id = str(item.get("tool_use_id"))
            use = uses.get(call_id)
            messages.append(
                {
                    "role": MessageRole.TOOL,
                    "item": item,
                    "tool_call_id": call_id,
                    "tool_name": _user_tool_name(str(use.get("name"))) if use is not None else None,
                    "tool_arguments": _arguments(use) if use is not None else None,
                    "tool_output": tool_result_text(item.get("content")),
                }
            )
    if cli_session is not None:
        if not messages:
            messages.append({"role": MessageRole.ASSISTANT, "item": {"type": "text", "text": ""}, "text": ""})
        messages[-1]["item"] = {**messages[-1]["item"], "cli_session": dict(cli_session)}
    return [
        FrameworkMessage(
            role=message["role"],
            framework_item=_dump(message["item"]),
            text=message.get("text"),
            tool_call_id=message.get("tool_call_id"),
            tool_name=message.get("tool_name"),
            tool_arguments=message.get("tool_arguments"),
            tool_output=message.get("tool_output"),
        )
        for message in messages
    ]


@dataclass
class StoredConversation:
    """What the stored messages say about the CLI conversation.

    Attributes:
        session_id: The CLI session of the last completed turn, or `None` before the first.
        entries: Its transcript entries, oldest first.
        prompt: The user texts stored after that turn, which the next run sends as one prompt.
    """

    session_id: str | None = None
    entries: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    prompt: list[str] = field(default_factory=list[str])


def read_stored_conversation(messages: Sequence[AgentMessage]) -> StoredConversation:
    """Rebuild the CLI conversation from stored messages.

    Args:
        messages: Every stored message, in sequence order.

    Returns:
        The conversation.

    Raises:
        ValueError: If a message's `framework_item` is not JSON.
    """
    conversation = StoredConversation()
    for message in messages:
        try:
            item = cast(dict[str, Any], json.loads(message.framework_item))
        except json.JSONDecodeError as error:
            raise ValueError(f"message {message.sequence} is not a Claude Agent SDK item: {error}") from error
        session = cast(dict[str, Any] | None, item.get("cli_session"))
        if session is not None:
            if session.get("session_id") != conversation.session_id:
                # A new CLI session starts its transcript from scratch (see the runner's fallback).
                conversation.entries = []
            conversation.session_id = str(session["session_id"])
            conversation.entries.extend(cast(list[dict[str, Any]], session.get("entries", [])))
            conversation.prompt = []
        elif message.role == MessageRole.USER:
            conversation.prompt.append(str(item.get("text", message.text or "")))
    return conversation


def unfinished_turn_messages(
    state: ClaudeRunState, records: Mapping[str, AgentToolCall]
) -> list[FrameworkMessage]:
    """Return the stored messages of a turn that ends without an answer (steered, cancelled or failed).

    They are the turn's items so far and a result for every tool use among them that has none: the
    deferred call's from its final record, which the CLI never read, since no later run resumed it. The
    last message carries the CLI session with the turn's transcript, closed by an entry per such result,
    so the next turn's run reads every result and goes on from its own prompt.

    Args:
        state: The run state of the turn's last deferral.
        records: The turn's tool call records by tool call ID, all final.

    Returns:
        The messages to store, in order.
    """
    items = state.turn_items
    answered = {str(item.get("tool_use_id")) for item in items if item.get("type") == "tool_result"}
    results: list[dict[str, Any]] = []
    for item in items:
        call_id = str(item.get("id"))
        if item.get("type") != "tool_use" or call_id in answered:
            continue
        record = records.get(call_id)
        # Only the deferred call lacks a result in a run state; a call without a record the CLI may have
        # run, so its outcome is unknown.
        text, is_error = recorded_tool_result(record) if record else (OUTCOME_UNKNOWN_TOOL_RESULT, True)
        content = [{"type": "text", "text": text}]
        results.append(
            {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error}
        )
    entries = [*state.turn_entries, *tool_result_entries(state.turn_entries, results)]
    cli_session = {"session_id": state.session_id, "entries": entries}
    return project_items([*items, *results], cli_session)


def _dump(item: Mapping[str, Any]) -> str:
    return json.dumps(item, separators=(",", ":"))
