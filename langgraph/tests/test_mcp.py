"""MCP tools in process: an `McpToolSource` on the kit's stdio inventory server, and tools of your own that
carry MCP annotations in their metadata (as langchain-mcp-adapters' do)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dex_agents import ToolExecutionError
from dex_agents.mcp import McpToolCallInterruptedError, McpToolSource
from dex_agents.runner import ToolCallsRequested, ToolPolicy, TurnCompleted
from dex_agents.testing import STATE_DIR_ENV, SessionSide
from dex_agents.values import ToolCallStatus, ToolEffect
from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner, framework_effect
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.session_tools_agents import mcp_log_path, mcp_source
from tests.support import respond, tool_call


def test_a_tools_metadata_gives_its_effect() -> None:
    # langchain-mcp-adapters copies a server tool's annotations into `BaseTool.metadata`; `framework_effect`
    # reports what they declare, which the runner uses only when it trusts them.
    def annotated(metadata: dict[str, Any] | None) -> Any:
        @tool
        def probe() -> str:
            """A tool."""
            return ""

        probe.metadata = metadata
        return probe

    assert framework_effect(annotated({"readOnlyHint": True})) is ToolEffect.READ
    assert framework_effect(annotated({"idempotentHint": True, "destructiveHint": True})) is (
        ToolEffect.IDEMPOTENT_WRITE
    )
    assert framework_effect(annotated({"read_only_hint": True})) is ToolEffect.READ
    assert framework_effect(annotated({"readOnlyHint": False})) is None
    assert framework_effect(annotated(None)) is None
    assert framework_effect(None) is None


def _runner(
    model: ScriptedChatModel,
    source: McpToolSource | None,
    tools: list[BaseTool] | None = None,
    *,
    trust_mcp_annotations: bool = False,
) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=tools or [], middleware=[DexToolGate()], checkpointer=checkpointer)

    return LangGraphRunner(build, mcp_tools=source, trust_mcp_annotations=trust_mcp_annotations)


def _annotated_tools() -> list[BaseTool]:
    """Graph tools annotated as langchain-mcp-adapters annotates a server's tools."""

    @tool
    def count_items(sku: str) -> str:
        """Count the items of a SKU."""
        return f"{sku}: 7 in stock"

    @tool
    def set_stock(sku: str) -> str:
        """Set the stock of a SKU."""
        return f"{sku} set"

    @tool
    def tag_item(sku: str) -> str:
        """Tag a SKU."""
        return f"{sku} tagged"

    count_items.metadata = {"readOnlyHint": True}
    set_stock.metadata = {"idempotentHint": True, "destructiveHint": True}
    tag_item.metadata = {"idempotentHint": True, "destructiveHint": False}
    return [count_items, set_stock, tag_item]


@pytest.mark.parametrize(
    ("trust", "expected"),
    [
        # Nothing in the Worker's code trusts the annotations: count_items' readOnlyHint does not count.
        (
            False,
            {
                "count_items": ToolPolicy(ToolEffect.UNCLASSIFIED),
                "set_stock": ToolPolicy(ToolEffect.UNCLASSIFIED),
                "tag_item": ToolPolicy(ToolEffect.UNCLASSIFIED),
            },
        ),
        # Trusted, a destructive tool still asks, however safe it is to retry.
        (
            True,
            {
                "count_items": ToolPolicy(ToolEffect.READ),
                "set_stock": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
                "tag_item": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            },
        ),
    ],
)
async def test_graph_tools_annotations_decide_their_policies_only_when_the_runner_trusts_them(
    trust: bool, expected: dict[str, ToolPolicy]
) -> None:
    calls = [tool_call(name, {"sku": "A-1"}, f"{name}-1") for name in expected]
    model = ScriptedChatModel(responses=[respond("", *calls)])
    runner = _runner(model, None, _annotated_tools(), trust_mcp_annotations=trust)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Count, set and tag A-1"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert {call.tool_name: call.policy for call in requested.tool_calls} == expected
    approvals = {call.tool_name: call.policy.is_approval_required for call in requested.tool_calls}
    assert approvals == {"count_items": not trust, "set_stock": True, "tag_item": not trust}


def _log(state_dir: Path) -> list[str]:
    path = mcp_log_path(state_dir)
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path))
    return tmp_path


async def test_source_tools_are_offered_and_each_call_runs_through_the_source_in_its_tool_step(
    state_dir: Path,
) -> None:
    model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("inventory__count_items", {"sku": "A-1"}, "count-1"),
                tool_call("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1"),
                tool_call("inventory__order_more", {"sku": "A-1"}, "order-1"),
            ),
            respond("Reserved two of A-1."),
        ]
    )
    runner = _runner(model, mcp_source(state_dir, ""))
    # An explicit policy wins over the server's annotations (order_more has none).
    session = SessionSide(
        tool_policies={"inventory__order_more": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)}
    )
    session.start_turn(runner.build_user_message("Count A-1, reserve two, order more"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert {"inventory__count_items", "inventory__reserve_stock"} <= set(model.offered_tools[0])
    assert [(call.tool_name, call.policy.effect) for call in requested.tool_calls] == [
        ("inventory__count_items", ToolEffect.READ),
        ("inventory__reserve_stock", ToolEffect.IDEMPOTENT_WRITE),
        ("inventory__order_more", ToolEffect.NON_IDEMPOTENT_WRITE),
    ]
    assert all(call.tool_source_reference for call in requested.tool_calls), "the tool Step needs no listing"
    assert _log(state_dir) == ["tools/list"], "the model Step lists the tools and calls none"

    session.defer(requested)
    assert await session.execute(runner, "count-1") == "A-1: 7 in stock"
    session.finish("count-1", ToolCallStatus.SUCCEEDED, output="A-1: 7 in stock")
    # The first request reserves and the server dies before it answers; the retried attempt sends the same
    # idempotency key in `_meta`, and the server answers without reserving again.
    with pytest.raises(McpToolCallInterruptedError):
        await session.execute(runner, "reserve-1")
    assert await session.execute(runner, "reserve-1") == "reserved 2 of A-1"
    session.finish("reserve-1", ToolCallStatus.SUCCEEDED, output="reserved 2 of A-1")
    session.finish("order-1", ToolCallStatus.REJECTED)
    key = session.execution("reserve-1").idempotency_key
    assert [line for line in _log(state_dir) if line.startswith("tools/call")] == [
        "tools/call count_items",
        f"tools/call reserve_stock A-1 {key}",
        f"tools/call reserve_stock A-1 {key}",
    ], "a rejected call never reaches the server"

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.input_texts(2)[-3:] == [
        "tool inventory__count_items [count-1] success: A-1: 7 in stock",
        "tool inventory__reserve_stock [reserve-1] success: reserved 2 of A-1",
        "tool inventory__order_more [order-1] error: The user rejected this tool call.",
    ]


async def test_an_mcp_error_result_is_a_failure_the_model_sees(state_dir: Path) -> None:
    model = ScriptedChatModel(
        responses=[respond("", tool_call("inventory__audit_stock", {"sku": "A-1"}, "a-1"))]
    )
    runner = _runner(model, mcp_source(state_dir, ""))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Audit A-1"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    with pytest.raises(ToolExecutionError, match="no auditor available for A-1"):
        await session.execute(runner, "a-1")
    assert _log(state_dir).count("tools/call audit_stock") == 1


async def test_a_graph_tool_keeps_its_name_over_an_mcp_tool_of_the_same_name(
    state_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @tool
    def inventory__count_items(sku: str) -> str:
        """Count items locally."""
        return f"{sku}: counted here"

    model = ScriptedChatModel(
        responses=[respond("", tool_call("inventory__count_items", {"sku": "B"}, "c-1"))]
    )
    runner = _runner(model, mcp_source(state_dir, ""), tools=[inventory__count_items])
    session = SessionSide()
    session.start_turn(runner.build_user_message("Count B"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert model.offered_tools[0].count("inventory__count_items") == 1
    assert "MCP tool 'inventory__count_items' is left out" in caplog.text
    [call] = requested.tool_calls
    assert call.tool_source_reference is None
    session.defer(requested)
    assert await session.execute(runner, "c-1") == "B: counted here"
    assert "tools/call count_items" not in _log(state_dir)
