"""MCP servers as a tool source: their tools offered to the model, each call run in its own tool Step.

`McpToolSource` takes stdio (`McpStdioServer`) and Streamable HTTP (`McpHttpServer`) server
configurations, built in code on the Worker; a session never configures a server. It lists each server's
tools as agent tool definitions named ``<server>__<tool>``, turns a model's call into a `DeferredToolCall`
whose policy comes from the tool's MCP annotations unless a `ToolPolicy` names it, and runs the call in the
tool Step on a new connection with the session's idempotency key in ``_meta``. It needs the ``mcp`` extra:
``pip install "dex-agents[mcp]"`` (the official MCP SDK, ``mcp`` 2.3 or a later 2.x).
"""

# First: raises the ImportError that names the install command when mcp 2.3+ is missing.
from dex_agents.mcp import _sdk_check  # noqa: F401  # pyright: ignore[reportUnusedImport]
from dex_agents.mcp._calling import IDEMPOTENCY_KEY_META_KEY, McpToolCallInterruptedError
from dex_agents.mcp._definitions import McpToolDefinition
from dex_agents.mcp._render import render_tool_result
from dex_agents.mcp._servers import McpHttpServer, McpServer, McpStdioServer
from dex_agents.mcp._source import DEFAULT_HANDSHAKE_TIMEOUT, McpToolSource

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "IDEMPOTENCY_KEY_META_KEY",
    "McpHttpServer",
    "McpServer",
    "McpStdioServer",
    "McpToolCallInterruptedError",
    "McpToolDefinition",
    "McpToolSource",
    "render_tool_result",
]
