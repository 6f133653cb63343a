"""Message content in the GenAI conventions' JSON shapes, recorded only when the application opts in.

Spans carry the content as JSON text, which the conventions allow where an attribute cannot hold
structured values. The messages are the session's stored `AgentMessage` projections. A runner that keeps a
turn's items in its run state until the turn ends stores them with the turn's last model call, so the
session completes each span from the turn's tool call records and the outcome's tool calls: a ``chat``
span's input is what the model received and its output what that call produced.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dex_agents._tools._arguments import parse_json_text
from dex_agents._tracing._spans import ToolCallContent
from dex_agents.runner import ModelToolDescription
from dex_agents.values import AgentMessage, MessageRole

__all__ = [
    "input_messages_json",
    "output_messages_json",
    "system_instructions_json",
    "tool_definitions_json",
]

_Part = dict[str, object]


def _parts(message: AgentMessage) -> list[_Part]:
    if message.role is MessageRole.TOOL:
        return [{"type": "tool_call_response", "id": message.tool_call_id, "response": message.tool_output}]
    parts: list[_Part] = []
    if message.text:
        parts.append({"type": "text", "content": message.text})
    if message.role is MessageRole.ASSISTANT and message.tool_name:
        parts.append(
            {
                "type": "tool_call",
                "id": message.tool_call_id,
                "name": message.tool_name,
                "arguments": parse_json_text(message.tool_arguments),
            }
        )
    return parts


def _call_part(call: ToolCallContent) -> _Part:
    return {
        "type": "tool_call",
        "id": call.tool_call_id,
        "name": call.tool_name,
        "arguments": parse_json_text(call.arguments),
    }


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def input_messages_json(messages: Sequence[AgentMessage], tool_calls: Sequence[ToolCallContent] = ()) -> str:
    """Return ``gen_ai.input.messages``: what the model received, in order.

    Args:
        messages: One entry per stored message, in sequence order.
        tool_calls: Earlier tool calls of the turn that no message holds, with their results: an assistant
            entry with the calls no assistant message holds, then a tool entry with the results.
    """
    entries: list[_Part] = [{"role": str(message.role), "parts": _parts(message)} for message in messages]
    requested = {m.tool_call_id for m in messages if m.role is MessageRole.ASSISTANT and m.tool_name}
    calls = [_call_part(call) for call in tool_calls if call.tool_call_id not in requested]
    if calls:
        entries.append({"role": "assistant", "parts": calls})
    responses = [
        {"type": "tool_call_response", "id": call.tool_call_id, "response": call.response}
        for call in tool_calls
    ]
    if responses:
        entries.append({"role": "tool", "parts": responses})
    return _dumps(entries)


def output_messages_json(
    messages: Sequence[AgentMessage],
    text: str | None,
    finish_reason: str,
    tool_calls: Sequence[ToolCallContent] = (),
) -> str | None:
    """Return ``gen_ai.output.messages``: the call's output as one assistant choice, or `None` if empty.

    Args:
        messages: The messages the model produced in this call, as stored.
        text: A summary that `CompactContext` wrote instead of messages.
        finish_reason: The choice's finish reason.
        tool_calls: The tool calls the model asked for that no message in ``messages`` holds.
    """
    parts = [part for message in messages for part in _parts(message)]
    parts.extend(_call_part(call) for call in tool_calls)
    if text:
        parts.append({"type": "text", "content": text})
    if not parts:
        return None
    return _dumps([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])


def system_instructions_json(instructions: str | None) -> str | None:
    """Return ``gen_ai.system_instructions``: the instructions as one text part, or `None` without any."""
    if not isinstance(instructions, str) or not instructions:
        return None
    return _dumps([{"type": "text", "content": instructions}])


def tool_definitions_json(definitions: Sequence[ModelToolDescription]) -> str | None:
    """Return ``gen_ai.tool.definitions``: each offered tool, or `None` when the call offered none."""
    entries: list[_Part] = []
    for definition in definitions:
        if not isinstance(definition, ModelToolDescription):  # pyright: ignore[reportUnnecessaryIsInstance]
            continue
        entry: _Part = {"type": definition.tool_type, "name": definition.name}
        if definition.description:
            entry["description"] = definition.description
        if definition.parameters:
            entry["parameters"] = parse_json_text(definition.parameters)
        entries.append(entry)
    return _dumps(entries) if entries else None
