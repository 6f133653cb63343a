"""The MCP servers a Worker connects to: stdio commands and Streamable HTTP endpoints.

These configurations are code on the Worker. A session never names a command, a URL or a header: the tool
source reference a tool call carries holds only a server's name, which the Worker looks up in its own
configuration, so no Flow input, user message or browser request can make a Worker start a process or
call an address.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from dex_agents.mcp._roots import McpRoot, check_roots
from dex_agents.runner import ToolPolicy

__all__ = ["McpHttpServer", "McpServer", "McpStdioServer", "validate_servers"]

_SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _check_common(kind: str, name: str, tool_policies: Mapping[str, ToolPolicy]) -> Mapping[str, ToolPolicy]:
    if not isinstance(name, str) or not _SERVER_NAME.match(name):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(
            f"{kind} name {name!r} must be 1 to 64 letters, digits, '_' or '-', because it starts the name "
            "of every tool the model sees"
        )
    for tool_name, policy in tool_policies.items():
        if not isinstance(policy, ToolPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"the policy of tool {tool_name!r} of MCP server {name!r} must be a ToolPolicy, "
                f"got {type(policy).__name__}"
            )
    # A caller's dict could change after the source is built; every Step must see one set of policies.
    return MappingProxyType(dict(tool_policies))


@dataclass(frozen=True)
class McpStdioServer:
    """An MCP server the Worker starts as a subprocess and talks to over stdin and stdout.

    Every listing and every tool call starts the command afresh and ends it afterwards, so a server that
    crashed or was replaced between two calls costs nothing.

    Attributes:
        name: The server's name; its tools reach the model as ``<name>__<tool>``.
        command: The program to run.
        args: Its arguments.
        env: Environment variables set on top of the MCP SDK's default environment (which passes only a
            few safe variables such as ``PATH`` and ``HOME``).
        cwd: The working directory; `None` keeps the Worker's.
        tool_policies: Policies by the server's own tool names (without the ``<name>__`` prefix). They win
            over the tools' annotations; the session's own ``tool_policies`` win over them.
        trust_annotations: Whether the tools' annotations decide their policies
            (`dex_agents.policy_from_mcp_annotations`: ``readOnlyHint`` makes a `read`, ``idempotentHint`` an
            `idempotent_write`, and a destructive tool still asks for approval). Off by default: a server
            can claim anything, so unless you trust this one, its tools take the session's
            ``default_tool_effect`` (``unclassified``: each call asks for approval) unless a policy names
            them.
        roots: The directories the server may work in, answered to its ``roots/list``: `McpRoot` values,
            ``file://`` URIs or paths. With none, the roots capability is not declared to this server.
    """

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | Path | None = None
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict[str, ToolPolicy])
    trust_annotations: bool = False
    roots: Sequence[McpRoot | str | Path] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_policies", _check_common("MCP server", self.name, self.tool_policies))
        object.__setattr__(self, "roots", check_roots(self.name, self.roots))
        if not self.command:
            raise ValueError(f"MCP server {self.name!r} needs a command to run")
        if isinstance(self.args, str):
            raise TypeError(
                f"the args of MCP server {self.name!r} must be a sequence of strings, not a string"
            )
        object.__setattr__(self, "args", tuple(self.args))
        if self.env is not None:
            object.__setattr__(self, "env", MappingProxyType(dict(self.env)))


@dataclass(frozen=True)
class McpHttpServer:
    """An MCP server the Worker reaches over Streamable HTTP.

    Every listing and every tool call opens its own connection (and HTTP protocol session, which the MCP
    SDK ends with a ``DELETE``), so a server restart between two calls costs nothing.

    Attributes:
        name: The server's name; its tools reach the model as ``<name>__<tool>``.
        url: The MCP endpoint, ``http://`` or ``https://``.
        headers: HTTP headers for every request, such as ``Authorization``.
        tool_policies: Policies by the server's own tool names (without the ``<name>__`` prefix). They win
            over the tools' annotations; the session's own ``tool_policies`` win over them.
        trust_annotations: Whether the tools' annotations decide their policies, as for
            `McpStdioServer`. Off by default; turn it on only for a server you operate or otherwise trust,
            since whoever answers at the URL decides what the annotations say.
        roots: The directories the server may work in, answered to its ``roots/list``: `McpRoot` values,
            ``file://`` URIs or paths. With none, the roots capability is not declared to this server.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict[str, ToolPolicy])
    trust_annotations: bool = False
    roots: Sequence[McpRoot | str | Path] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_policies", _check_common("MCP server", self.name, self.tool_policies))
        object.__setattr__(self, "roots", check_roots(self.name, self.roots))
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"MCP server {self.name!r} needs an http:// or https:// URL, got {self.url!r}")
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))


#: One MCP server configuration.
McpServer = McpStdioServer | McpHttpServer


def validate_servers(servers: Sequence[McpServer]) -> dict[str, McpServer]:
    """Return the servers by name, refusing anything but server configurations and repeated names."""
    by_name: dict[str, McpServer] = {}
    for server in servers:
        if not isinstance(server, McpStdioServer | McpHttpServer):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"an MCP server must be McpStdioServer or McpHttpServer, got {type(server).__name__}"
            )
        if server.name in by_name:
            raise ValueError(f"two MCP servers are named {server.name!r}; each needs its own name")
        by_name[server.name] = server
    return by_name
