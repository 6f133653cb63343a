"""The official MCP reference servers from npm, for tests: where they are installed, and how to start them.

The core's ``tests/mcp_servers`` pins ``@modelcontextprotocol/server-everything`` and
``@modelcontextprotocol/server-memory`` in an npm lockfile; ``npm ci`` there installs them (every package's
``ci.sh`` does it through ``scripts/lib/official-mcp-servers.sh``). Tests of the core and of every adapter
start them from that ``node_modules/.bin``: on stdio with `official_mcp_server_command`, optionally behind
a tap that logs every JSON-RPC message, and server-everything on Streamable HTTP with
`start_official_mcp_http_server`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from dex_agents.testing._mcp_http_server import LoopbackServerProcess, spawn_server_process
from dex_agents.testing.mcp_inventory_server import McpStdioCommand

__all__ = [
    "OFFICIAL_MCP_SERVERS_ENV",
    "McpWireMessage",
    "OfficialMcpHttpServer",
    "OfficialMcpServerName",
    "official_mcp_server_command",
    "official_mcp_server_version",
    "official_mcp_servers_dir",
    "read_mcp_wire_log",
    "start_official_mcp_http_server",
]

OFFICIAL_MCP_SERVERS_ENV = "DEX_AGENTS_OFFICIAL_MCP_SERVERS"
"""The environment variable naming the npm project that installs the official servers (its directory)."""

#: An official server the kit starts: ``server-everything`` or ``server-memory``.
OfficialMcpServerName = Literal["server-everything", "server-memory"]

_WIRE_TAP_MODULE = "dex_agents.testing._mcp_wire_tap"
_STARTUP_TIMEOUT_SECONDS = 60.0
_POLL_SECONDS = 0.05
# Like the devserver's launcher: ask Linux to SIGKILL the server when the thread that started it dies, then
# exec it, so a test run killed without cleanup leaves no server holding its port.
_NODE_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "if sys.platform == 'linux':\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def official_mcp_servers_dir() -> Path:
    """Return the npm project whose ``node_modules`` holds the official servers.

    It is ``$DEX_AGENTS_OFFICIAL_MCP_SERVERS`` when set, else the core's ``tests/mcp_servers`` of the
    source checkout this kit runs from.

    Raises:
        FileNotFoundError: If neither exists.
    """
    configured = os.environ.get(OFFICIAL_MCP_SERVERS_ENV)
    if configured:
        return Path(configured)
    # core/src/dex_agents/testing/<this file>: the core is three levels up.
    project = Path(__file__).resolve().parents[3] / "tests" / "mcp_servers"
    if not project.is_dir():
        raise FileNotFoundError(
            f"the official MCP servers' npm project is not at {project}; set {OFFICIAL_MCP_SERVERS_ENV} to "
            "the directory of a package.json that depends on @modelcontextprotocol/server-everything and "
            "server-memory (such as dex-agents' core/tests/mcp_servers), and run `npm ci` there"
        )
    return project


def _binary(name: OfficialMcpServerName) -> Path:
    project = official_mcp_servers_dir()
    binary = project / "node_modules" / ".bin" / f"mcp-{name}"
    if not binary.exists():
        raise FileNotFoundError(
            f"the official MCP server {name!r} is not installed at {binary}; run `npm ci` in {project} "
            "(ci.sh does it through scripts/lib/official-mcp-servers.sh)"
        )
    return binary


def _package_version(name: OfficialMcpServerName) -> str:
    manifest = official_mcp_servers_dir() / "node_modules" / "@modelcontextprotocol" / name / "package.json"
    value: Any = json.loads(manifest.read_text(encoding="utf-8"))
    return str(cast(dict[str, Any], value).get("version", "unknown"))


def official_mcp_server_command(
    name: OfficialMcpServerName,
    *,
    env: Mapping[str, str] | None = None,
    wire_log: Path | None = None,
) -> McpStdioCommand:
    """Return the command that runs an official server on stdio.

    Args:
        name: ``server-everything`` (run with its ``stdio`` argument) or ``server-memory`` (give it
            ``MEMORY_FILE_PATH`` in ``env``, or it writes next to its own code).
        env: Environment variables for the server on top of what the MCP client passes by default.
        wire_log: When given, the server runs behind a tap (this interpreter) that appends every JSON-RPC
            message each way to this file; read it with `read_mcp_wire_log`.

    Returns:
        The command, its arguments and its environment.

    Raises:
        FileNotFoundError: If the servers are not installed (the message says where to run ``npm ci``).
    """
    binary = str(_binary(name))
    args = ["stdio"] if name == "server-everything" else []
    environment = dict(env or {})
    if wire_log is None:
        return McpStdioCommand(binary, args, environment)
    tapped = ["-m", _WIRE_TAP_MODULE, str(wire_log), binary, *args]
    return McpStdioCommand(sys.executable, tapped, environment)


@dataclass(frozen=True)
class McpWireMessage:
    """One JSON-RPC message a tapped stdio server (`official_mcp_server_command`) sent or received.

    Attributes:
        connection: Which connection (one server process) carried it; request IDs repeat across them.
        direction: ``client`` for what the client sent, ``server`` for what the server sent.
        message: The message as JSON (a line that was not JSON is kept as its text).
    """

    connection: int
    direction: Literal["client", "server"]
    message: Any

    def _field(self, name: str) -> object:
        message: object = self.message
        return cast(dict[str, object], message).get(name) if isinstance(message, dict) else None

    @property
    def method(self) -> str | None:
        """The request's or notification's method; `None` for a response."""
        method: object = self._field("method")
        return method if isinstance(method, str) else None

    @property
    def params(self) -> dict[str, Any]:
        """The request's params, or an empty object."""
        params: object = self._field("params")
        return cast(dict[str, Any], params) if isinstance(params, dict) else {}

    def answers(self, request: McpWireMessage) -> bool:
        """Whether this message is the response to ``request`` (same connection, same request ID)."""
        return (
            self.direction == "server"
            and self.method is None
            and self.connection == request.connection
            and self._field("id") == request._field("id")
        )

    @property
    def result(self) -> dict[str, Any] | None:
        """The response's result; `None` for a request, a notification or an error."""
        result: object = self._field("result")
        return cast(dict[str, Any], result) if isinstance(result, dict) else None


def read_mcp_wire_log(path: Path) -> list[McpWireMessage]:
    """Return every message of a tapped server's wire log, in order; none when there is no log yet."""
    if not path.exists():
        return []
    messages: list[McpWireMessage] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        entry: Any = json.loads(line)
        messages.append(McpWireMessage(entry["connection"], entry["direction"], entry["message"]))
    return messages


class OfficialMcpHttpServer(LoopbackServerProcess):
    """server-everything on Streamable HTTP, a subprocess on a free port that dies with its test process.

    Use it as an async context manager, or call :meth:`stop`.

    Args:
        process: The server process.
        url: The endpoint, ``http://127.0.0.1:<port>/mcp``.
        output_path: Where the server's stdout and stderr go.
        version: The npm package's version.
    """

    def __init__(self, process: subprocess.Popen[bytes], url: str, output_path: Path, version: str) -> None:
        super().__init__(process, url, output_path)
        self._version = version

    @property
    def version(self) -> str:
        """The npm package's version, such as ``2026.8.31``."""
        return self._version


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


async def start_official_mcp_http_server(output_dir: Path) -> OfficialMcpHttpServer:
    """Start server-everything on Streamable HTTP on a free port and wait until it accepts connections.

    The server keeps a protocol session per connection (``Mcp-Session-Id``), and its tasks with it.

    Args:
        output_dir: Where its output goes (``server-everything-http-<port>.out``).

    Returns:
        The running server; stop it (or leave its ``async with``) at teardown.

    Raises:
        FileNotFoundError: If the servers are not installed.
        RuntimeError: If the server exits or does not listen within a minute.
    """
    binary = _binary("server-everything")
    port = _free_port()
    output_path = output_dir / f"server-everything-http-{port}.out"
    process = spawn_server_process(
        [sys.executable, "-c", _NODE_LAUNCHER, str(binary), "streamableHttp"],
        {**os.environ, "PORT": str(port)},
        output_path,
    )
    server = OfficialMcpHttpServer(
        process, f"http://127.0.0.1:{port}/mcp", output_path, _package_version("server-everything")
    )
    deadline = time.monotonic() + _STARTUP_TIMEOUT_SECONDS
    while not await asyncio.to_thread(_accepts, port):
        if process.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"server-everything did not start on port {port}:\n{server.read_output()}")
        await asyncio.sleep(_POLL_SECONDS)
    return server


def official_mcp_server_version(name: OfficialMcpServerName) -> str:
    """Return the installed npm version of an official server, such as ``2026.8.31``."""
    return _package_version(name)
