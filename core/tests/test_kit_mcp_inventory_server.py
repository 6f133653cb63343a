"""The test kit's MCP inventory server, run as the adapters run it: a stdio subprocess of an MCP client."""

import asyncio
import os
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, TextContent

from dex_agents import ToolEffect, effect_from_mcp_annotations
from dex_agents.testing import MCP_INVENTORY_SERVER_MODULE, MCP_TEST_LOG_ENV, mcp_inventory_server_command

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _text(result: object) -> tuple[bool, str]:
    assert isinstance(result, CallToolResult), result
    [content] = result.content
    assert isinstance(content, TextContent), content
    return result.is_error, content.text


async def test_the_server_offers_annotated_tools_and_logs_every_request(tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    command = mcp_inventory_server_command(log)
    assert (
        command.args
        == ["-m", MCP_INVENTORY_SERVER_MODULE]
        == ["-m", "dex_agents.testing.mcp_inventory_server"]
    )
    assert command.env == {MCP_TEST_LOG_ENV: str(log)}
    params = StdioServerParameters(command=command.command, args=command.args, env=command.env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        assert {tool.name: effect_from_mcp_annotations(tool.annotations) for tool in tools} == {
            "count_items": ToolEffect.READ,
            "set_stock": ToolEffect.IDEMPOTENT_WRITE,
            "order_more": None,
            "audit_stock": ToolEffect.READ,
            "restock_and_crash": None,
            "reserve_stock": ToolEffect.IDEMPOTENT_WRITE,
            "place_order": None,
            "count_in_warehouse": ToolEffect.READ,
            "confirm_order": None,
            "ship_order": ToolEffect.IDEMPOTENT_WRITE,
            "ship_with_carrier": ToolEffect.IDEMPOTENT_WRITE,
            "answer_badly": ToolEffect.READ,
        }
        assert _text(await session.call_tool("count_items", {"sku": "A-1"})) == (False, "A-1: 7 in stock")
        assert _text(await session.call_tool("set_stock", {"sku": "A-1", "count": 9})) == (
            False,
            "A-1 set to 9",
        )
        assert _text(await session.call_tool("order_more", {"sku": "A-1"})) == (False, "ordered A-1")
        failed, text = _text(await session.call_tool("audit_stock", {"sku": "A-1"}))
        assert failed and "no auditor available for A-1" in text
        # The server process dies inside the call: the client sees its connection close, not an answer.
        with pytest.raises(Exception, match="Connection closed"):
            await session.call_tool("restock_and_crash", {"sku": "A-1"})
    assert log.read_text().splitlines() == [
        "tools/list",
        "tools/call count_items",
        "tools/call set_stock",
        "tools/call order_more",
        "tools/call audit_stock",
        "tools/call restock_and_crash A-1",
    ]


async def test_the_server_refuses_to_start_without_its_log(tmp_path: Path) -> None:
    command = mcp_inventory_server_command(tmp_path / "unused.log")
    environment = {name: value for name, value in os.environ.items() if name not in command.env}
    process = await asyncio.create_subprocess_exec(
        command.command,
        *command.args,
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=environment,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 1
    assert b"MCP_TEST_LOG must name the request log" in stderr
