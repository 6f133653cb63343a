"""Message content in the GenAI conventions' JSON shapes, recorded only when the application opts in.

Spans carry the content as JSON text, which the conventions allow where an attribute cannot hold
structured values. The messages are the session's stored `AgentMessage` projections, so they show what
the session stored, which for a runner that keeps a turn's items in its run state until the turn ends is
the whole turn's items on the turn's last ``chat`` span.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dex_agents._tools._arguments import parse_json_text
from dex_agents.values import AgentMessage, MessageRole

__all__ = ["input_messages_json", "output_messages_json"]

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


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def input_messages_json(messages: Sequence[AgentMessage]) -> str:
    """Return ``gen_ai.input.messages``: one entry per stored message, in sequence order."""
    return _dumps([{"role": str(message.role), "parts": _parts(message)} for message in messages])


def output_messages_json(
    messages: Sequence[AgentMessage], text: str | None, finish_reason: str
) -> str | None:
    """Return ``gen_ai.output.messages``: the attempt's output as one assistant choice, or `None` if empty.

    Args:
        messages: The messages the attempt stored.
        text: A summary that `CompactContext` wrote instead of messages.
        finish_reason: The choice's finish reason.
    """
    parts = [part for message in messages for part in _parts(message)]
    if text:
        parts.append({"type": "text", "content": text})
    if not parts:
        return None
    return _dumps([{"role": "assistant", "parts": parts, "finish_reason": finish_reason}])
