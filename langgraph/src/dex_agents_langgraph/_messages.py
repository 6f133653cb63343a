"""LangChain messages <-> stored session messages.

Every stored `AgentMessage` keeps one LangChain message in `framework_item`, as the JSON of
`langchain_core.messages.message_to_dict`, so the next turn replays exactly what the graph produced.
That format names only LangChain's own message types and is read back with `messages_from_dict`, which
never imports arbitrary classes. The projection follows the session's roles: an `AIMessage` is one
`assistant` message, a `ToolMessage` one `tool` message with the call's name, arguments and output, and
a `HumanMessage` (or a `SystemMessage` a graph keeps in its state) a `user` message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, cast

from dex_agents.values import AgentMessage, FrameworkMessage, MessageRole
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolCall,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)

__all__ = [
    "build_user_framework_message",
    "decode_message",
    "encode_message",
    "history_from_stored_messages",
    "message_text",
    "project_messages",
    "stored_message_id",
]


def encode_message(message: BaseMessage) -> str:
    """Return one LangChain message as JSON text."""
    return json.dumps(message_to_dict(message), separators=(",", ":"), default=str)


def decode_message(item: str) -> BaseMessage:
    """Return the LangChain message stored as JSON text by `encode_message`.

    Raises:
        ValueError: If the text is not a stored LangChain message, for example because another adapter's
            runner stored it.
    """
    try:
        data = json.loads(item)
        return messages_from_dict([cast(dict[str, Any], data)])[0]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"a stored message is not a LangChain message: {error}") from error


def stored_message_id(message: AgentMessage) -> str:
    """Return the LangChain message ID a stored message without one gets, derived from its sequence.

    `add_messages` gives a message without an ID a random one, so a stable ID is what lets the runner tell
    the turn's new messages from the history it passed in, in any process.
    """
    return f"dex-message-{message.sequence}"


def history_from_stored_messages(messages: Iterable[AgentMessage]) -> list[BaseMessage]:
    """Rebuild the LangChain message history from stored messages, in sequence order."""
    history: list[BaseMessage] = []
    for stored in messages:
        message = decode_message(stored.framework_item)
        if not message.id:
            message = message.model_copy(update={"id": stored_message_id(stored)})
        history.append(message)
    return history


def message_text(message: BaseMessage) -> str:
    """Return a message's text content (content blocks other than text are left out)."""
    return message.text


def build_user_framework_message(text: str) -> FrameworkMessage:
    """Return a user message holding ``text`` as a LangChain `HumanMessage`."""
    return FrameworkMessage(
        role=MessageRole.USER, framework_item=encode_message(HumanMessage(content=text)), text=text
    )


def project_messages(messages: Sequence[BaseMessage]) -> list[FrameworkMessage]:
    """Project LangChain messages onto stored messages, in order.

    Args:
        messages: The messages a turn produced after its user message.

    Returns:
        One stored message per LangChain message.
    """
    calls_by_id: dict[str, ToolCall] = {}
    projected: list[FrameworkMessage] = []
    for message in messages:
        item = encode_message(message)
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["id"]:
                    calls_by_id[call["id"]] = call
            projected.append(
                FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=item, text=message_text(message))
            )
        elif isinstance(message, ToolMessage):
            call = calls_by_id.get(message.tool_call_id)
            projected.append(
                FrameworkMessage(
                    role=MessageRole.TOOL,
                    framework_item=item,
                    tool_call_id=message.tool_call_id,
                    tool_name=message.name or (call["name"] if call is not None else None),
                    tool_arguments=json.dumps(call["args"], sort_keys=True) if call is not None else None,
                    tool_output=message_text(message),
                )
            )
        else:
            projected.append(
                FrameworkMessage(role=MessageRole.USER, framework_item=item, text=message_text(message))
            )
    return projected
