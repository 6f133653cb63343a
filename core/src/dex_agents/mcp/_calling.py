"""One ``tools/call`` inside a tool Step, and what each way it can fail means for the session.

The call carries the session's idempotency key in ``_meta``, the same on every attempt, so a server can
drop a repeated request. How a failure is reported decides what the session does next:

- The server answered (an ``isError`` result, or a JSON-RPC error other than the "no result" codes
  below), or the request was never sent (the server could not be started or reached, or the handshake
  failed): `ToolExecutionError`, so the call records ``failed`` with a message for the model and is not
  retried. A call that was never sent did not run.
- The request was sent and no result came back (the connection dropped, the answer was unreadable or not
  a tool result, or the MCP SDK reported an HTTP error status as -32603 or an unreadable body as -32700,
  which a gateway can send after the server ran the call): `McpToolCallInterruptedError`, which fails the
  Step attempt, so the tool's effect decides: ``CallTool`` sends a new request (with the same key) for a
  read or an idempotent write, and ``CallSingleAttemptTool`` records ``outcome_unknown``.

MCP tasks (a later change) plug in here: `call_mcp_tool` first reads a task handle an earlier attempt saved
as its heartbeat checkpoint and skips ``tools/call`` when there is one; a ``tools/call`` answered with a
task handle saves it with ``save_heartbeat_checkpoint`` before anything else, then returns
``ToolTaskStarted`` or polls the task inside the Step (see `_RESULT`, the one place that parses answers).
"""

from __future__ import annotations

from typing import Any, cast

from mcp import MCPError
from mcp.client.session import ClientSession
from mcp.types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    InputRequiredResult,
    PaginatedRequestParams,
)
from pydantic import TypeAdapter, ValidationError

from dex_agents._tool_arguments import parse_tool_arguments
from dex_agents.mcp._connection import (
    McpConnectError,
    McpConnectionLostError,
    describe_error,
    run_on_new_connection,
)
from dex_agents.mcp._render import render_tool_result
from dex_agents.mcp._servers import McpServer
from dex_agents.runner import ToolExecutionError, ToolExecutionResult

__all__ = ["IDEMPOTENCY_KEY_META_KEY", "McpToolCallInterruptedError", "call_mcp_tool"]

IDEMPOTENCY_KEY_META_KEY = "io.superdurable.dex/idempotencyKey"
"""Where ``tools/call`` carries the session's idempotency key in ``_meta``."""

# The SDK's codes for a request that got no answer (connection closed, request timeout), and the codes it
# reports for an HTTP error status (-32603) and an unreadable body (-32700). Any of them can follow a call
# the server ran, so none proves that the tool did not run.
_NO_RESULT_CODES = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT, INTERNAL_ERROR, PARSE_ERROR})
_ToolsCallAnswer = CallToolResult | InputRequiredResult
# pyright reads a union expression as a UnionType value, not as the type form pydantic takes.
_RESULT = cast(
    TypeAdapter[_ToolsCallAnswer],
    TypeAdapter(_ToolsCallAnswer),  # pyright: ignore[reportArgumentType, reportUnknownArgumentType]
)
# A listing that never ends must not hang the call it was meant to repair.
_MAX_LISTING_PAGES = 100


class McpToolCallInterruptedError(Exception):
    """An MCP server got ``tools/call`` and no result came back, so the tool may have run.

    It fails the tool Step's attempt instead of recording a result, so the tool's effect decides what
    happens: another attempt for a read or an idempotent write, ``outcome_unknown`` for the others.

    Attributes:
        server_name: The server's name.
        mcp_name: The tool's name on that server.
        reason: What happened instead of a result.
    """

    def __init__(self, server_name: str, mcp_name: str, reason: str) -> None:
        """Create the error.

        Args:
            server_name: The server's name.
            mcp_name: The tool's name on that server.
            reason: What happened instead of a result.
        """
        super().__init__(
            f"MCP server {server_name!r} got tools/call for {mcp_name!r} and no result came back, so the "
            f"tool may have run: {reason}"
        )
        self.server_name = server_name
        self.mcp_name = mcp_name
        self.reason = reason


async def _list_until(session: ClientSession, mcp_name: str) -> None:
    cursor: str | None = None
    for _ in range(_MAX_LISTING_PAGES):
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        cursor = page.next_cursor
        if cursor is None or any(tool.name == mcp_name for tool in page.tools):
            return


async def _send_tools_call(
    session: ClientSession, mcp_name: str, arguments: dict[str, Any], idempotency_key: str
) -> CallToolResult | InputRequiredResult:
    request = CallToolRequest(
        params=CallToolRequestParams(
            name=mcp_name, arguments=arguments, _meta={IDEMPOTENCY_KEY_META_KEY: idempotency_key}
        )
    )
    # Sent as a plain request rather than through the session's call_tool, which lists every tool after
    # the call to check the result against an output schema; the call needs no listing.
    try:
        return await session.send_request(request, _RESULT)
    except MCPError as error:
        if error.code != HEADER_MISMATCH:
            raise
    # A 2026-07-28 HTTP server refused the call before running it: the tool mirrors arguments into
    # headers, which the SDK writes only for a tool it listed on this connection. List it and send again.
    await _list_until(session, mcp_name)
    return await session.send_request(request, _RESULT)


def _describe_input_requests(result: InputRequiredResult) -> str:
    described: list[str] = []
    for key, request in (result.input_requests or {}).items():
        question = request.params.message if isinstance(request, ElicitRequest) else None
        described.append(
            f"{key} ({request.method}: {question!r})" if question else f"{key} ({request.method})"
        )
    return ", ".join(described) or "no request named"


async def call_mcp_tool(
    server: McpServer, mcp_name: str, arguments: str, idempotency_key: str, handshake_timeout: float
) -> ToolExecutionResult:
    """Call one tool on a new connection to ``server`` and return what the model sees.

    Args:
        server: The server, from the Worker's configuration.
        mcp_name: The tool's name on that server.
        arguments: The call's arguments as JSON object text.
        idempotency_key: The session's key for the call, the same on every attempt.
        handshake_timeout: Seconds for starting or reaching the server and negotiating the protocol.

    Returns:
        The tool's output: its content blocks as text, else its structured content as JSON.

    Raises:
        ToolExecutionError: The tool reported an error, the server answered with a JSON-RPC error, the
            tool asked for input, the arguments are not a JSON object, or the request was never sent.
        McpToolCallInterruptedError: The request was sent and no result came back.
    """
    parsed = parse_tool_arguments(arguments, tool_name=f"{server.name}__{mcp_name}")

    async def work(session: ClientSession) -> CallToolResult | InputRequiredResult:
        return await _send_tools_call(session, mcp_name, parsed, idempotency_key)

    try:
        result = await run_on_new_connection(server, handshake_timeout, work)
    except McpConnectError as error:
        raise ToolExecutionError(
            f"MCP server {server.name!r} could not be reached, so {mcp_name!r} did not run: {error}"
        ) from error
    except McpConnectionLostError as error:
        raise McpToolCallInterruptedError(server.name, mcp_name, f"the connection failed: {error}") from error
    except MCPError as error:
        if error.code in _NO_RESULT_CODES:
            raise McpToolCallInterruptedError(
                server.name, mcp_name, f"JSON-RPC error {error.code}: {error.message}"
            ) from error
        raise ToolExecutionError(
            f"MCP server {server.name!r} refused {mcp_name!r} with JSON-RPC error {error.code}: "
            f"{error.message}"
        ) from error
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise McpToolCallInterruptedError(
            server.name, mcp_name, f"the answer is not a tool result ({where}: {problem['msg']})"
        ) from error
    except Exception as error:
        # Anything else went wrong after the request went out, so the tool may have run.
        raise McpToolCallInterruptedError(server.name, mcp_name, describe_error(error)) from error
    if isinstance(result, InputRequiredResult):
        # Nothing ran yet: the server waits for the input before it goes on.
        raise ToolExecutionError(
            f"MCP tool {mcp_name!r} of server {server.name!r} asked for input that a tool call cannot give "
            f"yet: {_describe_input_requests(result)}"
        )
    output = render_tool_result(result)
    if result.is_error:
        raise ToolExecutionError(output or f"MCP tool {mcp_name!r} reported an error without a message")
    return ToolExecutionResult(output)
