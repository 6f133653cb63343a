"""The effect and policy a tool of the Claude Agent SDK declares through its MCP annotations."""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import SdkMcpTool
from dex_agents import effect_from_mcp_annotations, policy_from_mcp_annotations
from dex_agents.runner import ToolPolicy

__all__ = ["framework_effect", "tool_policy"]

framework_effect = effect_from_mcp_annotations
"""`dex_agents.effect_from_mcp_annotations` under the name this package exported in 0.1.0."""


def tool_policy(tool: SdkMcpTool[Any]) -> ToolPolicy | None:
    """Return the policy an SDK tool's annotations declare (`dex_agents.policy_from_mcp_annotations`), if any.

    The runner trusts them: an `@tool` tool is the Worker's own code, not a server's claim. A destructive
    one still asks for approval, as for any trusted MCP server.
    """
    return policy_from_mcp_annotations(tool.annotations)
