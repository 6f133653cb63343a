"""McpToolSource against the test kit's inventory server, run as real stdio and Streamable HTTP subprocesses.

The session's side of the runner contract is played in process (`SessionSide`): each call is deferred as
`RunModel` defers it and run as its tool Step runs it, so every behaviour here is the source's own.
"""

import dataclasses
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio

from dex_agents import (
    UNKNOWN_TOOL_POLICY,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolPolicy,
)
from dex_agents.mcp import McpHttpServer, McpStdioServer, McpToolCallInterruptedError, McpToolSource
from dex_agents.mcp._definitions import McpToolReference
from dex_agents.testing import (
    McpInventoryHttpServer,
    ScriptedRunner,
    SessionSide,
    mcp_inventory_server_command,
    start_mcp_inventory_http_server,
    wait_until,
)
from dex_agents.values import QuestionAnswer

pytestmark = pytest.mark.asyncio(loop_scope="module")

_MCP_LOGGER = "dex_agents.mcp"
_USER_MESSAGE = ScriptedRunner(tools=()).build_user_message("Check the stock")


def stdio_server(
    name: str,
    log: Path,
    *,
    tool_prefix: str = "",
    tool_policies: dict[str, ToolPolicy] | None = None,
) -> McpStdioServer:
    command = mcp_inventory_server_command(log, tool_prefix=tool_prefix)
    return McpStdioServer(
        name,
        command.command,
        command.args,
        env=command.env,
        tool_policies=tool_policies or {},
        trust_annotations=True,
    )


def log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@dataclass
class Warehouse:
    """The module's inventory server on Streamable HTTP, and its request log."""

    server: McpInventoryHttpServer
    log: Path

    def lines_since(self, start: int) -> list[str]:
        return log_lines(self.log)[start:]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def warehouse(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Warehouse]:
    log = tmp_path_factory.mktemp("warehouse") / "requests.log"
    async with await start_mcp_inventory_http_server(log) as server:
        yield Warehouse(server, log)


async def defer(
    source: McpToolSource, calls: Sequence[tuple[str, str, str]], side: SessionSide | None = None
) -> SessionSide:
    """List the tools, then defer ``(tool_call_id, tool_name, arguments)`` calls as a model response does."""
    side = side or SessionSide()
    await source.list_tools()
    side.start_turn(_USER_MESSAGE)
    turn = side.context()
    deferred = [
        source.deferred_tool_call(turn, tool_call_id=call_id, tool_name=name, arguments=arguments)
        for call_id, name, arguments in calls
    ]
    side.defer(ToolCallsRequested(framework_run_state="{}", tool_calls=deferred))
    return side


async def run_call(source: McpToolSource, side: SessionSide, tool_call_id: str, attempt: int = 1) -> str:
    execution = dataclasses.replace(side.execution(tool_call_id), attempt=attempt)
    outcome = await source.call_tool(execution)
    assert isinstance(outcome, ToolExecutionResult), outcome
    return outcome.output


async def test_listing_offers_each_servers_tools_under_its_name_and_lists_each_server_once(
    warehouse: Warehouse, tmp_path: Path
) -> None:
    stdio_log = tmp_path / "stdio.log"
    start = len(log_lines(warehouse.log))
    source = McpToolSource(
        [
            stdio_server("inventory", stdio_log),
            McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True),
        ]
    )

    tools = await source.list_tools()
    again = await source.list_tools()

    names = [tool.name for tool in tools]
    inventory = [name.removeprefix("inventory__") for name in names if name.startswith("inventory__")]
    assert inventory[:3] == ["count_items", "set_stock", "order_more"]
    # The stdio server's tools first, then the same tools of the HTTP server, in listing order.
    assert names == [f"inventory__{name}" for name in inventory] + [
        f"warehouse__{name}" for name in inventory
    ]
    assert again == tools
    count = source.tool("warehouse__count_items")
    assert count is not None
    assert (count.server_name, count.mcp_name, count.effect) == ("warehouse", "count_items", ToolEffect.READ)
    assert count.description == "Count the items of a SKU in stock."
    assert count.input_schema["required"] == ["sku"]
    assert log_lines(stdio_log) == ["tools/list"]
    assert warehouse.lines_since(start) == ["tools/list"]

    await source.list_tools(refresh=True)
    assert log_lines(stdio_log) == ["tools/list", "tools/list"]
    assert warehouse.lines_since(start) == ["tools/list", "tools/list"]


async def test_a_tool_whose_name_is_taken_or_refused_by_models_is_left_out_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shop_log, stock_log, v1_log = tmp_path / "shop.log", tmp_path / "stock.log", tmp_path / "v1.log"
    source = McpToolSource(
        [
            # "shop" + "__" + "stock__count_items" is the name "shop__stock" + "__" + "count_items" takes.
            stdio_server("shop", shop_log, tool_prefix="stock__"),
            stdio_server("shop__stock", stock_log),
            stdio_server("v1", v1_log, tool_prefix="api.v1."),
        ]
    )
    with caplog.at_level(logging.WARNING, logger=_MCP_LOGGER):
        tools = await source.list_tools()
        await source.list_tools()

    names = {tool.name for tool in tools}
    assert "shop__stock__count_items" in names and "v1__api.v1.count_items" not in names
    assert not any(name.startswith("v1__") for name in names)
    kept = source.tool("shop__stock__count_items")
    assert kept is not None and (kept.server_name, kept.mcp_name) == ("shop", "stock__count_items")
    warnings = [record.getMessage() for record in caplog.records]
    collision = (
        "MCP tool 'count_items' of server 'shop__stock' is left out: its name 'shop__stock__count_items' is "
        "already the name of tool 'stock__count_items' of MCP server 'shop'"
    )
    assert warnings.count(collision) == 1, warnings
    refused = [warning for warning in warnings if "'api.v1.count_items' of server 'v1'" in warning]
    assert len(refused) == 1 and "is not 1 to 64 letters, digits, '_' or '-'" in refused[0], warnings
    # Every tool of shop__stock collides and every v1 tool is refused, each warned about once.
    assert len(warnings) == 2 * len(tools), warnings

    # The kept name calls the earlier server's tool.
    side = await defer(source, [("count-1", "shop__stock__count_items", '{"sku": "A-1"}')])
    assert await run_call(source, side, "count-1") == "A-1: 7 in stock"
    assert log_lines(shop_log)[-1] == "tools/call stock__count_items"
    assert "tools/call count_items" not in log_lines(stock_log)


async def test_servers_that_cannot_be_listed_are_left_out_and_listed_again_next_time(
    warehouse: Warehouse, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    refusing_log = tmp_path / "refusing.log"
    start = len(log_lines(warehouse.log))
    async with await start_mcp_inventory_http_server(refusing_log, fail_listing=True) as refusing:
        source = McpToolSource(
            [
                McpStdioServer("missing", str(tmp_path / "no-such-server")),
                McpHttpServer("refusing", refusing.url, trust_annotations=True),
                McpHttpServer("closed", "http://127.0.0.1:1/mcp"),
                McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True),
            ]
        )
        with caplog.at_level(logging.WARNING, logger=_MCP_LOGGER):
            tools = await source.list_tools()
        assert {tool.server_name for tool in tools} == {"warehouse"}
        warnings = {record.getMessage().split(":", 1)[0]: record.getMessage() for record in caplog.records}
        assert set(warnings) == {
            f"MCP server {name!r} could not be listed, so its tools are left out"
            for name in ("missing", "refusing", "closed")
        }, warnings
        assert (
            "FileNotFoundError"
            in warnings["MCP server 'missing' could not be listed, so its tools are left out"]
        )
        assert (
            "ConnectError" in warnings["MCP server 'closed' could not be listed, so its tools are left out"]
        )
        assert (
            "lists no tools"
            in warnings["MCP server 'refusing' could not be listed, so its tools are left out"]
        )

        await source.list_tools()
    assert log_lines(refusing_log) == ["tools/list", "tools/list"]
    assert warehouse.lines_since(start) == ["tools/list"]


async def test_deferred_calls_take_their_effect_from_annotations_unless_a_policy_names_the_tool(
    warehouse: Warehouse,
) -> None:
    configured = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    source = McpToolSource(
        [
            McpHttpServer(
                "warehouse",
                warehouse.server.url,
                tool_policies={"order_more": configured},
                trust_annotations=True,
            )
        ]
    )
    sessions_own = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)
    side = SessionSide(tool_policies={"warehouse__reserve_stock": sessions_own})
    side = await defer(
        source,
        [
            ("count-1", "warehouse__count_items", '{"sku": "A-1"}'),
            ("set-1", "warehouse__set_stock", '{"sku": "A-1", "count": 9}'),
            ("order-1", "warehouse__order_more", '{"sku": "A-1"}'),
            ("reserve-1", "warehouse__reserve_stock", '{"sku": "A-1", "count": 2}'),
            ("place-1", "warehouse__place_order", '{"sku": "A-1"}'),
            ("rocket-1", "warehouse__launch_rocket", "{}"),
        ],
        side,
    )
    policies = {
        call_id: (record.effect, record.requires_approval) for call_id, record in side.records.items()
    }
    assert policies == {
        "count-1": (ToolEffect.READ, False),  # readOnlyHint
        "set-1": (ToolEffect.IDEMPOTENT_WRITE, True),  # idempotentHint, and destructiveHint asks
        "order-1": (ToolEffect.NON_IDEMPOTENT_WRITE, False),  # the server's configured policy
        "reserve-1": (ToolEffect.NON_IDEMPOTENT_WRITE, True),  # the session's policy beats idempotentHint
        "place-1": (ToolEffect.UNCLASSIFIED, True),  # no hint: the session's default effect
        "rocket-1": (UNKNOWN_TOOL_POLICY.effect, False),
    }
    assert McpToolReference.decode(side.records["count-1"].tool_source_reference) == McpToolReference(
        "warehouse", "count_items"
    )
    assert side.records["rocket-1"].tool_source_reference is None
    assert source.owns_tool_call(side.records["count-1"]) and not source.owns_tool_call(
        side.records["rocket-1"]
    )
    with pytest.raises(
        ToolExecutionError, match="'warehouse__launch_rocket' is not a tool of this agent's MCP"
    ):
        await run_call(source, side, "rocket-1")
    assert await run_call(source, side, "count-1") == "A-1: 7 in stock"

    # By default a server's hints are not trusted: every tool is left to policies and the session's
    # default, so a server that calls a deletion read-only cannot skip the approval.
    untrusting = McpToolSource([McpHttpServer("warehouse", warehouse.server.url)])
    side = await defer(
        untrusting,
        [
            ("count-1", "warehouse__count_items", '{"sku": "A-1"}'),
            ("set-1", "warehouse__set_stock", '{"sku": "A-1", "count": 9}'),
        ],
    )
    assert {
        call_id: (record.effect, record.requires_approval) for call_id, record in side.records.items()
    } == {
        "count-1": (ToolEffect.UNCLASSIFIED, True),
        "set-1": (ToolEffect.UNCLASSIFIED, True),
    }
    assert [definition.effect for definition in await untrusting.list_tools()][:2] == [None, None]


async def test_the_idempotency_key_reaches_the_server_and_a_retried_attempt_sends_the_same_key(
    tmp_path: Path,
) -> None:
    log = tmp_path / "requests.log"
    source = McpToolSource([stdio_server("inventory", log)])
    side = await defer(source, [("reserve-1", "inventory__reserve_stock", '{"sku": "A-1", "count": 2}')])
    key = "session-1/turn-1/reserve-1"
    assert side.execution("reserve-1").idempotency_key == key

    # The server reserves, then dies before it answers: the outcome is unknown, so the attempt fails.
    with pytest.raises(McpToolCallInterruptedError, match="no result came back, so the tool may have run"):
        await run_call(source, side, "reserve-1")
    # The retried attempt sends the same key, so the server answers without reserving again.
    assert await run_call(source, side, "reserve-1", attempt=2) == "reserved 2 of A-1"
    calls = [line for line in log_lines(log) if line.startswith("tools/call")]
    assert calls == [f"tools/call reserve_stock A-1 {key}"] * 2


async def test_the_idempotency_key_reaches_a_streamable_http_server(warehouse: Warehouse) -> None:
    source = McpToolSource([McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True)])
    side = await defer(source, [("reserve-2", "warehouse__reserve_stock", '{"sku": "B-2", "count": 1}')])
    key = "session-1/turn-1/reserve-2"
    # A key the server saw before answers at once instead of ending the module's server process.
    with warehouse.log.with_name(warehouse.log.name + ".reserved").open("a") as reserved:
        reserved.write(key + "\n")
    start = len(log_lines(warehouse.log))
    assert await run_call(source, side, "reserve-2") == "reserved 1 of B-2"
    assert warehouse.lines_since(start) == [f"tools/call reserve_stock B-2 {key}"]


async def test_a_server_restarted_between_listing_and_calling_answers_the_call(tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    async with await start_mcp_inventory_http_server(log) as first:
        source = McpToolSource([McpHttpServer("inventory", first.url, trust_annotations=True)])
        side = await defer(source, [("count-1", "inventory__count_items", '{"sku": "A-1"}')])
    assert not first.is_running
    async with await start_mcp_inventory_http_server(log, port=first.port) as second:
        assert second.url == first.url
        assert await run_call(source, side, "count-1") == "A-1: 7 in stock"
    assert log_lines(log) == ["tools/list", "tools/call count_items"]


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("unparsable_body", "JSON-RPC error -32700: Failed to parse JSON response"),
        (
            "invalid_result",
            "the answer is not a tool result (CallToolResult.content: Input should be a valid list)",
        ),
        ("gateway_error", "JSON-RPC error -32603: Server returned an error response"),
        ("internal_error", "JSON-RPC error -32603: Internal error"),
    ],
)
async def test_an_answer_without_a_result_interrupts_the_call_after_the_tool_ran(
    warehouse: Warehouse, fault: str, reason: str
) -> None:
    source = McpToolSource([McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True)])
    side = await defer(source, [("bad-1", "warehouse__answer_badly", f'{{"fault": "{fault}"}}')])
    start = len(log_lines(warehouse.log))
    with pytest.raises(McpToolCallInterruptedError) as raised:
        await run_call(source, side, "bad-1")
    assert raised.value.reason.startswith(reason), raised.value.reason
    assert (raised.value.server_name, raised.value.mcp_name) == ("warehouse", "answer_badly")
    assert warehouse.lines_since(start) == [f"tools/call answer_badly {fault}"]


async def test_an_error_answer_from_the_server_fails_the_call_for_the_model(warehouse: Warehouse) -> None:
    source = McpToolSource([McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True)])
    side = await defer(
        source,
        [
            ("locked-1", "warehouse__answer_badly", '{"fault": "error_code"}'),
            ("audit-1", "warehouse__audit_stock", '{"sku": "A-1"}'),
        ],
    )
    with pytest.raises(ToolExecutionError) as locked:
        await run_call(source, side, "locked-1")
    assert locked.value.message == (
        "MCP server 'warehouse' refused 'answer_badly' with JSON-RPC error -32050: inventory is locked"
    )
    with pytest.raises(ToolExecutionError, match="no auditor available for A-1"):
        await run_call(source, side, "audit-1")


async def test_a_tool_that_answers_input_required_asks_the_user_and_asks_again_when_the_server_does(
    warehouse: Warehouse,
) -> None:
    source = McpToolSource([McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True)])
    side = await defer(source, [("confirm-1", "warehouse__confirm_order", '{"sku": "A-1"}')])
    execution = side.execution("confirm-1")
    asked = await source.call_tool(execution)
    assert isinstance(asked, ToolInputRequested), asked
    assert (asked.question, asked.choices, asked.allows_free_text) == (
        "Order more A-1?",
        ("yes", "no", "decline", "cancel"),
        False,
    )
    # confirm_order asks on every call: the answer goes to the first ask, and the next ask is a new question.
    record = dataclasses.replace(
        execution.tool_call,
        input_continuation=asked.continuation,
        input_answers=(QuestionAnswer("confirm-1-input-1", asked.question, "yes"),),
    )
    again = await source.call_tool(dataclasses.replace(execution, tool_call=record))
    assert isinstance(again, ToolInputRequested) and again.question == "Order more A-1?", again


async def test_a_call_the_server_refuses_for_missing_argument_headers_is_listed_and_sent_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "requests.log"
    async with await start_mcp_inventory_http_server(log) as server:
        source = McpToolSource([McpHttpServer("inventory", server.url, trust_annotations=True)])
        side = await defer(
            source, [("count-1", "inventory__count_in_warehouse", '{"sku": "A-1", "warehouse": "north"}')]
        )
        assert await run_call(source, side, "count-1") == "A-1: 3 in north"
    # The source's listing, then the call's connection lists the tool to send its header and sends again;
    # the refused first request never reached the tool.
    assert log_lines(log) == ["tools/list", "tools/list", "tools/call count_in_warehouse north"]


async def test_a_connection_dropped_mid_call_interrupts_the_call(tmp_path: Path) -> None:
    stdio_log, http_log = tmp_path / "stdio.log", tmp_path / "http.log"
    async with await start_mcp_inventory_http_server(http_log) as doomed:
        source = McpToolSource(
            [stdio_server("local", stdio_log), McpHttpServer("remote", doomed.url, trust_annotations=True)]
        )
        side = await defer(
            source,
            [
                ("local-1", "local__restock_and_crash", '{"sku": "A-1"}'),
                ("remote-1", "remote__restock_and_crash", '{"sku": "B-2"}'),
            ],
        )
        with pytest.raises(McpToolCallInterruptedError, match="JSON-RPC error -32000: Connection closed"):
            await run_call(source, side, "local-1")
        with pytest.raises(McpToolCallInterruptedError, match="the connection failed: RemoteProtocolError"):
            await run_call(source, side, "remote-1")
        await wait_until("the crashed HTTP server's exit", lambda: not doomed.is_running)
    assert log_lines(stdio_log)[-1] == "tools/call restock_and_crash A-1"
    assert log_lines(http_log)[-1] == "tools/call restock_and_crash B-2"


async def test_a_call_that_was_never_sent_fails_for_the_model_and_says_the_tool_did_not_run(
    warehouse: Warehouse, tmp_path: Path
) -> None:
    log = tmp_path / "requests.log"
    source = McpToolSource([stdio_server("inventory", log)])
    side = await defer(source, [("count-1", "inventory__count_items", '{"sku": "A-1"}')])
    listing = log_lines(log)
    record = side.records["count-1"]
    reference = McpToolReference.decode(record.tool_source_reference)
    assert reference is not None

    async def call_with(worker_source: McpToolSource, **changes: str) -> ToolExecutionError:
        side.records["count-1"] = dataclasses.replace(record, **changes)
        with pytest.raises(ToolExecutionError) as raised:
            await run_call(worker_source, side, "count-1")
        return raised.value

    # The same call, on Workers whose server configuration cannot serve it.
    missing = McpToolSource([McpStdioServer("inventory", str(tmp_path / "no-such-server"))])
    error = await call_with(missing)
    assert error.message.startswith(
        "MCP server 'inventory' could not be reached, so 'count_items' did not run:"
    )
    assert "FileNotFoundError" in error.message
    closed = McpToolSource([McpHttpServer("inventory", "http://127.0.0.1:1/mcp")])
    assert "ConnectError" in (await call_with(closed)).message
    silent = McpToolSource(
        [McpStdioServer("inventory", sys.executable, ["-c", "import time; time.sleep(60)"])],
        handshake_timeout=timedelta(seconds=1),
    )
    assert (await call_with(silent)).message == (
        "MCP server 'inventory' could not be reached, so 'count_items' did not run: the server did not "
        "finish its handshake within 1 seconds"
    )
    elsewhere = McpToolSource([McpHttpServer("warehouse", warehouse.server.url, trust_annotations=True)])
    assert (await call_with(elsewhere)).message == (
        "MCP server 'inventory' is not configured on this Worker, so 'count_items' did not run"
    )
    not_an_object = await call_with(source, arguments='["A-1"]')
    assert (
        not_an_object.message
        == "arguments must be a JSON object; the arguments of 'inventory__count_items' are a JSON array"
    )
    assert log_lines(log) == listing, "a call that failed before it was sent reached the server"
