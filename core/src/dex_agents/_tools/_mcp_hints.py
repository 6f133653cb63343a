"""The tool effect an MCP server's tool annotations declare.

MCP tools may carry hints (``readOnlyHint``, ``idempotentHint``, ``destructiveHint``) that every framework
passes along in its own way: the SDK's ``ToolAnnotations`` object (camelCase attributes in mcp 1.x,
snake_case in mcp 2.x), or a mapping of either spelling. This module reads them without importing mcp.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from dex_agents.runner import ToolPolicy
from dex_agents.values import ToolEffect

__all__ = ["effect_from_mcp_annotations", "policy_from_mcp_annotations"]

_READ_ONLY = ("readOnlyHint", "read_only_hint")
_IDEMPOTENT = ("idempotentHint", "idempotent_hint")
_DESTRUCTIVE = ("destructiveHint", "destructive_hint")


def effect_from_mcp_annotations(annotations: object) -> ToolEffect | None:
    """Return the effect an MCP tool's annotations declare, or `None` when they declare none.

    ``readOnlyHint`` true makes the tool `read`. Otherwise ``idempotentHint`` true makes it
    `idempotent_write`, whatever ``destructiveHint`` says: a call that is safe to repeat with the same
    idempotency key may be retried either way. Only a literal ``True`` counts. Pass the result to
    `AgentTurnContext.resolve_tool_policy` as ``framework_effect``; the session's explicit `ToolPolicy`
    for the tool still wins.

    Args:
        annotations: The tool's annotations: an object with the hints as attributes (such as
            ``mcp.types.ToolAnnotations`` of mcp 1.x or 2.x), a mapping of camelCase or snake_case names,
            or `None`.

    Returns:
        `ToolEffect.READ`, `ToolEffect.IDEMPOTENT_WRITE`, or `None`.
    """
    if annotations is None:
        return None
    if _hint(annotations, _READ_ONLY) is True:
        return ToolEffect.READ
    if _hint(annotations, _IDEMPOTENT) is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None


def policy_from_mcp_annotations(annotations: object) -> ToolPolicy | None:
    """Return the policy a trusted MCP tool's annotations declare, or `None` when they declare no effect.

    The effect is `effect_from_mcp_annotations`'. A tool that is not read-only is destructive unless its
    ``destructiveHint`` is literally false, as the MCP specification defines the hint's default, and a
    destructive tool waits for the user's approval even when ``idempotentHint`` makes it safe to retry:
    repeating a deletion is harmless, making it without asking is not.

    Use it only for a server the Worker's code trusts: annotations are hints that any server may set to
    anything. Pass the result to `AgentTurnContext.resolve_tool_policy` as ``framework_policy``; the
    session's explicit `ToolPolicy` for the tool still wins.

    Args:
        annotations: The tool's annotations, in any form `effect_from_mcp_annotations` reads.

    Returns:
        The tool's policy, or `None` when the annotations declare no effect.
    """
    effect = effect_from_mcp_annotations(annotations)
    if effect is None:
        return None
    if effect is ToolEffect.READ:
        return ToolPolicy(effect)
    destructive = _hint(annotations, _DESTRUCTIVE) is not False
    return ToolPolicy(effect, requires_approval=True if destructive else None)


def _hint(annotations: object, names: tuple[str, str]) -> object:
    for name in names:
        if isinstance(annotations, Mapping):
            value: object = cast(Mapping[str, Any], annotations).get(name)
        else:
            value = getattr(annotations, name, None)
        if value is not None:
            return value
    return None
