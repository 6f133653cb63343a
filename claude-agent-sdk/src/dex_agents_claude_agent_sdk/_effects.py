"""Tool effects that MCP tool annotations declare."""

from __future__ import annotations

from typing import Any, cast

from dex_agents.values import ToolEffect

__all__ = ["framework_effect"]


def framework_effect(annotations: Any) -> ToolEffect | None:
    """Return the effect a tool's MCP annotations declare, or `None` when they declare none.

    `readOnlyHint` makes a tool `read`; otherwise `idempotentHint` makes it `idempotent_write`. The
    session's explicit `ToolPolicy` for the tool still wins.

    Args:
        annotations: The tool's annotations: an `mcp.types.ToolAnnotations` (either spelling of the
            hints) or a mapping of wire names, or `None`.

    Returns:
        The declared effect, if any.
    """
    if annotations is None:
        return None
    if isinstance(annotations, dict):
        hints = cast(dict[str, Any], annotations)
    else:
        hints = annotations.model_dump(by_alias=True, exclude_none=True)
    if hints.get("readOnlyHint", hints.get("read_only_hint")) is True:
        return ToolEffect.READ
    if hints.get("idempotentHint", hints.get("idempotent_hint")) is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None
