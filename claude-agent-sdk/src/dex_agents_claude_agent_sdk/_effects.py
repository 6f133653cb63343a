"""The effect a tool of the Claude Agent SDK declares through its MCP annotations."""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import SdkMcpTool
from dex_agents import effect_from_mcp_annotations
from dex_agents.values import ToolEffect

__all__ = ["framework_effect", "tool_effect"]

framework_effect = effect_from_mcp_annotations
"""`dex_agents.effect_from_mcp_annotations` under the name this package exported in 0.1.0."""


def tool_effect(tool: SdkMcpTool[Any]) -> ToolEffect | None:
    """Return the effect an SDK tool's annotations declare (`readOnlyHint`, `idempotentHint`), if any."""
    return effect_from_mcp_annotations(tool.annotations)
