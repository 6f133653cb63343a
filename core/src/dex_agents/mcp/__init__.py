"""MCP servers as a tool source: their tools offered to the model, each call run in its own tool Step.

`McpToolSource` takes stdio (`McpStdioServer`) and Streamable HTTP (`McpHttpServer`) server
configurations, built in code on the Worker; a session never configures a server. It lists each server's
tools as agent tool definitions named ``<server>__<tool>``, turns a model's call into a `DeferredToolCall`
whose policy comes from the tool's MCP annotations unless a `ToolPolicy` names it, and runs the call in the
tool Step on a new connection with the session's idempotency key in ``_meta``. An elicitation the server
sends during the call becomes a durable session question, and the call runs again with the answer; a
server's roots come from its configuration (`McpRoot`); sampling is refused. A tool that answers with an
MCP task (the ``io.modelcontextprotocol/tasks`` extension) is polled in the session's own Steps, where its
questions reach the user, or inside the tool Step when only its own connection can reach it; the source is
the `ToolTaskPoller` and `ToolTaskCanceller` a runner passes those calls to. It needs the ``mcp`` extra:
``pip install "dex-agents[mcp]"`` (the official MCP SDK, ``mcp`` 2.3 or a later 2.x).
"""

# First: raises the ImportError that names the install command when mcp 2.3+ is missing.
from dex_agents.mcp import _sdk_check  # noqa: F401  # pyright: ignore[reportUnusedImport]
from dex_agents.mcp._calling import IDEMPOTENCY_KEY_META_KEY, McpToolCallInterruptedError
from dex_agents.mcp._definitions import McpToolDefinition
from dex_agents.mcp._render import render_tool_result
from dex_agents.mcp._roots import McpRoot
from dex_agents.mcp._servers import McpHttpServer, McpServer, McpStdioServer
from dex_agents.mcp._source import DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_TASK_WAIT_TIMEOUT, McpToolSource
from dex_agents.mcp._task_polling import TASK_STATUS_EVENT
from dex_agents.mcp._task_wire import TASKS_EXTENSION, McpToolTaskError

__all__ = [
    "DEFAULT_HANDSHAKE_TIMEOUT",
    "DEFAULT_TASK_WAIT_TIMEOUT",
    "IDEMPOTENCY_KEY_META_KEY",
    "TASKS_EXTENSION",
    "TASK_STATUS_EVENT",
    "McpHttpServer",
    "McpRoot",
    "McpServer",
    "McpStdioServer",
    "McpToolCallInterruptedError",
    "McpToolDefinition",
    "McpToolSource",
    "McpToolTaskError",
    "render_tool_result",
]
