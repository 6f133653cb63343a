"""Tool effects and policies that Google ADK's tool metadata declares."""

from __future__ import annotations

from dex_agents import effect_from_mcp_annotations, policy_from_mcp_annotations
from dex_agents.runner import ToolPolicy
from dex_agents.values import ToolEffect
from google.adk.tools.base_tool import BaseTool

__all__ = ["annotation_policy", "framework_effect"]


def framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    ADK keeps an MCP server's tool definition on `McpTool.raw_mcp_tool`, annotations included, but does
    not use them itself; `dex_agents.effect_from_mcp_annotations` reads their hints. This reports what the
    annotations say whether or not anyone trusts them: `GoogleAdkRunner` uses them only with
    ``trust_mcp_annotations=True``.

    Args:
        tool: The tool as ADK offered it to the model; `None` for a name the agent does not have.

    Returns:
        The declared effect, if any.
    """
    return effect_from_mcp_annotations(_annotations(tool))


def annotation_policy(tool: BaseTool | None) -> ToolPolicy | None:
    """Return the policy trusted MCP annotations of the tool declare (`policy_from_mcp_annotations`)."""
    return policy_from_mcp_annotations(_annotations(tool))


def _annotations(tool: BaseTool | None) -> object:
    raw_tool: object = getattr(tool, "raw_mcp_tool", None)
    return getattr(raw_tool, "annotations", None)
