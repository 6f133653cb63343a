"""MCP toolsets: tools listed from a real stdio MCP server become tool Steps, with effects from their
annotations only when the runner trusts them."""

from __future__ import annotations

from pathlib import Path

from dex_agents import ToolCallsRequested, ToolCallStatus, ToolEffect, ToolPolicy, TurnCompleted
from dex_agents.testing import SessionSide, mcp_inventory_server_command
from fastmcp.client import Client
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import TextPart
from pydantic_ai.tools import ToolDefinition

from dex_agents_pydantic_ai import PydanticAiRunner, framework_effect
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.support import respond, tool_call

_INVENTORY_CALLS = (
    tool_call("count_items", {"sku": "A-1"}, "call-1"),
    tool_call("set_stock", {"sku": "A-1", "count": 9}, "call-2"),
    tool_call("order_more", {"sku": "A-1"}, "call-3"),
)


def _inventory_toolset(log: Path) -> MCPToolset:
    server = mcp_inventory_server_command(log)
    return MCPToolset(Client(StdioTransport(server.command, server.args, env=server.env, keep_alive=False)))


def test_annotations_map_to_effects() -> None:
    def definition(annotations: dict[str, object] | None) -> ToolDefinition:
        return ToolDefinition(name="t", metadata={"annotations": annotations})

    assert framework_effect(definition({"readOnlyHint": True})) is ToolEffect.READ
    assert framework_effect(definition({"idempotentHint": True, "destructiveHint": True})) is (
        ToolEffect.IDEMPOTENT_WRITE
    )
    assert framework_effect(definition({"readOnlyHint": False})) is None
    assert framework_effect(definition(None)) is None
    assert framework_effect(ToolDefinition(name="plain")) is None


async def test_an_untrusted_servers_annotations_leave_its_tools_unclassified_and_waiting_for_approval(
    tmp_path: Path,
) -> None:
    agent = Agent(
        ScriptedModel([respond(*_INVENTORY_CALLS)]), toolsets=[_inventory_toolset(tmp_path / "mcp.log")]
    )
    runner = PydanticAiRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    # count_items claims readOnlyHint, but nothing in the Worker's code trusts the server that says so.
    assert {call.tool_name: call.policy for call in requested.tool_calls} == {
        "count_items": ToolPolicy(ToolEffect.UNCLASSIFIED),
        "set_stock": ToolPolicy(ToolEffect.UNCLASSIFIED),
        "order_more": ToolPolicy(ToolEffect.UNCLASSIFIED),
    }
    assert all(call.policy.is_approval_required for call in requested.tool_calls)


async def test_mcp_tools_become_tool_steps_with_policies_from_trusted_annotations(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    model = ScriptedModel([respond(*_INVENTORY_CALLS), respond(TextPart("Stock updated."))])
    agent = Agent(model, toolsets=[_inventory_toolset(log)])
    runner = PydanticAiRunner(agent, trust_mcp_annotations=True)
    # An explicit policy still wins over the server's annotations.
    session = SessionSide(tool_policies={"order_more": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)})
    session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert [(call.tool_name, call.policy) for call in requested.tool_calls] == [
        ("count_items", ToolPolicy(ToolEffect.READ)),
        # idempotentHint makes it safe to retry; destructiveHint still has it ask first.
        ("set_stock", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)),
        ("order_more", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)),
    ]
    assert set(log.read_text().splitlines()) == {"tools/list"}, "a model Step only lists the server's tools"

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

    assert isinstance(final, TurnCompleted)
    assert [part.model_response_str() for part in model.calls[1].tool_returns] == [
        "A-1: 7 in stock",
        "A-1 set to 9",
        "ordered A-1",
    ]
    assert len([line for line in log.read_text().splitlines() if line.startswith("tools/call")]) == 3
