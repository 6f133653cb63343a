"""Tool effects that the SDK's tool metadata declares."""

from __future__ import annotations

from agents import FunctionTool
from dex_agents import effect_from_mcp_annotations
from dex_agents.values import ToolEffect

__all__ = ["framework_effect"]


def framework_effect(tool: object) -> ToolEffect | None:
    """Return the effect an MCP tool's annotations declare, or `None` when they declare none.

    The SDK keeps an MCP server's tool annotations on the `FunctionTool` it builds for each listed tool
    (a private `_mcp_annotations` attribute); `dex_agents.effect_from_mcp_annotations` maps them:
    `readOnlyHint` is `read`, otherwise `idempotentHint` is `idempotent_write`. The session's explicit
    `ToolPolicy` for the tool still wins.

    Args:
        tool: The tool as the SDK offered it to the model.

    Returns:
        The declared effect, if any.
    """
    if not isinstance(tool, FunctionTool):
        return None
    return effect_from_mcp_annotations(getattr(tool, "_mcp_annotations", None))
