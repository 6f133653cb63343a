"""Tool effects that the SDK's tool metadata declares."""

from __future__ import annotations

from typing import Any

from agents import FunctionTool
from dex_agents.values import ToolEffect

__all__ = ["framework_effect"]


def _hint(annotations: object, snake: str, camel: str) -> object:
    if isinstance(annotations, dict):
        mapping: dict[str, Any] = annotations  # pyright: ignore[reportUnknownVariableType]
        return mapping.get(camel, mapping.get(snake))
    # MCP SDK releases name the attribute in snake case or in the wire's camel case.
    value: object = getattr(annotations, snake, None)
    return value if value is not None else getattr(annotations, camel, None)


def framework_effect(tool: object) -> ToolEffect | None:
    """Return the effect an MCP tool's annotations declare, or `None` when they declare none.

    The SDK keeps an MCP server's tool annotations on the `FunctionTool` it builds for each listed tool.
    `readOnlyHint` makes a tool `read`; otherwise `idempotentHint` makes it `idempotent_write`, whatever
    `destructiveHint` says, because an idempotent call is safe to retry with the same key either way. The
    session's explicit `ToolPolicy` for the tool still wins.

    Args:
        tool: The tool as the SDK offered it to the model.

    Returns:
        The declared effect, if any.
    """
    if not isinstance(tool, FunctionTool):
        return None
    annotations: object = getattr(tool, "_mcp_annotations", None)
    if annotations is None:
        return None
    if _hint(annotations, "read_only_hint", "readOnlyHint") is True:
        return ToolEffect.READ
    if _hint(annotations, "idempotent_hint", "idempotentHint") is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None
