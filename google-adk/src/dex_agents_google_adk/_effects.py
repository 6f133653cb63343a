"""Tool effects that Google ADK's tool metadata declares."""

from __future__ import annotations

from dex_agents.values import ToolEffect
from google.adk.tools.base_tool import BaseTool

__all__ = ["framework_effect"]


def framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    ADK keeps an MCP server's tool definition on `McpTool.raw_mcp_tool`, annotations included, but does
    not use them itself. `readOnlyHint` makes a tool `read`; otherwise `idempotentHint` makes it
    `idempotent_write`, whatever `destructiveHint` says, because an idempotent call is safe to retry with
    the same key either way. The session's explicit `ToolPolicy` for the tool still wins.

    Args:
        tool: The tool as ADK offered it to the model; `None` for a name the agent does not have.

    Returns:
        The declared effect, if any.
    """
    raw_tool: object = getattr(tool, "raw_mcp_tool", None)
    annotations: object = getattr(raw_tool, "annotations", None)
    if annotations is None:
        return None
    # mcp 2.x spells the hints in snake_case, mcp 1.x in camelCase.
    read_only = getattr(annotations, "read_only_hint", getattr(annotations, "readOnlyHint", None))
    idempotent = getattr(annotations, "idempotent_hint", getattr(annotations, "idempotentHint", None))
    if read_only is True:
        return ToolEffect.READ
    if idempotent is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None
