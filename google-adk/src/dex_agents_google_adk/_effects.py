"""Tool effects that Google ADK's tool metadata declares."""

from __future__ import annotations

from dex_agents import effect_from_mcp_annotations
from dex_agents.values import ToolEffect
from google.adk.tools.base_tool import BaseTool

__all__ = ["framework_effect"]


def framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    ADK keeps an MCP server's tool definition on `McpTool.raw_mcp_tool`, annotations included, but does
    not use them itself; `dex_agents.effect_from_mcp_annotations` reads their hints. The session's
    explicit `ToolPolicy` for the tool still wins.

    Args:
        tool: The tool as ADK offered it to the model; `None` for a name the agent does not have.

    Returns:
        The declared effect, if any.
    """
    raw_tool: object = getattr(tool, "raw_mcp_tool", None)
    annotations: object = getattr(raw_tool, "annotations", None)
    return None if annotations is None else effect_from_mcp_annotations(annotations)
