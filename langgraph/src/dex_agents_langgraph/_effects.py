"""Tool effects that LangChain tool metadata declares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from dex_agents.values import ToolEffect
from langchain_core.tools import BaseTool

__all__ = ["framework_effect"]

# langchain-mcp-adapters copies a server tool's MCP annotations into `BaseTool.metadata`. With mcp 1.x
# their names are camelCase; a tool built from mcp 2.x annotations carries snake_case names.
_READ_ONLY_HINTS = ("readOnlyHint", "read_only_hint")
_IDEMPOTENT_HINTS = ("idempotentHint", "idempotent_hint")


def framework_effect(tool: BaseTool | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    `readOnlyHint` makes a tool `read`; otherwise `idempotentHint` makes it `idempotent_write`, whatever
    `destructiveHint` says, because an idempotent call is safe to retry with the same key either way. The
    session's explicit `ToolPolicy` for the tool still wins.

    Args:
        tool: The tool as the graph's `ToolNode` holds it, or `None` for a name the graph does not know.

    Returns:
        The declared effect, if any.
    """
    if tool is None or not isinstance(tool.metadata, Mapping):
        return None
    hints = cast(Mapping[str, Any], tool.metadata)
    if any(hints.get(name) is True for name in _READ_ONLY_HINTS):
        return ToolEffect.READ
    if any(hints.get(name) is True for name in _IDEMPOTENT_HINTS):
        return ToolEffect.IDEMPOTENT_WRITE
    return None
