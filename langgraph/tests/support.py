"""What several test modules share: short ways to write scripted answers."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolCall
from langchain_core.messages.ai import UsageMetadata


def tool_call(name: str, arguments: dict[str, object], tool_call_id: str) -> ToolCall:
    """A tool call of a scripted answer."""
    return ToolCall(name=name, args=arguments, id=tool_call_id, type="tool_call")


def respond(text: str = "", *calls: ToolCall, input_tokens: int = 10, output_tokens: int = 5) -> AIMessage:
    """A scripted answer with its text, its tool calls and the usage it reports."""
    return AIMessage(
        content=text,
        tool_calls=list(calls),
        usage_metadata=UsageMetadata(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        ),
    )
