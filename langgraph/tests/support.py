"""What several test modules share: short ways to write scripted answers, and the MCP test client."""

from __future__ import annotations

from pathlib import Path

from dex_agents.testing import mcp_inventory_server_command
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.messages.ai import UsageMetadata
from langchain_mcp_adapters.client import MultiServerMCPClient


def tool_call(name: str, arguments: dict[str, object], tool_call_id: str) -> ToolCall:
    """A tool call of a scripted answer."""
    return ToolCall(name=name, args=arguments, id=tool_call_id, type="tool_call")


def respond(text: str = "", *calls: ToolCall, input_tokens: int = 10, output_tokens: int = 5) -> AIMessage:
    """A scripted answer with its text, its tool calls and the usage it reports."""
    return AIMessage(
        content=text,
        tool_calls=list(calls),
        usage_metadata=UsageMetadata(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        ),
    )


def inventory_client(log: Path) -> MultiServerMCPClient:
    """A client of the kit's MCP inventory server, which logs every request it serves to ``log``."""
    server = mcp_inventory_server_command(log)
    connection = {"transport": "stdio", "command": server.command, "args": server.args, "env": server.env}
    return MultiServerMCPClient({"inventory": connection})  # pyright: ignore[reportArgumentType]
