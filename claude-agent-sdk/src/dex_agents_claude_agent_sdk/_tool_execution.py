"""Running one approved tool call in its tool Step: the user's own `@tool` handler, once.

An approved permission request for one of Claude Code's own tools runs nothing here: only the CLI can run
its tools, so the tool Step records the approval, and the turn's next run lets the CLI run the call.
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import SdkMcpTool
from dex_agents import parse_tool_arguments
from dex_agents.runner import ToolExecutionError, ToolExecutionResult
from dex_agents.values import AgentToolCall

from dex_agents_claude_agent_sdk._messages import tool_result_text

__all__ = [
    "APPROVED_PERMISSION_OUTPUT",
    "PERMISSION_REQUEST_REFERENCE",
    "approved_permission_request",
    "is_permission_request",
    "run_tool",
]

PERMISSION_REQUEST_REFERENCE = '{"source":"claude-code-permission-request"}'
"""The `tool_source_reference` of a call whose Claude Code permission request waits for approval."""

APPROVED_PERMISSION_OUTPUT = (
    "Approved: Claude Code runs {tool} when the turn goes on, and the model reads the tool's own result."
)
"""The recorded output of an approved permission request ({tool}: the tool); see the module docstring."""


def is_permission_request(record: AgentToolCall) -> bool:
    """Whether ``record`` is a Claude Code permission request that waited for the session's approval."""
    return record.tool_source_reference == PERMISSION_REQUEST_REFERENCE


def approved_permission_request(record: AgentToolCall) -> ToolExecutionResult:
    """Record the approval of a permission request; the CLI runs the call in the turn's next run."""
    return ToolExecutionResult(APPROVED_PERMISSION_OUTPUT.format(tool=record.tool_name))


async def run_tool(tool: SdkMcpTool[Any] | None, record: AgentToolCall) -> ToolExecutionResult:
    """Call ``tool``'s handler with the recorded arguments and return its text.

    Args:
        tool: The tool the record names, or `None` when the runner has no such tool.
        record: The approved call.

    Returns:
        The text blocks of the tool's result, joined by newlines.

    Raises:
        ToolExecutionError: When the tool is unknown, its arguments are not a JSON object, or its result
            has `is_error` set. Other exceptions propagate, so the session retries or records the call by
            its effect.
    """
    if tool is None:
        raise ToolExecutionError(f"unknown tool {record.tool_name!r}")
    arguments = parse_tool_arguments(record.arguments, tool_name=record.tool_name)
    result = await tool.handler(arguments)
    text = tool_result_text(result.get("content"))
    if result.get("is_error"):
        raise ToolExecutionError(text or f"{record.tool_name} failed")
    return ToolExecutionResult(text)
