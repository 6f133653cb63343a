"""Conversation items of the Claude harness and their stored projection.

A turn's items are the content blocks the CLI streams: assistant `text` and `tool_use` blocks and the
`tool_result` blocks of the user turns in between, as plain JSON. Each becomes one stored message whose
`framework_item` is the block itself. The last message of a completed turn also carries the CLI session:
its ID and the transcript entries the turn appended, so the next turn resumes the same CLI conversation
from stored messages alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dex_agents.values import AgentMessage, FrameworkMessage, MessageRole

__all__ = [
    "TOOL_NAME_PREFIX",
    "StoredConversation",
    "build_user_framework_message",
    "project_items",
    "read_stored_conversation",
    "tool_result_text",
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
    names = {str(item.get("id")): str(item.get("name")) for item in items if item.get("type") == "tool_use"}
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
                    "tool_arguments": json.dumps(item.get("input", {}), sort_keys=True),
                }
            )
        elif kind == "tool_result":
            call_id = str(item.get("tool_use_id"))
            messages.append(
                {
                    "role": MessageRole.TOOL,
                    "item": item,
                    "tool_call_id": call_id,
                    "tool_name": _user_tool_name(names.get(call_id, "")) or None,
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


def _dump(item: Mapping[str, Any]) -> str:
    return json.dumps(item, separators=(",", ":"))
