"""Listing a server's tools and turning every server's listing into one set of agent tool definitions."""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import anyio
from mcp.client.session import ClientSession
from mcp.types import PaginatedRequestParams, Tool

from dex_agents._tools._mcp_hints import policy_from_mcp_annotations
from dex_agents.mcp._connection import run_on_new_connection
from dex_agents.mcp._definitions import McpToolDefinition, agent_tool_name, is_model_tool_name
from dex_agents.mcp._servers import McpServer

__all__ = [
    "ServerListing",
    "ToolOmission",
    "build_definitions",
    "list_server_tools",
    "warn_about_omissions",
]

_logger = logging.getLogger("dex_agents.mcp")
_MAX_PAGES = 100


@dataclass(frozen=True)
class ServerListing:
    """The tools one server listed, as it listed them."""

    server: McpServer
    tools: tuple[Tool, ...]


@dataclass(frozen=True)
class ToolOmission:
    """A listed tool left out of the definitions, and why."""

    server_name: str
    mcp_name: str
    reason: str


async def list_server_tools(server: McpServer, handshake_timeout: float) -> ServerListing:
    """List every tool of ``server`` on a new connection.

    Args:
        server: The server.
        handshake_timeout: Seconds for the handshake, and again for the listing itself.

    Returns:
        The server's tools, every page of them.

    Raises:
        Exception: Whatever made the listing fail; the caller leaves the server out.
    """

    async def work(session: ClientSession) -> tuple[Tool, ...]:
        tools: list[Tool] = []
        cursor: str | None = None
        with anyio.fail_after(handshake_timeout):
            for _ in range(_MAX_PAGES):
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    return tuple(tools)
        raise RuntimeError(f"the server listed more than {_MAX_PAGES} pages of tools")

    return ServerListing(server, await run_on_new_connection(server, handshake_timeout, work))


def _definition(server: McpServer, tool: Tool) -> McpToolDefinition:
    policy = policy_from_mcp_annotations(tool.annotations) if server.trust_annotations else None
    return McpToolDefinition(
        name=agent_tool_name(server.name, tool.name),
        description=tool.description or tool.title or "",
        # A framework may change the schema it is given; the cached listing must stay as the server sent it.
        input_schema=copy.deepcopy(tool.input_schema),
        server_name=server.name,
        mcp_name=tool.name,
        effect=None if policy is None else policy.effect,
        title=tool.title,
        task_support=None if tool.execution is None else tool.execution.task_support,
        annotation_policy=policy,
    )


def build_definitions(
    listings: Iterable[ServerListing],
) -> tuple[dict[str, McpToolDefinition], list[ToolOmission]]:
    """Return the agent tool definitions of ``listings`` by name, in order, and the tools left out.

    A tool is left out when its name is not one models accept, or when an earlier tool (of an earlier
    server, or earlier in the same listing) already has its name.
    """
    definitions: dict[str, McpToolDefinition] = {}
    omissions: list[ToolOmission] = []
    for listing in listings:
        for tool in listing.tools:
            definition = _definition(listing.server, tool)
            earlier = definitions.get(definition.name)
            if earlier is not None:
                reason = (
                    f"its name {definition.name!r} is already the name of tool {earlier.mcp_name!r} of MCP "
                    f"server {earlier.server_name!r}"
                )
            elif not is_model_tool_name(definition.name):
                reason = (
                    f"its name {definition.name!r} is not 1 to 64 letters, digits, '_' or '-', which model "
                    "APIs require"
                )
            else:
                definitions[definition.name] = definition
                continue
            omissions.append(ToolOmission(listing.server.name, tool.name, reason))
    return definitions, omissions


def warn_about_omissions(omissions: Sequence[ToolOmission], already_warned: set[ToolOmission]) -> None:
    """Log a warning for each omission not warned about before, and remember it."""
    for omission in omissions:
        if omission not in already_warned:
            already_warned.add(omission)
            _logger.warning(
                "MCP tool %r of server %r is left out: %s",
                omission.mcp_name,
                omission.server_name,
                omission.reason,
            )
