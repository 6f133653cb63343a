"""The session's idempotency key for MCP servers attached to an agent the SDK's own way.

`McpToolSource` sends the key with every call. An SDK `MCPServer` on an agent sends what its
``tool_meta_resolver`` returns as the request's ``_meta``; `idempotency_key_meta` is such a resolver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dex_agents import current_tool_execution

if TYPE_CHECKING:
    from agents.mcp.util import MCPToolMetaContext

__all__ = ["IDEMPOTENCY_KEY_META_KEY", "idempotency_key_meta"]

# The same wire name as `dex_agents.mcp.IDEMPOTENCY_KEY_META_KEY` (a test pins it); spelled here because
# `dex_agents.mcp` needs mcp 2.3, and the SDK's own MCP servers also run with mcp 1.x.
IDEMPOTENCY_KEY_META_KEY = "io.superdurable.dex/idempotencyKey"


def idempotency_key_meta(context: MCPToolMetaContext) -> dict[str, Any] | None:
    """Return ``_meta`` with the session's idempotency key for an MCP ``tools/call``.

    Pass it as ``tool_meta_resolver`` when you build an SDK MCP server
    (``MCPServerStdio(..., tool_meta_resolver=idempotency_key_meta)``): every call that server makes in a
    tool Step then carries ``{"io.superdurable.dex/idempotencyKey": "<session>/<turn>/<tool call ID>"}``,
    the same on every attempt, as `McpToolSource` sends it.

    Args:
        context: The SDK's description of the call (not needed: the key comes from the tool Step).

    Returns:
        The metadata, or `None` outside a tool Step (the SDK then sends none).
    """
    del context
    execution = current_tool_execution()
    if execution is None:
        return None
    return {IDEMPOTENCY_KEY_META_KEY: execution.idempotency_key}
