"""Pydantic AI messages <-> stored session messages.

The session stores every model response in the one projection all adapters share (see the `dex-agents`
README, "One projection of messages for every adapter"), while the next model call must get Pydantic AI's
own messages back unchanged. So:

- a `ModelResponse` without tool calls is one `assistant` message holding the response as JSON;
- a `ModelResponse` with tool calls is split into *pieces*: an `assistant` message with the response's
  text and its other parts (thinking, provider-side tool parts), then one `assistant` message per
  `ToolCallPart` with the call's ID, name and arguments. Each piece keeps its own parts and their
  positions, and the first piece also keeps the response's own fields (usage, model name, timestamps),
  so replay joins consecutive pieces back into the very same `ModelResponse`;
- a `ModelRequest` is split so that every tool result becomes its own `tool` message (with the call's
  ID, tool name, arguments and output) and the rest of the request, such as a user prompt, becomes one
  `user` message. Pydantic AI merges consecutive `ModelRequest`s before every model call, so the rebuilt
  history sends the request the model saw.

Histories stored by the previous release, with one message per `ModelResponse`, replay unchanged: a
stored item that is not a piece is one whole Pydantic AI message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NotRequired, cast

import pydantic_core
from dex_agents import AgentMessage, FrameworkMessage, MessageRole
from pydantic import TypeAdapter
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    ToolCallPart,
    UserPromptPart,
)
from typing_extensions import TypedDict  # pydantic reads `typing.TypedDict` only from Python 3.12 on

__all__ = [
    "HistoryUnit",
    "StoredHistoryError",
    "build_user_framework_message",
    "decode_message",
    "decode_messages",
    "encode_message",
    "encode_messages",
    "history_units",
    "project_messages",
    "render_output",
]

# `ModelMessage` is an `Annotated` union, which pyright does not accept as a `TypeAdapter` type form.
_MESSAGE_ADAPTER: TypeAdapter[ModelMessage] = TypeAdapter(cast(type[ModelMessage], ModelMessage))
_MESSAGES_ADAPTER: TypeAdapter[list[ModelMessage]] = TypeAdapter(list[ModelMessage])


class _PiecePosition(TypedDict):
    part_indexes: list[int]
    """The positions of this piece's parts in the whole response."""
    part_count: int
    """How many parts the whole response has."""


class _ResponsePiece(TypedDict):
    dex_response_piece: _PiecePosition
    response: NotRequired[ModelResponse]
    """The first piece: the response with only this piece's parts."""
    parts: NotRequired[list[ModelResponsePart]]
    """Every later piece: its parts only."""


_PIECE_ADAPTER: TypeAdapter[_ResponsePiece] = TypeAdapter(_ResponsePiece)
# What every stored piece starts with, and no Pydantic AI message does (theirs start with `{"parts":`).
_PIECE_PREFIX = '{"dex_response_piece":'


class StoredHistoryError(ValueError):
    """The stored messages cannot be rebuilt into a Pydantic AI message history."""


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


class _ResponseAssembly:
    """The pieces of one response read so far, joined once every part is there."""

    def __init__(self, head: ModelResponse, position: _PiecePosition) -> None:
        self._head = head
        self._part_count = position["part_count"]
        self._parts: dict[int, ModelResponsePart] = {}
        self.add(position, head.parts)

    def add(self, position: _PiecePosition, parts: Sequence[ModelResponsePart]) -> None:
        if position["part_count"] != self._part_count or len(position["part_indexes"]) != len(parts):
            raise StoredHistoryError("a stored piece of a model response does not match the pieces before it")
        for index, part in zip(position["part_indexes"], parts, strict=True):
            if index in self._parts or not 0 <= index < self._part_count:
                raise StoredHistoryError(f"a stored model response has part {index} twice or out of range")
            self._parts[index] = part

    @property
    def is_complete(self) -> bool:
        return len(self._parts) == self._part_count

    def join(self) -> ModelResponse:
        return dataclasses.replace(
            self._head, parts=[self._parts[index] for index in range(self._part_count)]
        )


@dataclass(frozen=True)
class HistoryUnit:
    """One Pydantic AI message of the rebuilt history, and the stored messages it was rebuilt from.

    Attributes:
        message: The Pydantic AI message.
        first_sequence: The first stored message it came from.
        last_sequence: The last stored message it came from (a split response spans several).
    """

    message: ModelMessage
    first_sequence: int
    last_sequence: int


def history_units(messages: Iterable[AgentMessage]) -> list[HistoryUnit]:
    """Rebuild the Pydantic AI message history from stored messages, in sequence order, with their ranges.

    Consecutive pieces of one split response become that response again, one unit spanning their
    sequences; every other stored message is one unit.

    Raises:
        StoredHistoryError: If a split response's pieces are incomplete or out of order.
        pydantic.ValidationError: If a stored item is not a Pydantic AI message, for example because
            another adapter's runner stored it.
    """
    units: list[HistoryUnit] = []
    assembly: _ResponseAssembly | None = None
    first_sequence = 0
    for message in messages:
        item = message.framework_item
        if not item.startswith(_PIECE_PREFIX):
            if assembly is not None:
                raise StoredHistoryError(
                    f"stored message {message.sequence} interrupts the pieces of a model response"
                )
            units.append(HistoryUnit(decode_message(item), message.sequence, message.sequence))
            continue
        piece = _PIECE_ADAPTER.validate_json(item)
        position = piece["dex_response_piece"]
        head = piece.get("response")
        if head is not None:
            if assembly is not None:
                raise StoredHistoryError(f"stored message {message.sequence} starts a model response early")
            assembly = _ResponseAssembly(head, position)
            first_sequence = message.sequence
        elif assembly is None:
            raise StoredHistoryError(
                f"stored message {message.sequence} is a piece of a model response without its first piece"
            )
        else:
            assembly.add(position, piece.get("parts", []))
        if assembly.is_complete:
            units.append(HistoryUnit(assembly.join(), first_sequence, message.sequence))
            assembly = None
    if assembly is not None:
        raise StoredHistoryError("the last stored model response is missing pieces")
    return units


def project_messages(
    messages: Sequence[ModelMessage], *, output_text: str | None = None
) -> list[FrameworkMessage]:
    """Project Pydantic AI messages onto stored messages, in order.

    Args:
        messages: The messages a turn produced after its user message.
        output_text: The rendered final output, when an output tool call produced it. It is added to
            the display text of the last response, after any text of the response's own.

    Returns:
        For each response, its text message and one message per tool call (see the module docstring);
        one `tool` message per tool result, and one `user` message per request remainder that is not a
        tool result.
    """
    calls_by_id: dict[str, ToolCallPart] = {}
    projected: list[FrameworkMessage] = []
    last_response = max(
        (index for index, message in enumerate(messages) if isinstance(message, ModelResponse)), default=None
    )
    for index, message in enumerate(messages):
        if isinstance(message, ModelResponse):
            for call in message.tool_calls:
                calls_by_id[call.tool_call_id] = call
            projected.extend(_project_response(message, output_text if index == last_response else None))
        else:
            projected.extend(_project_request(message, calls_by_id))
    return projected


def _project_response(response: ModelResponse, output_text: str | None) -> list[FrameworkMessage]:
    text = response.text
    if output_text is not None:
        text = f"{text}\n\n{output_text}" if text else output_text
    call_indexes = [index for index, part in enumerate(response.parts) if isinstance(part, ToolCallPart)]
    if not call_indexes:
        return [
            FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=encode_message(response), text=text)
        ]
    other_indexes = [index for index in range(len(response.parts)) if index not in call_indexes]
    pieces: list[FrameworkMessage] = []
    if other_indexes or text:
        item = _encode_piece(response, other_indexes, is_first=True)
        pieces.append(FrameworkMessage(role=MessageRole.ASSISTANT, framework_item=item, text=text))
    for index in call_indexes:
        call = cast(ToolCallPart, response.parts[index])
        pieces.append(
            FrameworkMessage(
                role=MessageRole.ASSISTANT,
                framework_item=_encode_piece(response, [index], is_first=not pieces),
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                tool_arguments=call.args_as_json_str(),
            )
        )
    return pieces


def _encode_piece(response: ModelResponse, part_indexes: list[int], *, is_first: bool) -> str:
    position = _PiecePosition(part_indexes=part_indexes, part_count=len(response.parts))
    parts = [response.parts[index] for index in part_indexes]
    if is_first:
        piece = _ResponsePiece(
            dex_response_piece=position, response=dataclasses.replace(response, parts=parts)
        )
    else:
        piece = _ResponsePiece(dex_response_piece=position, parts=parts)
    return _PIECE_ADAPTER.dump_json(piece).decode()


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
                    # What the session recorded, verbatim (`describe_tool_call_outcome`): Pydantic AI
                    # shows its model a failed call inside an {"error": ...} envelope, which UIs reading
                    # `tool_output` would otherwise have to strip, differently per adapter.
                    tool_output=part.model_response_str(wrap_if_error=False),
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
