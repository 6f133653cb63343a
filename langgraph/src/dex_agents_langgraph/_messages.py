"""LangChain messages <-> stored session messages, in the projection every adapter shares.

A UI reads stored messages without knowing the framework, so an `AIMessage` that calls tools is stored as
several messages: its text (when it has any) as an `assistant` message without tool fields, then one
`assistant` message per tool call with the call's ID, name and arguments and no text. A `ToolMessage` is
one `tool` message with the call's ID, name, arguments and output; a `HumanMessage` (or a `SystemMessage`
a graph keeps in its state) is a `user` message; an `AIMessage` without tool calls is one `assistant`
message.

Replay must give LangGraph its own messages back unchanged, so the first of an `AIMessage`'s stored parts
keeps the whole message as `message_to_dict` JSON, and every part names the message and its position;
the parts after the first hold no LangChain data and are joined back into the first when the history is
rebuilt. Every other message keeps its `message_to_dict` JSON in ``framework_item``, as release 0.1.0
stored every message (an `AIMessage` with its calls included), and such histories replay as they are.
`messages_from_dict` builds only LangChain's own message types, never arbitrary classes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
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
    "history_from_stored_messages",
    "project_messages",
    "tool_arguments_json",
]

_PART = "dex_agents_langgraph_part"
"""The key of a stored part of a tool-calling `AIMessage`; release 0.1.0 items never have it."""
_PART_MESSAGE = "message"
"""The key of the first part that holds the whole `AIMessage`."""


def tool_arguments_json(arguments: Mapping[str, Any]) -> str:
    """Return a tool call's arguments as the compact JSON text with sorted keys that the session stores."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)


def _encode(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), default=str)


def _decode(item: str) -> Mapping[str, Any]:
    try:
        data: object = json.loads(item)
    except ValueError as error:
        raise ValueError(f"a stored message is not a LangChain message: {error}") from error
    if not isinstance(data, dict):
        raise ValueError(f"a stored message is not a LangChain message: it is a JSON {type(data).__name__}")
    return cast(dict[str, Any], data)


def _message_from_dict(data: Mapping[str, Any]) -> BaseMessage:
    try:
        return messages_from_dict([dict(data)])[0]
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"a stored message is not a LangChain message: {error}") from error


def build_user_framework_message(text: str) -> FrameworkMessage:
    """Return a user message holding ``text`` as a LangChain `HumanMessage`."""
    return FrameworkMessage(
        role=MessageRole.USER, framework_item=_encode(message_to_dict(HumanMessage(content=text))), text=text
    )


def project_messages(
    messages: Sequence[BaseMessage], *, answer_text: str | None = None
) -> list[FrameworkMessage]:
    """Project LangChain messages onto stored messages, in order.

    Args:
        messages: Messages of a turn, after its user message.
        answer_text: Display text for the last `AIMessage` when it has no text of its own (`create_agent`
            ends a turn with structured output on an output tool call without text).

    Returns:
        The stored messages: several per tool-calling `AIMessage`, one per other message.
    """
    calls_by_id: dict[str, ToolCall] = {}
    last_answer = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    projected: list[FrameworkMessage] = []
    for message in messages:
        if isinstance(message, AIMessage):
            calls_by_id.update((call["id"], call) for call in message.tool_calls if call["id"])
            text = message.text or (answer_text if message is last_answer else None) or ""
            projected.extend(_project_answer(message, text))
        elif isinstance(message, ToolMessage):
            call = calls_by_id.get(message.tool_call_id)
            projected.append(
                FrameworkMessage(
                    role=MessageRole.TOOL,
                    framework_item=_encode(message_to_dict(message)),
                    tool_call_id=message.tool_call_id,
                    tool_name=message.name or (call["name"] if call is not None else None),
                    tool_arguments=tool_arguments_json(call["args"]) if call is not None else None,
                    tool_output=message.text,
                )
            )
        else:
            projected.append(
                FrameworkMessage(
                    role=MessageRole.USER, framework_item=_encode(message_to_dict(message)), text=message.text
                )
            )
    return projected


def _project_answer(message: AIMessage, text: str) -> list[FrameworkMessage]:
    """One `assistant` message for an answer without tool calls; its text and one per call otherwise."""
    whole = message_to_dict(message)
    if not message.tool_calls:
        return [FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=_encode(whole), text=text)]
    # Parts name their message, so a part that lost its first part is refused instead of replayed wrongly.
    message_id = message.id or f"dex-answer-{uuid.uuid4().hex}"
    count = len(message.tool_calls) + (1 if text else 0)

    def part(index: int, tool_call_id: str | None) -> str:
        data: dict[str, Any] = {
            _PART: {"message_id": message_id, "index": index, "count": count, "tool_call_id": tool_call_id}
        }
        if index == 0:
            data[_PART_MESSAGE] = whole
        return _encode(data)

    parts: list[FrameworkMessage] = []
    if text:
        parts.append(FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=part(0, None), text=text))
    for call in message.tool_calls:
        parts.append(
            FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=part(len(parts), call["id"]),
                tool_call_id=call["id"],
                tool_name=call["name"],
                tool_arguments=tool_arguments_json(call["args"]),
            )
        )
    return parts


def history_from_stored_messages(messages: Iterable[AgentMessage]) -> list[BaseMessage]:
    """Rebuild the LangChain message history from stored messages, in sequence order.

    The parts of a tool-calling `AIMessage` become that one message again. A message without an ID gets
    ``dex-message-<sequence>``: `add_messages` would give it a random one, and a stable ID is what lets
    the runner tell a turn's new messages from the history it passed in, in any process.

    Raises:
        ValueError: If a stored message is not a LangChain message (another adapter's runner stored it),
            or a part of an `AIMessage` does not follow the parts before it.
    """
    history: list[BaseMessage] = []
    open_part: Mapping[str, Any] | None = None
    for stored in messages:
        data = _decode(stored.framework_item)
        part = cast(Mapping[str, Any] | None, data.get(_PART))
        if part is not None and part.get("index") != 0:
            _check_next_part(stored, part, open_part)
            open_part = part
            continue
        open_part = part
        message = _message_from_dict(cast(Mapping[str, Any], data[_PART_MESSAGE]) if part else data)
        if not message.id:
            message = message.model_copy(update={"id": f"dex-message-{stored.sequence}"})
        history.append(message)
    return history


def _check_next_part(
    stored: AgentMessage, part: Mapping[str, Any], previous: Mapping[str, Any] | None
) -> None:
    follows = (
        previous is not None
        and previous.get("message_id") == part.get("message_id")
        and previous.get("index") == cast(int, part.get("index")) - 1
    )
    if not follows:
        raise ValueError(
            f"stored message {stored.sequence} is part {part.get('index')} of AI message "
            f"{part.get('message_id')!r}, but the stored message before it is not that message's previous "
            "part, so the message cannot be replayed"
        )
