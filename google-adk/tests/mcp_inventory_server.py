"""A stdio MCP server whose tools carry effect annotations; it logs every request it serves.

Run as a subprocess by `test_mcp.py`. Each line of the file named by `MCP_TEST_LOG` is one request:
`tools/list`, or `tools/call <tool>`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import Tool, ToolAnnotations


def _log(line: str) -> None:
    with Path(os.environ["MCP_TEST_LOG"]).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


class LoggingServer(MCPServer):
    async def list_tools(self) -> list[Tool]:
        _log("tools/list")
        return await super().list_tools()


server = LoggingServer("inventory")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def count_items(sku: str) -> str:
    """Count the items of a SKU in stock."""
    _log("tools/call count_items")
    return f"{sku}: 7 in stock"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=True))
def set_stock(sku: str, count: int) -> str:
    """Set the stock of a SKU."""
    _log("tools/call set_stock")
    return f"{sku} set to {count}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False))
def order_more(sku: str) -> str:
    """Order more of a SKU from the supplier."""
    _log("tools/call order_more")
    return f"ordered {sku}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False))
def restock_and_crash(sku: str) -> str:
    """Restock a SKU; the server dies before it answers."""
    _log(f"tools/call restock_and_crash {sku}")
    os._exit(1)


if __name__ == "__main__":
    server.run("stdio")
