"""Tool effects that Pydantic AI's tool metadata declares."""

from __future__ import annotations

from dex_agents import ToolEffect, effect_from_mcp_annotations
from pydantic_ai.tools import ToolDefinition

__all__ = ["framework_effect"]


def framework_effect(tool_def: ToolDefinition | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    Pydantic AI's MCP toolsets keep a server's tool annotations in `ToolDefinition.metadata["annotations"]`;
    `dex_agents.effect_from_mcp_annotations` reads the hints. The session's explicit `ToolPolicy` for the
    tool still wins.

    Args:
        tool_def: The tool's definition as Pydantic AI offered it to the model.

    Returns:
        The declared effect, if any.
    """
    if tool_def is None or not tool_def.metadata:
        return None
    return effect_from_mcp_annotations(tool_def.metadata.get("annotations"))
