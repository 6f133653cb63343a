"""Tool effects and policies that LangChain tool metadata declares."""

from __future__ import annotations

from dex_agents import effect_from_mcp_annotations, policy_from_mcp_annotations
from dex_agents.runner import ToolPolicy
from dex_agents.values import ToolEffect
from langchain_core.tools import BaseTool

__all__ = ["annotation_policy", "framework_effect"]


def framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    langchain-mcp-adapters copies a server tool's MCP annotations into `BaseTool.metadata`, which
    `dex_agents.effect_from_mcp_annotations` reads: `readOnlyHint` makes a tool `read`, otherwise
    `idempotentHint` makes it `idempotent_write`. This reports what the metadata says whether or not anyone
    trusts it: `LangGraphRunner` uses it only with ``trust_mcp_annotations=True``.

    Args:
        tool: The tool as the graph's `ToolNode` holds it, or `None` for a name the graph does not know.

    Returns:
        The declared effect, if any.
    """
    return None if tool is None else effect_from_mcp_annotations(tool.metadata)


def annotation_policy(tool: BaseTool) -> ToolPolicy | None:
    """Return the policy trusted MCP annotations of the tool declare (`policy_from_mcp_annotations`)."""
    return policy_from_mcp_annotations(tool.metadata)
