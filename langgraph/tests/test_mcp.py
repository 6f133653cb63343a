"""MCP tools from langchain-mcp-adapters, listed from the kit's real stdio server (run with this package's
mcp 1.x): tool Steps with effects from their annotations, and one `tools/call` per tool Step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dex_agents.runner import ToolCallsRequested, ToolExecutionError, ToolPolicy, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import ToolCallStatus, ToolEffect
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner, framework_effect
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import inventory_client, respond, tool_call


def test_a_tools_metadata_gives_its_effect() -> None:
    # langchain-mcp-adapters copies a server tool's annotations into `BaseTool.metadata`.
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
    assert framework_effect(annotated({"readOnlyHint": False})) is None
    assert framework_effect(annotated(None)) is None
    assert framework_effect(None) is None


async def test_mcp_tools_become_tool_steps_with_effects_from_their_annotations(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    log.touch()
    mcp_tools = await inventory_client(log).get_tools()
    model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("count_items", {"sku": "A-1"}, "call-1"),
                tool_call("set_stock", {"sku": "A-1", "count": 9}, "call-2"),
                tool_call("order_more", {"sku": "A-1"}, "call-3"),
            ),
            respond("Stock updated."),
        ]
    )

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=mcp_tools, middleware=[DexToolGate()], checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    # An explicit policy still wins over the server's annotations.
    session = SessionSide(tool_policies={"order_more": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)})
    session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))
    listed = log.read_text().splitlines()

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert [(call.tool_name, call.policy) for call in requested.tool_calls] == [
        ("count_items", ToolPolicy(ToolEffect.READ)),
        ("set_stock", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)),
        ("order_more", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)),
    ]
    assert set(listed) == {"tools/list"}
    assert log.read_text().splitlines() == listed, "the model Step sends the server nothing"

    session.defer(requested)
    outputs: dict[str, str] = {}
    for tool_call_id in ["call-1", "call-2", "call-3"]:
        before = log.read_text().splitlines()
        outputs[tool_call_id] = await session.execute(runner, tool_call_id)
        calls = [
            line for line in log.read_text().splitlines()[len(before) :] if line.startswith("tools/call")
        ]
        assert calls == [f"tools/call {session.records[tool_call_id].tool_name}"], (
            "one tools/call per tool Step"
        )
        session.finish(tool_call_id, ToolCallStatus.SUCCEEDED, output=outputs[tool_call_id])
    assert outputs == {"call-1": "A-1: 7 in stock", "call-2": "A-1 set to 9", "call-3": "ordered A-1"}

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.input_texts(2)[-3:] == [
        "tool count_items [call-1] success: A-1: 7 in stock",
        "tool set_stock [call-2] success: A-1 set to 9",
        "tool order_more [call-3] success: ordered A-1",
    ]
    assert len([line for line in log.read_text().splitlines() if line.startswith("tools/call")]) == 3


async def test_an_mcp_error_result_is_a_failure_the_model_sees(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    mcp_tools = await inventory_client(log).get_tools()
    model = ScriptedChatModel(responses=[respond("", tool_call("audit_stock", {"sku": "A-1"}, "call-1"))])

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=mcp_tools, middleware=[DexToolGate()], checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Audit A-1"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    with pytest.raises(ToolExecutionError, match="no auditor available for A-1"):
        await session.execute(runner, "call-1")
    assert log.read_text().splitlines().count("tools/call audit_stock") == 1
