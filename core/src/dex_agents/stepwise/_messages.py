"""Stepwise's stored messages: each ``framework_item`` is one chat message in the OpenAI format.

LiteLLM takes the OpenAI chat format for every provider. Stepwise stores a model's answer in the projection
every runner shares: the answer's text (with the provider's reasoning fields) as one ``assistant`` message,
then each tool call as an ``assistant`` message of its own, then each result as a ``tool`` message that names
the call's tool, arguments and output. A request joins an answer's messages into the one assistant message
the provider sent, tool calls included.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dex_agents.stepwise._model import ModelResponse
from dex_agents.values import AgentMessage, AgentToolCall, FrameworkMessage, MessageRole

__all__ = [
    "MISSING_TOOL_RESULT",
    "ChatMessage",
    "StepwiseHistoryError",
    "chat_message_of",
    "replay_chat_messages",
    "response_messages",
    "tool_result_message",
    "user_message",
]

ChatMessage = dict[str, Any]
"""One chat message in the OpenAI format, as LiteLLM takes it."""

_REPLAYED_ROLES = frozenset({"user", "assistant", "tool"})
# The provider's fields of an answer that a later request sends back (Anthropic needs its signed thinking
# blocks in a tool-use turn), so an answer with tool calls and no text still keeps a message of its own.
_REASONING_FIELDS = ("reasoning_content", "thinking_blocks")

MISSING_TOOL_RESULT = (
    "[Dex] The result of this tool call was not stored, so whether it took effect is unknown; a later "
    "message may say."
)
"""What the model reads for a stored tool call whose result was never stored."""


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


def response_messages(response: ModelResponse) -> list[FrameworkMessage]:
    """Return a model's answer as the messages every runner stores: its text, then one message per call.

    The first message carries the answer's text and the provider's reasoning fields, without tool fields;
    it is left out when an answer with tool calls has neither. Each tool call follows as an assistant
    message of its own, with the call's ID, tool and arguments and no text. `replay_chat_messages` joins
    them into the one assistant message the provider sent.

    Args:
        response: The answer.

    Returns:
        The messages, in order.
    """
    head = {key: value for key, value in response.message.items() if key != "tool_calls"}
    reasons = any(key in head for key in _REASONING_FIELDS)
    messages: list[FrameworkMessage] = []
    if not response.tool_calls or response.text or reasons:
        messages.append(
            FrameworkMessage(
                role=MessageRole.ASSISTANT, framework_item=_item(head), text=response.text or None
            )
        )
    for call in response.tool_calls:
        messages.append(
            FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=_item({"role": "assistant", "content": None, "tool_calls": [call.to_chat()]}),
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                tool_arguments=call.arguments or "{}",
            )
        )
    return messages


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


def replay_chat_messages(messages: Iterable[AgentMessage | FrameworkMessage]) -> list[ChatMessage]:
    """Return stored messages as the chat messages of a request, each answer whole again.

    A tool call stored on its own joins the assistant message before it, which is its answer's text or an
    earlier call of the same answer: an answer's messages are stored together, and the next answer follows
    a tool result or a user message. An answer stored whole, as Stepwise stored answers before it stored
    each call on its own, replays as it is. A call without a stored result, which only a turn whose run
    state could not be read leaves behind, gets `MISSING_TOOL_RESULT`, since providers refuse a call that
    has no result.

    Args:
        messages: Stored messages and the turn's unstored items, in order.

    Returns:
        The chat messages.

    Raises:
        StepwiseHistoryError: If a message is not one Stepwise stores.
    """
    replayed: list[ChatMessage] = []
    for message in messages:
        chat = chat_message_of(message)
        calls = _tool_calls_of(chat)
        previous = replayed[-1] if replayed else None
        if chat["role"] == "assistant" and calls and previous is not None and previous["role"] == "assistant":
            previous["tool_calls"] = [*_tool_calls_of(previous), *calls]
            continue
        replayed.append(dict(chat))
    return _with_every_result(replayed)


def _tool_calls_of(message: ChatMessage) -> list[Mapping[str, Any]]:
    return cast(list[Mapping[str, Any]], message.get("tool_calls") or [])


def _with_every_result(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    complete: list[ChatMessage] = []
    waiting: list[str] = []  # the calls of the last answer still without a result
    for message in messages:
        if message["role"] == "tool":
            if message.get("tool_call_id") in waiting:
                waiting.remove(str(message["tool_call_id"]))
        else:
            complete.extend(_missing_results(waiting))
            waiting = [str(call.get("id")) for call in _tool_calls_of(message)]
        complete.append(message)
    complete.extend(_missing_results(waiting))
    return complete


def _missing_results(tool_call_ids: Sequence[str]) -> list[ChatMessage]:
    return [
        {"role": "tool", "tool_call_id": tool_call_id, "content": MISSING_TOOL_RESULT}
        for tool_call_id in tool_call_ids
    ]
