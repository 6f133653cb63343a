"""A stdio MCP server whose tools carry effect annotations and log every request they serve.

Run it as a subprocess of an MCP client: ``python -m dex_agents.testing.mcp_inventory_server``, with the
log file in the ``MCP_TEST_LOG`` environment variable; `mcp_inventory_server_command` builds that command.
Each line of the log is one request: ``tools/list``, ``tools/call <tool>``, or for ``restock_and_crash``
``tools/call restock_and_crash <sku>``. Its tools:

- ``count_items(sku)``: ``readOnlyHint``, so a ``read``; answers ``"<sku>: 7 in stock"``.
- ``set_stock(sku, count)``: ``idempotentHint`` and ``destructiveHint``, so an ``idempotent_write``;
  answers ``"<sku> set to <count>"``.
- ``order_more(sku)``: no hint that classifies it (``readOnlyHint`` false); answers ``"ordered <sku>"``.
- ``audit_stock(sku)``: ``readOnlyHint``; always fails with ``no auditor available for <sku>``.
- ``restock_and_crash(sku)``: ``readOnlyHint`` false; the server process dies before it answers.

It runs with mcp 1.x (``FastMCP``) and 2.x (``MCPServer``), and imports mcp only when it runs, so
importing this module (or ``dex_agents.testing``) never loads mcp.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import Tool

__all__ = [
    "MCP_INVENTORY_SERVER_MODULE",
    "MCP_TEST_LOG_ENV",
    "McpStdioCommand",
    "main",
    "mcp_inventory_server_command",
]

MCP_INVENTORY_SERVER_MODULE = "dex_agents.testing.mcp_inventory_server"
"""The module to run with ``python -m``."""
MCP_TEST_LOG_ENV = "MCP_TEST_LOG"
"""The environment variable naming the server's request log."""


@dataclass(frozen=True)
class McpStdioCommand:
    """How an MCP client starts a stdio server, in the shape every framework's stdio options take.

    Attributes:
        command: The program.
        args: Its arguments.
        env: Environment variables the server needs on top of what the client passes by default.
    """

    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict[str, str])


def mcp_inventory_server_command(log: Path) -> McpStdioCommand:
    """Return the command that runs the inventory server with this interpreter, logging to ``log``.

    Args:
        log: The request log the server appends to.

    Returns:
        The command, its arguments and its environment.
    """
    return McpStdioCommand(sys.executable, ["-m", MCP_INVENTORY_SERVER_MODULE], {MCP_TEST_LOG_ENV: str(log)})


def _log(line: str) -> None:
    with Path(os.environ[MCP_TEST_LOG_ENV]).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def _server_class() -> type[MCPServer]:
    try:
        from mcp.server.mcpserver import MCPServer  # noqa: PLC0415 - mcp loads only when the server runs
    except ImportError:  # mcp 1.x, which langchain-mcp-adapters pins
        # mcp 2.x keeps only a stub module there, which pyright sees in this package's environment. FastMCP
        # has every method this server uses, under the same names.
        from mcp.server.fastmcp import FastMCP  # noqa: PLC0415  # pyright: ignore

        return cast("type[MCPServer]", FastMCP)
    return MCPServer


def _build_server() -> MCPServer:
    """Return the inventory server, built with the installed mcp release's high-level server class."""
    from mcp.types import ToolAnnotations  # noqa: PLC0415 - mcp loads only when the server runs

    base = _server_class()

    class LoggingServer(base):
        async def list_tools(self) -> list[Tool]:
            _log("tools/list")
            return await super().list_tools()

    server = LoggingServer("inventory")

    # Validating by the wire's camelCase names works in mcp 1.x and 2.x alike.
    def hints(**values: bool) -> ToolAnnotations:
        return ToolAnnotations.model_validate(values)

    @server.tool(annotations=hints(readOnlyHint=True))
    def count_items(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Count the items of a SKU in stock."""
        _log("tools/call count_items")
        return f"{sku}: 7 in stock"

    @server.tool(annotations=hints(idempotentHint=True, destructiveHint=True))
    def set_stock(sku: str, count: int) -> str:  # pyright: ignore[reportUnusedFunction]
        """Set the stock of a SKU."""
        _log("tools/call set_stock")
        return f"{sku} set to {count}"

    @server.tool(annotations=hints(readOnlyHint=False))
    def order_more(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Order more of a SKU from the supplier."""
        _log("tools/call order_more")
        return f"ordered {sku}"

    @server.tool(annotations=hints(readOnlyHint=True))
    def audit_stock(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Audit the stock of a SKU (the auditor is away)."""
        _log("tools/call audit_stock")
        raise ValueError(f"no auditor available for {sku}")

    @server.tool(annotations=hints(readOnlyHint=False))
    def restock_and_crash(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Restock a SKU; the server dies before it answers."""
        _log(f"tools/call restock_and_crash {sku}")
        os._exit(1)

    return server


def main() -> None:
    """Serve the inventory tools on stdio until the client closes the connection."""
    if not os.environ.get(MCP_TEST_LOG_ENV):
        sys.exit(
            f"{MCP_TEST_LOG_ENV} must name the request log; "
            "start the server with mcp_inventory_server_command()"
        )
    _build_server().run("stdio")


if __name__ == "__main__":
    main()
