"""The in-process MCP server of the runner's shims, which tells each shim the tool use it answers.

An MCP tool handler gets only its arguments, yet a resumed run must answer the deferred call, and only
that call, with its recorded result. The Claude Code CLI names the model's tool use in every `tools/call`
it sends (`_meta["claudecode/toolUseId"]`); the SDK's server drops `_meta` before the handler runs, so
this module wraps the server's `tools/call` handler and hands the ID to the shim through a context
variable.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Sequence
from typing import Any, cast

from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool, create_sdk_mcp_server
from dex_agents.runner import ModelToolDescription

__all__ = ["TOOL_USE_ID_META_KEY", "create_shim_server", "current_tool_use_id", "listed_tools"]

TOOL_USE_ID_META_KEY = "claudecode/toolUseId"
"""Where a `tools/call` from the Claude Code CLI names the model's tool use (in `params._meta`)."""

_tool_use_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dex_claude_tool_use_id", default=None
)


def current_tool_use_id() -> str | None:
    """Return the tool use ID of the `tools/call` a shim runs in, or `None` when the CLI named none."""
    return _tool_use_id.get()


def create_shim_server(name: str, tools: Sequence[SdkMcpTool[Any]]) -> McpSdkServerConfig:
    """Return the SDK MCP server of ``tools``, whose handlers can read `current_tool_use_id()`.

    Args:
        name: The server's name (the CLI calls its tools `mcp__<name>__<tool>`).
        tools: The shims.

    Returns:
        The server's configuration, for `ClaudeAgentOptions.mcp_servers`.

    Raises:
        RuntimeError: If the SDK's server has no `tools/call` handler to wrap (an SDK this package does
            not support).
    """
    config = create_sdk_mcp_server(name, tools=list(tools))
    server = config["instance"]
    entry = server.get_request_handler("tools/call")
    if entry is None:
        raise RuntimeError("the Claude Agent SDK's MCP server has no tools/call handler to wrap")
    call_tool = entry.handler

    async def call_tool_with_id(context: Any, params: Any) -> Any:
        meta = cast(dict[str, Any], getattr(params, "meta", None) or {})
        tool_use_id = meta.get(TOOL_USE_ID_META_KEY)
        token = _tool_use_id.set(tool_use_id if isinstance(tool_use_id, str) else None)
        try:
            return await call_tool(context, params)
        finally:
            _tool_use_id.reset(token)

    server.add_request_handler("tools/call", entry.params_type, call_tool_with_id)
    return config


async def listed_tools(config: McpSdkServerConfig) -> tuple[ModelToolDescription, ...]:
    """Return the tools the server lists to the CLI (its `tools/list`): names, descriptions and schemas.

    The SDK builds each tool's JSON schema when it creates the server, so this is what the model is offered
    for the runner's tools, under the names the session knows them by (the CLI adds its `mcp__` prefix).
    """
    entry = config["instance"].get_request_handler("tools/list")
    if entry is None:
        return ()
    # The SDK's handler answers from its list alone; it reads neither the request context nor the params.
    listed = await entry.handler(cast(Any, None), None)
    return tuple(
        ModelToolDescription(
            name=tool.name,
            description=tool.description or None,
            parameters=json.dumps(tool.input_schema, ensure_ascii=False, separators=(",", ":")),
        )
        for tool in getattr(listed, "tools", ())
    )
