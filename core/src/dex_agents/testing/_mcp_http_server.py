"""The test kit's MCP inventory server on Streamable HTTP: a subprocess on loopback that tests can kill."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Self

from dex_agents.testing._server import _LAUNCHER  # pyright: ignore[reportPrivateUsage]
from dex_agents.testing.mcp_inventory_server import MCP_INVENTORY_SERVER_MODULE, server_environment

__all__ = [
    "LoopbackServerProcess",
    "McpInventoryHttpServer",
    "spawn_server_process",
    "start_mcp_inventory_http_server",
]

_STARTUP_TIMEOUT_SECONDS = 60.0
_POLL_SECONDS = 0.05


class LoopbackServerProcess:
    """A server subprocess on loopback, in its own process group, that a test stops or kills.

    Use it as an async context manager, or call :meth:`stop`.

    Args:
        process: The server process.
        url: The endpoint, ``http://127.0.0.1:<port>/mcp``.
        output_path: Where the server's stdout and stderr go.
    """

    def __init__(self, process: subprocess.Popen[bytes], url: str, output_path: Path) -> None:
        self._process = process
        self._url = url
        self._output_path = output_path

    @property
    def url(self) -> str:
        """The Streamable HTTP endpoint."""
        return self._url

    @property
    def port(self) -> int:
        """The TCP port; start another server on it to stand for a restart."""
        return int(self._url.rsplit(":", 1)[1].split("/", 1)[0])

    @property
    def is_running(self) -> bool:
        """Whether the server process is alive."""
        return self._process.poll() is None

    def read_output(self) -> str:
        """Return what the server printed so far."""
        return self._output_path.read_text(encoding="utf-8", errors="replace")

    def kill(self) -> None:
        """SIGKILL the server's process group and wait until the server is gone."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to shut down with SIGTERM; SIGKILL it when it does not exit within ``timeout``."""
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self._process.pid, signal.SIGTERM)
                self._process.wait(timeout=timeout)
        self.kill()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


class McpInventoryHttpServer(LoopbackServerProcess):
    """A running inventory server (`dex_agents.testing.mcp_inventory_server`) on Streamable HTTP.

    It runs in its own process group and, on Linux, dies with the thread that started it, so a killed
    test run leaves no server behind. A tool such as ``restock_and_crash`` ends its process
    (`is_running`). Use it as an async context manager, or call :meth:`stop`.
    """


def spawn_server_process(
    command: list[str], environment: dict[str, str], output_path: Path
) -> subprocess.Popen[bytes]:
    """Start a server in its own process group, its stdout and stderr going to ``output_path``."""
    with output_path.open("wb") as output:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            start_new_session=True,
        )


async def start_mcp_inventory_http_server(
    log: Path, *, port: int = 0, tool_prefix: str = "", fail_listing: bool = False
) -> McpInventoryHttpServer:
    """Start the inventory server on Streamable HTTP on 127.0.0.1 and wait until it serves.

    Args:
        log: The request log the server appends to; its stdout and stderr go next to it
            (``<log>.http-<port>.out``).
        port: The port; 0 picks a free one. Pass a stopped server's port to restart it there.
        tool_prefix: A prefix for every tool name the server offers.
        fail_listing: Whether ``tools/list`` answers a JSON-RPC error.

    Returns:
        The running server.

    Raises:
        RuntimeError: If the server exits or does not serve within a minute.
    """
    ready_file = log.with_name(f"{log.name}.http-{time.monotonic_ns()}.url")
    output_path = ready_file.with_suffix(".out")
    environment = {
        **os.environ,
        **server_environment(log, tool_prefix=tool_prefix, fail_listing=fail_listing),
    }
    command = [
        sys.executable,
        "-c",
        _LAUNCHER,
        "-m",
        MCP_INVENTORY_SERVER_MODULE,
        "--http",
        "--port",
        str(port),
        "--ready-file",
        str(ready_file),
    ]
    process = spawn_server_process(command, environment, output_path)
    deadline = time.monotonic() + _STARTUP_TIMEOUT_SECONDS
    while not ready_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            server = McpInventoryHttpServer(process, "", output_path)
            server.kill()
            raise RuntimeError(f"the MCP inventory HTTP server did not start:\n{server.read_output()}")
        await asyncio.sleep(_POLL_SECONDS)
    return McpInventoryHttpServer(process, ready_file.read_text(encoding="utf-8"), output_path)
