"""An MCP server whose tools carry effect annotations and log every request they serve.

Run it as a subprocess of an MCP client: ``python -m dex_agents.testing.mcp_inventory_server``, with the
log file in the ``MCP_TEST_LOG`` environment variable; `mcp_inventory_server_command` builds that command.
It serves stdio by default, and Streamable HTTP on loopback with ``--http`` (see
`start_mcp_inventory_http_server`, which runs it that way). Each line of the log is one request:
``tools/list``, ``tools/call <tool>``, or the longer lines named below. Its tools:

- ``count_items(sku)``: ``readOnlyHint``, so a ``read``; answers ``"<sku>: 7 in stock"``.
- ``set_stock(sku, count)``: ``idempotentHint`` and ``destructiveHint``, so an ``idempotent_write`` that
  asks for approval (when a client trusts the server's annotations); answers ``"<sku> set to <count>"``.
- ``order_more(sku)``: no hint that classifies it (``readOnlyHint`` false); answers ``"ordered <sku>"``.
- ``audit_stock(sku)``: ``readOnlyHint``; always fails (an ``isError`` result) with
  ``no auditor available for <sku>``.
- ``restock_and_crash(sku)``: ``readOnlyHint`` false; logs ``tools/call restock_and_crash <sku>`` and the
  server process dies before it answers, which drops the connection mid-call.
- ``reserve_stock(sku, count)``: ``idempotentHint`` and ``destructiveHint`` false; logs ``tools/call
  reserve_stock <sku> <key>`` with the idempotency key it received in ``_meta`` (``-`` for none). The first
  request with a key reserves and the process dies before it answers, as a server that crashed after the
  effect; a request that repeats the key answers ``"reserved <count> of <sku>"`` without reserving again.
- ``place_order(sku)``: no hints; logs ``tools/call place_order <sku>``, then holds the request at the
  `FileGate` ``place_order-<sku>`` in the log's directory until a test releases it, and answers
  ``"placed an order for <sku>"``.
- ``count_in_warehouse(sku, warehouse)``: ``readOnlyHint``; logs ``tools/call count_in_warehouse
  <warehouse>`` and answers ``"<sku>: 3 in <warehouse>"``. Its ``warehouse`` argument is marked
  ``x-mcp-header``, so a 2026-07-28 HTTP server refuses a call whose client did not list the tool first.
- ``confirm_order(sku)`` (mcp 2.x only): no hints; logs ``tools/call confirm_order <sku>`` and answers
  ``input_required`` with one form elicitation, ``confirm`` (``"Order more <sku>?"``).
- ``answer_badly(fault)``: ``readOnlyHint``; logs ``tools/call answer_badly <fault>``. Over Streamable
  HTTP, the server runs the call and then answers as a broken server or gateway would (`BAD_ANSWERS`):
  a body that is not JSON, a result that is not a tool result, HTTP 502, a JSON-RPC error -32603, or a
  JSON-RPC error -32050 (``inventory is locked``). Over stdio it answers an ``isError`` result saying so.

With mcp 2.x the server also serves MCP tasks (the ``io.modelcontextprotocol/tasks`` extension, see
`dex_agents.testing._mcp_task_tools`), and two tools that use them. A task moves on only when a client polls
it with ``tasks/get``, and lives in the server process's memory: over Streamable HTTP any connection can
poll it until the process ends; over stdio it ends with its connection.

- ``ship_order(sku, polls=1, poll_interval_ms=1000)``: ``idempotentHint``, not destructive. For a client that
  declares the tasks extension it logs ``tools/call ship_order <sku>`` and ``tasks/create ship_order <sku>``
  and answers with a task (``pollIntervalMs`` is ``poll_interval_ms``) that completes with ``"shipped <sku>"``
  at its ``polls``-th ``tasks/get``; for any other client it answers ``"shipped <sku>"`` at once.
- ``ship_with_carrier(sku)``: ``idempotentHint``, not destructive; only a task (any other client gets JSON-RPC
  error -32021). Its first ``tasks/get`` finds it ``input_required`` with one form elicitation,
  ``carrier-<n>``: ``"Which carrier ships <sku>?"`` with a single string field ``carrier``. An accepted answer
  completes it with ``"shipped <sku> with <carrier>"``, a decline with ``"<sku> was not shipped: no carrier
  was chosen"``, and a cancelled form cancels it.

Task requests log ``tasks/get <tool> <sku> <status>`` (``tasks/get <id> unknown`` for a task the server
does not know, which answers JSON-RPC error -32602), ``tasks/update <tool> <sku> <key> <action>
<carrier or ->`` and ``tasks/cancel <tool> <sku>``, so a test counts task creations and polls.

``MCP_TEST_TOOL_PREFIX`` puts a prefix before every tool name (the log names tools as served), and
``MCP_TEST_FAIL_LISTING=1`` makes ``tools/list`` answer an error after logging it.

It runs with mcp 1.x (``FastMCP``) and 2.x (``MCPServer``), and imports mcp only when it runs, so
importing this module (or ``dex_agents.testing``) never loads mcp.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

from dex_agents.testing._gates import FileGate

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from mcp.types import Tool

__all__ = [
    "BAD_ANSWERS",
    "IDEMPOTENCY_KEY_META_KEY",
    "MCP_INVENTORY_SERVER_MODULE",
    "MCP_TEST_FAIL_LISTING_ENV",
    "MCP_TEST_LOG_ENV",
    "MCP_TEST_TOOL_PREFIX_ENV",
    "McpStdioCommand",
    "main",
    "mcp_inventory_server_command",
]

MCP_INVENTORY_SERVER_MODULE = "dex_agents.testing.mcp_inventory_server"
"""The module to run with ``python -m``."""
MCP_TEST_LOG_ENV = "MCP_TEST_LOG"
"""The environment variable naming the server's request log."""
MCP_TEST_TOOL_PREFIX_ENV = "MCP_TEST_TOOL_PREFIX"
"""The environment variable holding a prefix for every tool name."""
MCP_TEST_FAIL_LISTING_ENV = "MCP_TEST_FAIL_LISTING"
"""Set to ``1`` to make ``tools/list`` answer a JSON-RPC error."""
IDEMPOTENCY_KEY_META_KEY = "io.superdurable.dex/idempotencyKey"
"""Where ``reserve_stock`` reads the idempotency key in a request's ``_meta``."""
BAD_ANSWERS = ("unparsable_body", "invalid_result", "gateway_error", "internal_error", "error_code")
"""The faults ``answer_badly`` takes, in the order the module docstring lists them."""

_ANSWER_BADLY = "answer_badly"


@dataclass(frozen=True)
class McpStdioCommand:
    """How an MCP client starts a stdio server, in the shape every framework's stdio options take.

    Attributes:
        command: The program.
        args: Its arguments.
        env: Environment variables the server needs on top of what the client passes by default.
    """

    command: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict[str, str])


def mcp_inventory_server_command(
    log: Path, *, tool_prefix: str = "", fail_listing: bool = False
) -> McpStdioCommand:
    """Return the command that runs the inventory server on stdio with this interpreter, logging to ``log``.

    Args:
        log: The request log the server appends to.
        tool_prefix: A prefix for every tool name the server offers.
        fail_listing: Whether ``tools/list`` answers a JSON-RPC error.

    Returns:
        The command, its arguments and its environment.
    """
    return McpStdioCommand(
        sys.executable,
        ["-m", MCP_INVENTORY_SERVER_MODULE],
        server_environment(log, tool_prefix=tool_prefix, fail_listing=fail_listing),
    )


def server_environment(log: Path, *, tool_prefix: str = "", fail_listing: bool = False) -> dict[str, str]:
    """Return the environment variables that configure the server (for this package's HTTP starter)."""
    environment = {MCP_TEST_LOG_ENV: str(log)}
    if tool_prefix:
        environment[MCP_TEST_TOOL_PREFIX_ENV] = tool_prefix
    if fail_listing:
        environment[MCP_TEST_FAIL_LISTING_ENV] = "1"
    return environment


def _log_path() -> Path:
    return Path(os.environ[MCP_TEST_LOG_ENV])


def _log(line: str) -> None:
    with _log_path().open("a", encoding="utf-8") as log:
        log.write(line + "\n")


def _is_new_reservation(key: str) -> bool:
    """Record ``key`` as reserved; return whether it was new. Keys outlive the process in a file."""
    reserved = _log_path().with_name(_log_path().name + ".reserved")
    known = reserved.read_text(encoding="utf-8").splitlines() if reserved.exists() else []
    if key in known:
        return False
    with reserved.open("a", encoding="utf-8") as keys:
        keys.write(key + "\n")
    return True


def _idempotency_key(context: Any) -> str:
    """Read the key from the request's ``_meta``: a dict in mcp 2.x, a model with extra fields in 1.x."""
    meta: object = context.request_context.meta
    if meta is None:
        return "-"
    if isinstance(meta, MutableMapping):
        value = cast(MutableMapping[str, object], meta).get(IDEMPOTENCY_KEY_META_KEY)
    else:
        extra = cast(dict[str, object] | None, getattr(meta, "model_extra", None)) or {}
        value = extra.get(IDEMPOTENCY_KEY_META_KEY)
    return value if isinstance(value, str) and value else "-"


def _sdk_classes() -> tuple[type[MCPServer], type[Any], type[Exception]]:
    """Return the installed mcp release's server class, tool context class and tool error class."""
    try:
        from mcp.server.mcpserver import Context, MCPServer  # noqa: PLC0415 - mcp loads only when it runs
        from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415
    except ImportError:  # mcp 1.x, which langchain-mcp-adapters pins
        # mcp 2.x keeps only a stub module there, which pyright sees in this package's environment. FastMCP
        # has every method this server uses, under the same names.
        from mcp.server.fastmcp import Context as FastContext  # noqa: PLC0415  # pyright: ignore
        from mcp.server.fastmcp import FastMCP  # noqa: PLC0415  # pyright: ignore
        from mcp.server.fastmcp.exceptions import ToolError as FastError  # noqa: PLC0415  # pyright: ignore

        return (
            cast("type[MCPServer]", FastMCP),
            cast(type[Any], FastContext),
            cast(type[Exception], FastError),
        )
    return MCPServer, Context, ToolError


def _tasks_module() -> Any:
    """Return the module that serves MCP tasks, or `None` under mcp 1.x, which has no server extensions."""
    try:
        from dex_agents.testing import _mcp_task_tools  # noqa: PLC0415 - it imports mcp 2.x
    except ImportError:
        return None
    return _mcp_task_tools


def _sdk_error(code: int, message: str) -> Exception:
    """Return the installed mcp release's JSON-RPC error, which the server answers as it is."""
    try:
        from mcp import MCPError  # noqa: PLC0415 - mcp loads only when the server runs
    except ImportError:  # mcp 1.x
        from mcp.shared.exceptions import McpError  # noqa: PLC0415  # pyright: ignore
        from mcp.types import ErrorData  # noqa: PLC0415

        return cast(Exception, McpError(ErrorData(code=code, message=message)))
    return MCPError(code, message)


def _build_server() -> MCPServer:
    """Return the inventory server, built with the installed mcp release's high-level server class."""
    import mcp.types as mcp_types  # noqa: PLC0415 - mcp loads only when the server runs
    from mcp.types import ToolAnnotations  # noqa: PLC0415
    from pydantic import Field  # noqa: PLC0415

    base, context_class, tool_error = _sdk_classes()
    prefix = os.environ.get(MCP_TEST_TOOL_PREFIX_ENV, "")
    fail_listing = os.environ.get(MCP_TEST_FAIL_LISTING_ENV) == "1"

    extensions: list[Any] = []
    tasks_module = _tasks_module()
    if tasks_module is not None:
        extensions.append(tasks_module.InventoryTasks(_log, prefix))

    class LoggingServer(base):
        async def list_tools(self) -> list[Tool]:
            _log("tools/list")
            if fail_listing:
                raise _sdk_error(-32603, f"{MCP_TEST_FAIL_LISTING_ENV} is set, so this server lists no tools")
            return await super().list_tools()

    server = LoggingServer("inventory", extensions=extensions) if extensions else LoggingServer("inventory")

    # Validating by the wire's camelCase names works in mcp 1.x and 2.x alike.
    def hints(**values: bool) -> ToolAnnotations:
        return ToolAnnotations.model_validate(values)

    def tool(annotations: ToolAnnotations) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            return server.tool(name=prefix + function.__name__, annotations=annotations)(function)

        return register

    @tool(hints(readOnlyHint=True))
    def count_items(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Count the items of a SKU in stock."""
        _log(f"tools/call {prefix}count_items")
        return f"{sku}: 7 in stock"

    @tool(hints(idempotentHint=True, destructiveHint=True))
    def set_stock(sku: str, count: int) -> str:  # pyright: ignore[reportUnusedFunction]
        """Set the stock of a SKU."""
        _log(f"tools/call {prefix}set_stock")
        return f"{sku} set to {count}"

    @tool(hints(readOnlyHint=False))
    def order_more(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Order more of a SKU from the supplier."""
        _log(f"tools/call {prefix}order_more")
        return f"ordered {sku}"

    @tool(hints(readOnlyHint=True))
    def audit_stock(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Audit the stock of a SKU (the auditor is away)."""
        _log(f"tools/call {prefix}audit_stock")
        # The SDK's tool error passes its message on to the client; any other exception may not.
        raise tool_error(f"no auditor available for {sku}")

    @tool(hints(readOnlyHint=False))
    def restock_and_crash(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Restock a SKU; the server dies before it answers."""
        _log(f"tools/call {prefix}restock_and_crash {sku}")
        os._exit(1)

    def reserve_stock(sku: str, count: int, context: Any) -> str:
        """Reserve items of a SKU, once per idempotency key."""
        key = _idempotency_key(context)
        _log(f"tools/call {prefix}reserve_stock {sku} {key}")
        if _is_new_reservation(key):
            os._exit(1)
        return f"reserved {count} of {sku}"

    # The SDK finds the context parameter by its type, which only exists once mcp is imported.
    reserve_stock.__annotations__["context"] = context_class
    tool(hints(idempotentHint=True, destructiveHint=False))(reserve_stock)

    @tool(hints())
    async def place_order(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Place an order for a SKU with the supplier."""
        _log(f"tools/call {prefix}place_order {sku}")
        await FileGate(_log_path().parent, f"place_order-{sku}").pass_through()
        return f"placed an order for {sku}"

    def count_in_warehouse(sku: str, warehouse: str) -> str:
        """Count the items of a SKU in one warehouse."""
        _log(f"tools/call {prefix}count_in_warehouse {warehouse}")
        return f"{sku}: 3 in {warehouse}"

    # A 2026-07-28 client sends an argument marked x-mcp-header as an HTTP header too; the server refuses a
    # call without it, which a client can only add for a tool it listed on the same connection.
    warehouse_field = Field(json_schema_extra={"x-mcp-header": "Warehouse"})
    count_in_warehouse.__annotations__["warehouse"] = Annotated[str, warehouse_field]
    tool(hints(readOnlyHint=True))(count_in_warehouse)

    input_required = getattr(mcp_types, "InputRequiredResult", None)
    if input_required is not None:  # mcp 2.x

        def confirm_order(sku: str) -> object:
            """Ask the user to confirm an order of a SKU before placing it."""
            _log(f"tools/call {prefix}confirm_order {sku}")
            question = mcp_types.ElicitRequestFormParams(
                message=f"Order more {sku}?",
                requested_schema={"type": "object", "properties": {"confirmed": {"type": "boolean"}}},
            )
            return input_required(input_requests={"confirm": mcp_types.ElicitRequest(params=question)})

        confirm_order.__annotations__["return"] = input_required
        tool(hints())(confirm_order)

    if tasks_module is not None:  # mcp 2.x

        @tool(hints(idempotentHint=True, destructiveHint=False))
        def ship_order(sku: str, polls: int = 1, poll_interval_ms: int = 1000) -> str:  # pyright: ignore[reportUnusedFunction]
            """Ship an order of a SKU; as an MCP task, it ends at its polls-th tasks/get."""
            del polls, poll_interval_ms  # they pace the task, which a client without tasks never gets
            _log(f"tools/call {prefix}ship_order {sku}")
            return f"shipped {sku}"

        @tool(hints(idempotentHint=True, destructiveHint=False))
        def ship_with_carrier(sku: str) -> str:  # pyright: ignore[reportUnusedFunction]
            """Ship an order of a SKU with the carrier the user names; runs only as an MCP task."""
            raise tool_error(f"ship_with_carrier of {sku} runs only as an MCP task")

    @tool(hints(readOnlyHint=True))
    def answer_badly(fault: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Answer as a broken server would; the fault is one of BAD_ANSWERS."""
        _log(f"tools/call {prefix}{_ANSWER_BADLY} {fault}")
        # Over HTTP the answer below never leaves the server: _BadAnswers replaces it.
        raise tool_error(f"answer_badly answers {fault} only over Streamable HTTP")

    return server


ASGIMessage = MutableMapping[str, Any]
ASGIReceive = Callable[[], Awaitable[ASGIMessage]]
ASGISend = Callable[[ASGIMessage], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], ASGIReceive, ASGISend], Awaitable[None]]


class _BadAnswers:
    """ASGI middleware that lets ``answer_badly`` run, then replaces its answer with the fault it names."""

    def __init__(self, app: ASGIApp, tool_name: str) -> None:
        self._app = app
        self._tool_name = tool_name

    async def __call__(self, scope: MutableMapping[str, Any], receive: ASGIReceive, send: ASGISend) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = self._bad_request(body)
        replayed = False

        async def replay() -> ASGIMessage:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if request is None:
            await self._app(scope, replay, send)
            return

        async def swallow(message: ASGIMessage) -> None:
            del message

        # The tool runs and logs; whatever the server answered is dropped.
        await self._app(scope, replay, swallow)
        await _send_fault(send, *request)

    def _bad_request(self, body: bytes) -> tuple[object, str] | None:
        try:
            request: object = json.loads(body)
        except ValueError:
            return None
        if not isinstance(request, dict):
            return None
        request = cast(dict[str, Any], request)
        params: object = request.get("params")
        if request.get("method") != "tools/call" or not isinstance(params, dict):
            return None
        params = cast(dict[str, Any], params)
        arguments: object = params.get("arguments")
        if params.get("name") != self._tool_name or not isinstance(arguments, dict):
            return None
        fault: object = cast(dict[str, Any], arguments).get("fault")
        return (request.get("id"), fault) if fault in BAD_ANSWERS else None


async def _send_fault(send: ASGISend, request_id: object, fault: str) -> None:
    status = 200
    content_type = b"application/json"
    if fault == "unparsable_body":
        body = b'{"jsonrpc": "2.0", "id": '
    elif fault == "invalid_result":
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"content": "not a list"}}).encode()
    elif fault == "gateway_error":
        status, content_type, body = 502, b"text/plain", b"Bad Gateway"
    else:
        code, text = (
            (-32603, "Internal error") if fault == "internal_error" else (-32050, "inventory is locked")
        )
        body = json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
        ).encode()
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _serve_http(port: int, ready_file: Path) -> None:
    import uvicorn  # noqa: PLC0415 - a dependency of mcp, loaded only when the server runs

    server = _build_server()
    app = cast(ASGIApp, server.streamable_http_app())
    prefix = os.environ.get(MCP_TEST_TOOL_PREFIX_ENV, "")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A restarted server takes the port of the one it replaces.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    http = uvicorn.Server(uvicorn.Config(_BadAnswers(app, prefix + _ANSWER_BADLY), log_level="warning"))
    serving = asyncio.create_task(http.serve(sockets=[listener]))
    while not http.started and not serving.done():  # noqa: ASYNC110 - uvicorn offers no startup event
        await asyncio.sleep(0.02)
    if http.started:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        partial = ready_file.with_name(ready_file.name + ".partial")
        partial.write_text(url, encoding="utf-8")
        partial.replace(ready_file)
    await serving


def main(argv: list[str] | None = None) -> None:
    """Serve the inventory tools on stdio (or Streamable HTTP with ``--http``) until stopped.

    Args:
        argv: The command line arguments; `None` reads ``sys.argv``.
    """
    parser = argparse.ArgumentParser(prog=f"python -m {MCP_INVENTORY_SERVER_MODULE}")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="the HTTP port; 0 picks a free one")
    parser.add_argument("--ready-file", type=Path, help="where the HTTP server writes its URL once it serves")
    arguments = parser.parse_args(argv)
    if not os.environ.get(MCP_TEST_LOG_ENV):
        sys.exit(
            f"{MCP_TEST_LOG_ENV} must name the request log; "
            "start the server with mcp_inventory_server_command()"
        )
    if not arguments.http:
        _build_server().run("stdio")
        return
    if arguments.ready_file is None:
        parser.error("--http needs --ready-file")
    asyncio.run(_serve_http(arguments.port, arguments.ready_file))


if __name__ == "__main__":
    main()
