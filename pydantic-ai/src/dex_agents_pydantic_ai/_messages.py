"""Pydantic AI messages <-> stored session messages.

Every stored `AgentMessage` keeps one Pydantic AI `ModelMessage` as JSON in `framework_item`, so the next
model call replays exactly what the framework produced. The projection follows the session's roles:

- a `ModelResponse` is one `assistant` message whose `text` is the response's text;
- a `ModelRequest` is split so that every tool result becomes its own `tool` message (with the call's
  ID, tool name, arguments and output filled in) and the rest of the request, such as a user prompt,
  becomes one `user` message.

Splitting a request is lossless: Pydantic AI merges consecutive `ModelRequest`s before every model call,
so the rebuilt history sends the same request the model saw. A `ModelResponse` is never split, because
Pydantic AI does not merge responses that came from a provider.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import cast

import pydantic_core
from dex_agents import AgentMessage, FrameworkMessage, MessageRole
from pydantic import TypeAdapter
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ToolCallPart,
    UserPromptPart,
)

__all__ = [
    "build_user_framework_message",
    "decode_message",
    "decode_messages",
    "encode_message",
    "encode_messages",
    "history_from_stored_messages",
    "project_messages",
    "render_output",
]

# `ModelMessage` is an `Annotated` union, which pyright does not accept as a `TypeAdapter` type form.
_MESSAGE_ADAPTER: TypeAdapter[ModelMessage] = TypeAdapter(cast(type[ModelMessage], ModelMessage))
_MESSAGES_ADAPTER: TypeAdapter[list[ModelMessage]] = TypeAdapter(list[ModelMessage])


def encode_message(message: ModelMessage) -> str:
    """Return one Pydantic AI message as JSON text."""
    return _MESSAGE_ADAPTER.dump_json(message).decode()


def decode_message(item: str) -> ModelMessage:
    """Return the Pydantic AI message stored as JSON text by `encode_message`.

    Raises:
        pydantic.ValidationError: If the text is not a Pydantic AI message, for example because another
            adapter's runner stored it.
    """
    return _MESSAGE_ADAPTER.validate_json(item)


def encode_messages(messages: Sequence[ModelMessage]) -> str:
    """Return a list of Pydantic AI messages as JSON text."""
    return _MESSAGES_ADAPTER.dump_json(list(messages)).decode()


def decode_messages(text: str) -> list[ModelMessage]:
    """Return the list of Pydantic AI messages stored by `encode_messages`."""
    return _MESSAGES_ADAPTER.validate_json(text)


def render_output(value: object) -> str:
    """Return a tool result or a final output as the text a person reads: strings as they are, else JSON."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value).decode()


def build_user_framework_message(text: str) -> FrameworkMessage:
    """Return a user message holding ``text`` as a Pydantic AI `ModelRequest` with one user prompt."""
    request = ModelRequest(parts=[UserPromptPart(text)])
    return FrameworkMessage(role=MessageRole.USER, framework_item=encode_message(request), text=text)


def history_from_stored_messages(messages: Iterable[AgentMessage]) -> list[ModelMessage]:
    """Rebuild the Pydantic AI message history from stored messages, in sequence order."""
    return [decode_message(message.framework_item) for message in messages]


def project_messages(
    messages: Sequence[ModelMessage], *, output_text: str | None = None
) -> list[FrameworkMessage]:
    """Project Pydantic AI messages onto stored messages, in order.

    Args:
        messages: The messages a turn produced after its user message.
        output_text: The rendered final output, when an output tool call produced it. It is added to
            the display text of the last response, after any text of the response's own.

    Returns:
        One `assistant` message per response, one `tool` message per tool result, and one `user`
        message per request remainder that is not a tool result.
    """
    calls_by_id: dict[str, ToolCallPart] = {}
    projected: list[FrameworkMessage] = []
    last_response_index: int | None = None
    for message in messages:
        if isinstance(message, ModelResponse):
            for call in message.tool_calls:
                calls_by_id[call.tool_call_id] = call
            last_response_index = len(projected)
            projected.append(
                FrameworkMessage(
                    role=MessageRole.ASSISTANT, framework_item=encode_message(message), text=message.text
                )
            )
        else:
            projected.extend(_project_request(message, calls_by_id))
    if output_text is not None and last_response_index is not None:
        last_response = projected[last_response_index]
        text = f"{last_response.text}\n\n{output_text}" if last_response.text else output_text
        projected[last_response_index] = dataclasses.replace(last_response, text=text)
    return projected


def _project_request(request: ModelRequest, calls_by_id: dict[str, ToolCallPart]) -> list[FrameworkMessage]:
    projected: list[FrameworkMessage] = []
    other_parts: list[ModelRequestPart] = []
    for part in request.parts:
        if isinstance(part, BaseToolReturnPart):
            call = calls_by_id.get(part.tool_call_id)
            # The request's instructions stay on its first piece only: the merge takes them from there,
            # and a copy on every tool result would store the same text once per call.
            single = dataclasses.replace(
                request, parts=[part], instructions=request.instructions if not projected else None
            )
            projected.append(
                FrameworkMessage(
                    role=MessageRole.TOOL,
                    framework_item=encode_message(single),
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    tool_arguments=call.args_as_json_str() if call is not None else None,
                    tool_output=part.model_response_str(),
                )
            )
        else:
            other_parts.append(part)
    if other_parts:
        prompt_texts = [
            part.content
            for part in other_parts
            if isinstance(part, UserPromptPart) and isinstance(part.content, str)
        ]
        remainder = dataclasses.replace(
            request, parts=other_parts, instructions=request.instructions if not projected else None
        )
        projected.append(
            FrameworkMessage(
                role=MessageRole.USER,
                framework_item=encode_message(remainder),
                text="\n\n".join(prompt_texts) if prompt_texts else None,
            )
        )
    return projected
