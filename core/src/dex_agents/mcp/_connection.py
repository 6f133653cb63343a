"""One short-lived MCP connection per request, with a bounded handshake.

A connection lives for one listing or one tool call. It negotiates the protocol the way the MCP SDK's
``Client`` does by default (``server/discover`` for 2026-07-28 servers, else the ``initialize``
handshake), within the handshake timeout, then runs one piece of work and closes. Every request declares
the MCP tasks extension, so a server may answer ``tools/call`` with a task, and the client capabilities of
`dex_agents.mcp._capabilities` (elicitation; roots where configured; never sampling). What went wrong is
reported by phase, because that decides whether a tool may have run: before the handshake finished
nothing was sent (`McpConnectError`); after it, a transport failure means a request may be in flight
(`McpConnectionLostError`).
"""

from __future__ import annotations

import importlib.metadata
import logging
import math
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TypeVar, cast

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client import Transport
from mcp.client.session import ClientSession, ElicitationFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from dex_agents.mcp._capabilities import cancel_elicitation, refuse_sampling_on
from dex_agents.mcp._roots import McpRoot, roots_callback
from dex_agents.mcp._servers import McpHttpServer, McpServer
from dex_agents.mcp._task_wire import tasks_extension

__all__ = ["McpConnectError", "McpConnectionLostError", "describe_error", "run_on_new_connection"]

_T = TypeVar("_T")
_logger = logging.getLogger("dex_agents.mcp")
_CLIENT_INFO = Implementation(name="dex-agents", version=importlib.metadata.version("dex-agents"))
# The MCP SDK's own defaults: a server may hold a response stream open for long.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class McpConnectError(Exception):
    """The connection or its handshake failed, so no request of the work reached the server."""


class McpConnectionLostError(Exception):
    """The connection failed after the handshake, while the work's request may have been in flight."""


def describe_error(error: BaseException) -> str:
    """Return one line naming an error, looking through the exception groups of anyio's task groups."""
    leaves: list[BaseException] = []
    pending = [error]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending.extend(cast(BaseExceptionGroup[BaseException], current).exceptions)
        else:
            leaves.append(current)
    return "; ".join(_describe_leaf(leaf) for leaf in leaves)


def _describe_leaf(error: BaseException) -> str:
    if isinstance(error, McpConnectError | McpConnectionLostError):
        return str(error)  # it already names the error it stands for
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


async def _enter_client(stack: AsyncExitStack, server: McpServer, elicitation: ElicitationFnT) -> Client:
    transport: StdioServerParameters | Transport
    if isinstance(server, McpHttpServer):
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(server.headers), timeout=_HTTP_TIMEOUT)
        )
        transport = streamable_http_client(server.url, http_client=http)
    else:
        transport = StdioServerParameters(
            command=server.command,
            args=list(server.args),
            env=None if server.env is None else dict(server.env),
            cwd=server.cwd,
        )
    # The SDK declares elicitation (form and URL) and roots because it gets their callbacks; sampling it
    # does not get, so it is not declared.
    client = Client(
        transport,
        cache=None,
        client_info=_CLIENT_INFO,
        extensions=[tasks_extension()],
        elicitation_callback=elicitation,
        list_roots_callback=roots_callback([root for root in server.roots if isinstance(root, McpRoot)]),
    )
    entered = await stack.enter_async_context(client)
    refuse_sampling_on(entered.session)
    return entered


def _handshake_failure(scope: anyio.CancelScope, timeout: float, error: Exception | None) -> str:
    if scope.cancel_called or error is None:
        return f"the server did not finish its handshake within {timeout:g} seconds"
    return describe_error(error)


async def run_on_new_connection(
    server: McpServer,
    handshake_timeout: float,
    work: Callable[[ClientSession], Awaitable[_T]],
    *,
    elicitation: ElicitationFnT = cancel_elicitation,
) -> _T:
    """Connect to ``server``, finish the handshake within ``handshake_timeout`` seconds, run ``work``, close.

    Args:
        server: The server to connect to.
        handshake_timeout: Seconds for starting or reaching the server and negotiating the protocol.
        work: What to do on the connection; it gets the SDK's session.
        elicitation: Answers the server's elicitations; by default ``cancel``, as nobody can answer.

    Returns:
        What ``work`` returned. A failure while closing after it returned is only logged.

    Raises:
        McpConnectError: The server could not be started or reached, or the handshake failed or took
            longer than ``handshake_timeout``; ``work`` never started.
        McpConnectionLostError: The connection failed while ``work`` ran.
        Exception: What ``work`` raised, as it is.
    """
    handshake_done = False
    work_done = False
    work_error: Exception | None = None
    result: _T | None = None
    scope = anyio.CancelScope(deadline=anyio.current_time() + handshake_timeout)
    try:
        with scope:
            async with AsyncExitStack() as stack:
                client = await _enter_client(stack, server, elicitation)
                handshake_done = True
                # The work runs as long as it needs; the Step's own timeout bounds it.
                scope.deadline = math.inf
                try:
                    result = await work(client.session)
                except Exception as error:
                    # Raised out of the connection's task groups, it would arrive wrapped in a group.
                    work_error = error
                work_done = True
    except Exception as error:
        if not handshake_done:
            raise McpConnectError(_handshake_failure(scope, handshake_timeout, error)) from error
        if not work_done:
            raise McpConnectionLostError(describe_error(error)) from error
        _logger.debug(
            "closing the connection to MCP server %r failed: %s", server.name, describe_error(error)
        )
    if not handshake_done:
        raise McpConnectError(_handshake_failure(scope, handshake_timeout, None))
    if work_error is not None:
        raise work_error
    return result  # pyright: ignore[reportReturnType] - work_done, so work returned it
