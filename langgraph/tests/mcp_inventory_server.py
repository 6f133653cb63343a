"""A stdio MCP server (mcp 1.x, as langchain-mcp-adapters pins it) whose tools carry effect annotations.

Run as a subprocess by `test_mcp.py`. It appends one line per request it serves to the file named by
`MCP_TEST_LOG`: `tools/list`, or `tools/call <tool>`.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import Tool, ToolAnnotations


def _log(line: str) -> None:
    with Path(os.environ["MCP_TEST_LOG"]).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


class LoggingServer(FastMCP):
    async def list_tools(self) -> list[Tool]:
        _log("tools/list")
        return await super().list_tools()


server = LoggingServer("inventory")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def count_items(sku: str) -> str:
    """Count the items of a SKU in stock."""
    _log("tools/call count_items")
    return f"{sku}: 7 in stock"


@server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=True))
def set_stock(sku: str, count: int) -> str:
    """Set the stock of a SKU."""
    _log("tools/call set_stock")
    return f"{sku} set to {count}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False))
def order_more(sku: str) -> str:
    """Order more of a SKU from the supplier."""
    _log("tools/call order_more")
    return f"ordered {sku}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def audit_stock(sku: str) -> str:
    """Audit the stock of a SKU (the auditor is away)."""
    _log("tools/call audit_stock")
    raise ValueError(f"no auditor available for {sku}")


if __name__ == "__main__":
    server.run("stdio")
