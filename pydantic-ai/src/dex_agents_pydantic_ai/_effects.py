"""Tool effects and policies that Pydantic AI's tool metadata declares."""

from __future__ import annotations

from dex_agents import ToolEffect, ToolPolicy, effect_from_mcp_annotations, policy_from_mcp_annotations
from pydantic_ai.tools import ToolDefinition

__all__ = ["annotation_policy", "framework_effect"]


def framework_effect(tool_def: ToolDefinition | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    Pydantic AI's MCP toolsets keep a server's tool annotations in `ToolDefinition.metadata["annotations"]`;
    `dex_agents.effect_from_mcp_annotations` reads the hints. This reports what the annotations say
    whether or not anyone trusts them: `PydanticAiRunner` uses them only with ``trust_mcp_annotations=True``.

    Args:
        tool_def: The tool's definition as Pydantic AI offered it to the model.

    Returns:
        The declared effect, if any.
    """
    return effect_from_mcp_annotations(_annotations(tool_def))


def annotation_policy(tool_def: ToolDefinition | None) -> ToolPolicy | None:
    """Return the policy trusted MCP annotations of the tool declare (`policy_from_mcp_annotations`)."""
    return policy_from_mcp_annotations(_annotations(tool_def))


def _annotations(tool_def: ToolDefinition | None) -> object:
    if tool_def is None or not tool_def.metadata:
        return None
    return tool_def.metadata.get("annotations")
