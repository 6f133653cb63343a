"""Tools of a stdio MCP server, offered through the runner instead of the CLI's own MCP client.

A server listed in `ClaudeAgentOptions.mcp_servers` is run by the CLI, so each of its tool calls would
run inside `RunModel`, at least once. Handing the server to the runner as an `McpStdioServer` instead
makes its tools ordinary runner tools: the runner lists them (`tools/list`) for each run, their MCP
annotations give their effects, and a deferred call sends its one `tools/call` from its own tool Step.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from claude_agent_sdk import SdkMcpTool
from mcp import StdioServerParameters
from mcp.client.client import Client

__all__ = ["McpStdioServer"]


@dataclass(frozen=True)
class McpStdioServer:
    """A stdio MCP server whose tools the runner offers to the model.

    Each listing and each call starts the server, speaks MCP over its stdin and stdout, and stops it,
    so no connection outlives a Step.

    Attributes:
        command: The executable that starts the server.
        args: Its arguments.
        env: Its environment (the MCP SDK's default environment when `None`).
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None)

    def _parameters(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=self.command, args=list(self.args), env=dict(self.env) if self.env is not None else None
        )

    async def list_tools(self) -> list[SdkMcpTool[Any]]:
        """Ask the server for its tools (`tools/list`).

        Returns:
            One SDK tool per server tool, with its schema and annotations; calling its handler sends
            `tools/call`.
        """
        async with Client(self._parameters()) as client:
            listed = await client.list_tools()
        return [
            SdkMcpTool(
                name=tool.name,
                description=tool.description or "",
                input_schema=dict(tool.input_schema),
                handler=functools.partial(self.call_tool, tool.name),
                annotations=tool.annotations,
            )
            for tool in listed.tools
        ]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call one tool (`tools/call`) and return its result in the SDK's tool result shape.

        Args:
            name: The tool.
            arguments: Its arguments.

        Returns:
            `{"content": [...], "is_error": ...}` with the result's text blocks.
        """
        async with Client(self._parameters()) as client:
            result = await client.call_tool(name, arguments)
        texts = [
            str(getattr(block, "text", ""))
            for block in result.content
            if getattr(block, "type", "") == "text"
        ]
        return {"content": [{"type": "text", "text": "\n".join(texts)}], "is_error": bool(result.is_error)}
