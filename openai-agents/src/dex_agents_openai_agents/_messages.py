"""Projection between the SDK's Responses input items and the session's stored messages.

Every stored `AgentMessage` keeps one SDK input item (a `TResponseInputItem` as JSON) in `framework_item`,
so the next turn hands the SDK exactly the items it produced. The SDK already keeps a response's text
(a `message` item) apart from each of its calls (one `function_call` item each), so one item per message
is the shared projection of `dex_agents.testing.check_message_projection`: the display fields (`text`,
tool name, arguments, output) are filled in from the item for UIs and snapshots, and a call's output
carries the call's name and arguments.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from agents import TResponseInputItem
from dex_agents.runner import AgentTurnContext, describe_tool_call_outcome
from dex_agents.values import AgentMessage, AgentToolCall, FrameworkMessage, MessageRole

from dex_agents_openai_agents._hosted_mcp import (
    approval_response_item,
    approval_response_output,
    is_hosted_mcp_reference,
)

__all__ = [
    "build_user_framework_message",
    "input_items_from_stored_messages",
    "item_text",
    "project_items",
    "recorded_result_item",
    "with_recorded_results",
]


def build_user_framework_message(text: str) -> FrameworkMessage:
    """Return a user message whose framework item is an SDK easy-input user message."""
    item = {"role": "user", "content": text}
    return FrameworkMessage(role=MessageRole.USER, framework_item=_dump(item), text=text)


def input_items_from_stored_messages(messages: Sequence[AgentMessage]) -> list[TResponseInputItem]:
    """Return the SDK input items of every stored message, in sequence order.

    Raises:
        ValueError: If a stored item is not a JSON object.
    """
    items: list[TResponseInputItem] = []
    for message in messages:
        loaded: object = json.loads(message.framework_item)
        if not isinstance(loaded, dict):
            raise ValueError(
                f"stored message {message.sequence} does not hold an OpenAI Agents SDK input item"
            )
        items.append(cast(TResponseInputItem, loaded))
    return items


def item_text(item: Mapping[str, Any]) -> str | None:
    """Return the display text of a message item: its text content, or `None` when it has none."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    for part in cast(list[object], content):
        if isinstance(part, Mapping):
            text = cast(Mapping[str, Any], part).get("text")
            if isinstance(text, str):
                texts.append(text)
    return "".join(texts) if texts else None


def _output_text(output: object) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = [
            str(cast(Mapping[str, Any], part).get("text", ""))
            for part in cast(list[object], output)
            if isinstance(part, Mapping)
        ]
        return "".join(texts)
    return json.dumps(output)


def project_items(items: Iterable[TResponseInputItem]) -> list[FrameworkMessage]:
    """Project SDK input items on stored messages, one message per item, in order.

    Function calls (tool calls and handoffs) are assistant messages carrying the tool name and arguments;
    their outputs are tool messages; reasoning and hosted tool items are assistant messages without
    text, kept so the SDK gets them back unchanged.
    """
    tool_calls: dict[str, tuple[str, str]] = {}
    messages: list[FrameworkMessage] = []
    for raw in items:
        item = cast(Mapping[str, Any], raw)
        item_type = item.get("type")
        framework_item = _dump(item)
        if item_type in ("function_call", "mcp_approval_request"):
            # A hosted MCP approval request is a call the session approves; its response is the result.
            call_id = str(item.get("call_id" if item_type == "function_call" else "id", ""))
            name = str(item.get("name", ""))
            arguments = str(item.get("arguments", ""))
            tool_calls[call_id] = (name, arguments)
            messages.append(
                FrameworkMessage(
                    role=MessageRole.ASSISTANT,
                    framework_item=framework_item,
                    tool_call_id=call_id,
                    tool_name=name,
                    tool_arguments=arguments,
                )
            )
        elif item_type in ("function_call_output", "mcp_approval_response"):
            is_output = item_type == "function_call_output"
            call_id = str(item.get("call_id" if is_output else "approval_request_id", ""))
            name, arguments = tool_calls.get(call_id, (None, None))
            messages.append(
                FrameworkMessage(
                    role=MessageRole.TOOL,
                    framework_item=framework_item,
                    tool_call_id=call_id,
                    tool_name=name,
                    tool_arguments=arguments,
                    tool_output=_output_text(item.get("output"))
                    if is_output
                    else approval_response_output(item),
                )
            )
        elif item_type in (None, "message") and item.get("role") in ("user", "system", "developer"):
            role = MessageRole.USER
            messages.append(FrameworkMessage(role=role, framework_item=framework_item, text=item_text(item)))
        else:
            messages.append(
                FrameworkMessage(
                    role=MessageRole.ASSISTANT, framework_item=framework_item, text=item_text(item)
                )
            )
    return messages


def recorded_result_item(record: AgentToolCall) -> TResponseInputItem:
    """Return the item that shows the model a final record's result.

    A `function_call_output`, or the ``mcp_approval_response`` of a hosted MCP approval request.
    """
    if is_hosted_mcp_reference(record.tool_source_reference):
        return approval_response_item(record)
    output = describe_tool_call_outcome(record)
    return cast(
        TResponseInputItem,
        {"type": "function_call_output", "call_id": record.tool_call_id, "output": output},
    )


def with_recorded_results(
    items: Sequence[TResponseInputItem], turn: AgentTurnContext
) -> list[TResponseInputItem]:
    """Return ``items`` followed by a recorded result for each of their calls that has no output yet.

    Raises:
        KeyError: If a call without an output has no record in the turn.
    """
    parsed = [cast(Mapping[str, Any], item) for item in items]
    answered = {item.get("call_id") for item in parsed if item.get("type") == "function_call_output"} | {
        item.get("approval_request_id") for item in parsed if item.get("type") == "mcp_approval_response"
    }
    calls = [
        item.get("call_id") if item.get("type") == "function_call" else item.get("id")
        for item in parsed
        if item.get("type") in ("function_call", "mcp_approval_request")
    ]
    unanswered = [str(call_id or "") for call_id in calls if call_id not in answered]
    return [*items, *(recorded_result_item(turn.recorded_tool_call(call_id)) for call_id in unanswered)]


def _dump(item: Mapping[str, Any]) -> str:
    return json.dumps(item, separators=(",", ":"), ensure_ascii=False)
