"""MCP toolsets: tools listed from a real stdio MCP server become tool Steps, with effects from their
annotations only when the runner trusts them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from dex_agents.mcp import McpStdioServer, McpToolSource
from dex_agents.runner import ToolCallsRequested, ToolPolicy, TurnCompleted
from dex_agents.testing import SessionSide, mcp_inventory_server_command
from dex_agents.values import ToolCallStatus, ToolEffect
from google.adk.agents import LlmAgent
from google.adk.tools.mcp_tool.mcp_tool import McpTool

from dex_agents_google_adk import GoogleAdkRunner, McpCallInterruptedError, framework_effect
from tests.support import CannedLlm, call, inventory_toolset, respond


def test_annotations_map_to_effects() -> None:
    def tool(**hints: object) -> McpTool:
        # Only `raw_mcp_tool.annotations` is read; a stand-in keeps the test free of a live session.
        return SimpleNamespace(raw_mcp_tool=SimpleNamespace(annotations=SimpleNamespace(**hints)))  # type: ignore[return-value]

    assert framework_effect(tool(read_only_hint=True)) is ToolEffect.READ
    assert framework_effect(tool(idempotent_hint=True, destructive_hint=True)) is ToolEffect.IDEMPOTENT_WRITE
    assert framework_effect(tool(readOnlyHint=True)) is ToolEffect.READ, "mcp 1.x spelling"
    assert framework_effect(tool(read_only_hint=False)) is None
    assert framework_effect(None) is None


_INVENTORY_CALLS = (
    call("count_items", {"sku": "A-1"}, "call-1"),
    call("set_stock", {"sku": "A-1", "count": 9}, "call-2"),
    call("order_more", {"sku": "A-1"}, "call-3"),
)


async def test_an_untrusted_servers_annotations_leave_its_tools_unclassified_and_waiting_for_approval(
    tmp_path: Path,
) -> None:
    model = CannedLlm(responses=[respond(*_INVENTORY_CALLS)])
    toolset = inventory_toolset(tmp_path / "mcp.log")
    runner = GoogleAdkRunner(
        LlmAgent(name="inventory", model=model, instruction="Keep stock.", tools=[toolset])
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))

    try:
        requested = await runner.run_model_step(session.context())
    finally:
        await runner.close()

    assert isinstance(requested, ToolCallsRequested)
    # count_items claims readOnlyHint, but nothing in the Worker's code trusts the server that says so.
    assert {deferred.tool_name: deferred.policy for deferred in requested.tool_calls} == {
        "count_items": ToolPolicy(ToolEffect.UNCLASSIFIED),
        "set_stock": ToolPolicy(ToolEffect.UNCLASSIFIED),
        "order_more": ToolPolicy(ToolEffect.UNCLASSIFIED),
    }
    assert all(deferred.policy.is_approval_required for deferred in requested.tool_calls)


async def test_mcp_tools_become_tool_steps_with_policies_from_trusted_annotations(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    toolset = inventory_toolset(log)
    model = CannedLlm(responses=[respond(*_INVENTORY_CALLS), respond("Stock updated.")])
    runner = GoogleAdkRunner(
        LlmAgent(name="inventory", model=model, instruction="Keep stock.", tools=[toolset]),
        trust_mcp_annotations=True,
    )
    # An explicit policy still wins over the server's annotations.
    session = SessionSide(tool_policies={"order_more": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)})
    session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert [(deferred.tool_name, deferred.policy) for deferred in requested.tool_calls] == [
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
    assert all(
        expected in outputs[tool_call_id]
        for tool_call_id, expected in {
            "call-1": "A-1: 7 in stock",
            "call-2": "A-1 set to 9",
            "call-3": "ordered A-1",
        }.items()
    ), outputs

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    assert model.calls == 2
    # The model sees the MCP result exactly as ADK would have shown it after running the tool in process.
    assert model.responses_seen(2) == [json.loads(outputs[tool_call_id]) for tool_call_id in outputs]
    assert len([line for line in log.read_text().splitlines() if line.startswith("tools/call")]) == 3
    await runner.close()


async def test_parallel_tool_steps_share_one_mcp_toolset_safely(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    toolset = inventory_toolset(log)
    calls = [call("count_items", {"sku": f"S-{n}"}, f"call-{n}") for n in range(4)]
    model = CannedLlm(responses=[respond(*calls)])
    runner = GoogleAdkRunner(LlmAgent(name="inventory", model=model, instruction="Count.", tools=[toolset]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Count four SKUs"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    try:
        # A Worker runs the tool Steps of one response (and other sessions' Steps) concurrently.
        outputs = await asyncio.gather(*(session.execute(runner, f"call-{n}") for n in range(4)))
    finally:
        await runner.close()

    assert [f"S-{n}: 7 in stock" in output for n, output in enumerate(outputs)] == [True] * 4


async def test_an_mcp_call_without_a_result_fails_the_step_instead_of_succeeding(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    toolset = inventory_toolset(log)
    model = CannedLlm(responses=[respond(call("restock_and_crash", {"sku": "A-1"}, "call-1"))])
    runner = GoogleAdkRunner(LlmAgent(name="inventory", model=model, instruction="Restock.", tools=[toolset]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Restock A-1"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    try:
        # The call reached the server, which may have acted: the effect decides (retry or outcome_unknown).
        with pytest.raises(McpCallInterruptedError, match="MCP tool execution failed"):
            await session.execute(runner, "call-1")
    finally:
        await runner.close()
    assert "tools/call restock_and_crash A-1" in log.read_text()


def _source(log: Path, *, fail_listing: bool = False) -> McpToolSource:
    command = mcp_inventory_server_command(log, fail_listing=fail_listing)
    return McpToolSource(
        [McpStdioServer("inventory", command.command, command.args, env=command.env, trust_annotations=True)]
    )


async def test_a_source_tool_offered_by_its_mcp_schema_resumes_even_when_its_server_cannot_be_listed_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "mcp.log"
    model = CannedLlm(
        responses=[respond(call("inventory__count_items", {"sku": "A-1"}, "call-1")), respond("7 in stock.")]
    )
    agent = LlmAgent(name="inventory", model=model, instruction="Keep stock.")
    session = SessionSide()
    session.start_turn(GoogleAdkRunner(agent).build_user_message("How many A-1?"))
    first = GoogleAdkRunner(agent, mcp_tools=_source(log))

    requested = await first.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    [deferred] = requested.tool_calls
    assert (deferred.tool_name, deferred.policy) == ("inventory__count_items", ToolPolicy(ToolEffect.READ))
    # The declaration is the server's own JSON Schema of the arguments.
    schema = json.dumps(model.declarations[0]["inventory__count_items"])
    assert '"properties": {"sku"' in schema, schema
    session.defer(requested)
    output = await session.execute(first, "call-1")
    assert output == "A-1: 7 in stock"
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=output)

    # The turn resumes in another Worker, where the same server cannot be listed any more.
    second = GoogleAdkRunner(agent, mcp_tools=_source(log, fail_listing=True))
    final = await second.run_model_step(session.context())

    assert isinstance(final, TurnCompleted), final
    assert final.turn_error is None
    assert model.responses_seen(2) == [{"result": "A-1: 7 in stock"}]
    assert "inventory__count_items" not in model.offered_tools[1], (
        "a tool the server did not list is not offered"
    )
