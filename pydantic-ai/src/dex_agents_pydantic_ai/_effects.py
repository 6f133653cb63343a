"""Tool effects that Pydantic AI's tool metadata declares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from dex_agents import ToolEffect
from pydantic_ai.tools import ToolDefinition

__all__ = ["framework_effect"]


def framework_effect(tool_def: ToolDefinition | None) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    Pydantic AI's MCP toolsets keep a server's tool annotations in `ToolDefinition.metadata["annotations"]`.
    `readOnlyHint` makes a tool `read`; otherwise `idempotentHint` makes it `idempotent_write`, whatever
    `destructiveHint` says, because an idempotent call is safe to retry with the same key either way.
    The session's explicit `ToolPolicy` for the tool still wins.

    Args:
        tool_def: The tool's definition as Pydantic AI offered it to the model.

    Returns:
        The declared effect, if any.
    """
    if tool_def is None or not tool_def.metadata:
        return None
    annotations = tool_def.metadata.get("annotations")
    if not isinstance(annotations, Mapping):
        return None
    hints = cast(Mapping[str, Any], annotations)
    if hints.get("readOnlyHint") is True:
        return ToolEffect.READ
    if hints.get("idempotentHint") is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None
