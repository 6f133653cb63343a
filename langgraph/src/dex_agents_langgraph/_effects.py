"""Tool effects that LangChain tool metadata declares."""

from __future__ import annotations

from dex_agents import effect_from_mcp_annotations
from dex_agents.values import ToolEffect
from langchain_core.tools import BaseTool

__all__ = ["framework_effect"]


def framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    langchain-mcp-adapters copies a server tool's MCP annotations into `BaseTool.metadata`, which
    `dex_agents.effect_from_mcp_annotations` reads: `readOnlyHint` makes a tool `read`, otherwise
    `idempotentHint` makes it `idempotent_write`. The session's explicit `ToolPolicy` for the tool still
    wins.

    Args:
        tool: The tool as the graph's `ToolNode` holds it, or `None` for a name the graph does not know.

    Returns:
        The declared effect, if any.
    """
    if tool is None:
        return None
    return effect_from_mcp_annotations(tool.metadata)
