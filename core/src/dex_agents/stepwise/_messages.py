"""Stepwise's stored messages: each ``framework_item`` is one chat message in the OpenAI format.

LiteLLM takes the OpenAI chat format for every provider, so the stored item is exactly what the next call
sends. A model answer is one ``assistant`` message, its tool calls included; each tool result is its own
``tool`` message, whose projection names the call's tool and arguments for a UI.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from dex_agents.stepwise._model import ModelResponse
from dex_agents.values import AgentMessage, AgentToolCall, FrameworkMessage, MessageRole

__all__ = [
    "ChatMessage",
    "StepwiseHistoryError",
    "assistant_message",
    "chat_message_of",
    "framework_message_from_json",
    "framework_message_to_json",
    "tool_result_message",
    "user_message",
]

ChatMessage = dict[str, Any]
"""One chat message in the OpenAI format, as LiteLLM takes it."""

_REPLAYED_ROLES = frozenset({"user", "assistant", "tool"})


class StepwiseHistoryError(ValueError):
    """A stored message that Stepwise cannot replay to the model."""


def _item(message: Mapping[str, object]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def user_message(text: str) -> FrameworkMessage:
    """Return a user message holding ``text``.

    Args:
        text: The user's text, a turn-failure note, or a continuation.

    Returns:
        The message.
    """
    return FrameworkMessage(
        role=MessageRole.USER, framework_item=_item({"role": "user", "content": text}), text=text
    )


def assistant_message(response: ModelResponse) -> FrameworkMessage:
    """Return a model's answer as one assistant message, its tool calls included.

    Args:
        response: The answer.

    Returns:
        The message; its display text is the answer's text.
    """
    return FrameworkMessage(
        role=MessageRole.ASSISTANT, framework_item=_item(response.message), text=response.text or None
    )


def tool_result_message(record: AgentToolCall, output: str) -> FrameworkMessage:
    """Return the result of one tool call as the model reads it.

    Args:
        record: The call's final record.
        output: What the model sees: the output, or the text of a failure, rejection or unknown outcome.

    Returns:
        The message, projected with the call's tool, arguments and output.
    """
    return FrameworkMessage(
        role=MessageRole.TOOL,
        framework_item=_item({"role": "tool", "tool_call_id": record.tool_call_id, "content": output}),
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        tool_arguments=record.arguments,
        tool_output=output,
    )


def chat_message_of(message: AgentMessage | FrameworkMessage) -> ChatMessage:
    """Return the chat message a stored message holds.

    Args:
        message: A message Stepwise stored.

    Returns:
        The chat message.

    Raises:
        StepwiseHistoryError: If the item is not a chat message with a user, assistant or tool role, for
            example because another runner stored it.
    """
    where = f"stored message {message.sequence}" if isinstance(message, AgentMessage) else "a message"
    try:
        item = json.loads(message.framework_item)
    except ValueError as error:
        raise StepwiseHistoryError(f"{where} is not JSON, so Stepwise cannot replay it: {error}") from error
    if not isinstance(item, dict) or cast(dict[str, object], item).get("role") not in _REPLAYED_ROLES:
        raise StepwiseHistoryError(
            f"{where} is not an OpenAI chat message with a user, assistant or tool role; Stepwise replays "
            "only the messages it stored"
        )
    return cast(ChatMessage, item)


def framework_message_to_json(message: FrameworkMessage) -> dict[str, object]:
    """Return a message as a JSON object, for the run state.

    Args:
        message: The message.

    Returns:
        Its fields by name.
    """
    return {
        "role": message.role.value,
        "framework_item": message.framework_item,
        "text": message.text,
        "tool_call_id": message.tool_call_id,
        "tool_name": message.tool_name,
        "tool_arguments": message.tool_arguments,
        "tool_output": message.tool_output,
    }


def framework_message_from_json(data: Mapping[str, object]) -> FrameworkMessage:
    """Return the message `framework_message_to_json` wrote.

    Args:
        data: The JSON object.

    Returns:
        The message.
    """

    def text(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) else None

    return FrameworkMessage(
        role=MessageRole(str(data["role"])),
        framework_item=str(data["framework_item"]),
        text=text("text"),
        tool_call_id=text("tool_call_id"),
        tool_name=text("tool_name"),
        tool_arguments=text("tool_arguments"),
        tool_output=text("tool_output"),
    )
