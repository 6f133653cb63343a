"""MCP servers on the agent: their tools are gated, become tool Steps, and get effects from their annotations
only when the runner trusts them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, FunctionTool
from agents.mcp import MCPServerStdio
from dex_agents.runner import ToolCallsRequested, ToolPolicy, TurnCompleted
from dex_agents.testing import SessionSide, mcp_inventory_server_command
from dex_agents.values import ToolCallStatus, ToolEffect
from mcp.types import ToolAnnotations

from dex_agents_openai_agents import OpenAIAgentsRunner, framework_effect, idempotency_key_meta
from dex_agents_openai_agents.testing import ScriptedResponsesModel, call_item, text_item


def _tool_with(annotations: object) -> FunctionTool:
    async def invoke(context: object, arguments: str) -> str:
        return ""

    tool = FunctionTool(name="t", description="", params_json_schema={}, on_invoke_tool=invoke)
    setattr(tool, "_mcp_annotations", annotations)  # noqa: B010 - what the SDK sets on MCP tools
    return tool


def test_annotations_map_to_effects() -> None:
    assert framework_effect(_tool_with(ToolAnnotations(read_only_hint=True))) is ToolEffect.READ
    assert framework_effect(_tool_with(ToolAnnotations(idempotent_hint=True, destructive_hint=True))) is (
        ToolEffect.IDEMPOTENT_WRITE
    )
    assert framework_effect(_tool_with({"readOnlyHint": True})) is ToolEffect.READ
    assert framework_effect(_tool_with(ToolAnnotations(read_only_hint=False))) is None
    assert framework_effect(_tool_with(None)) is None
    assert framework_effect(None) is None


def _log_lines(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def _inventory_server(log: Path, **options: Any) -> MCPServerStdio:
    """The kit's inventory server on stdio, attached the SDK's way."""
    command = mcp_inventory_server_command(log)
    return MCPServerStdio(
        params={"command": command.command, "args": command.args, "env": {**os.environ, **command.env}},
        name="inventory",
        # The SDK's 5 s default covers starting the server process, which a loaded CI machine can exceed.
        client_session_timeout_seconds=30,
        **options,
    )


def _inventory_calls() -> list[Any]:
    return [
        call_item("count_items", {"sku": "A-1"}, "call-1"),
        call_item("set_stock", {"sku": "A-1", "count": 9}, "call-2"),
        call_item("order_more", {"sku": "A-1"}, "call-3"),
    ]


async def test_an_untrusted_servers_annotations_leave_its_tools_unclassified_and_waiting_for_approval(
    tmp_path: Path,
) -> None:
    model = ScriptedResponsesModel.from_answers([_inventory_calls()])
    async with _inventory_server(tmp_path / "mcp.log") as server:
        runner = OpenAIAgentsRunner(Agent(name="stock", model=model, mcp_servers=[server]))
        session = SessionSide()
        session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))

        requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    # count_items claims readOnlyHint, but nothing in the Worker's code trusts the server that says so.
    assert {c.tool_name: c.policy for c in requested.tool_calls} == {
        "count_items": ToolPolicy(ToolEffect.UNCLASSIFIED),
        "set_stock": ToolPolicy(ToolEffect.UNCLASSIFIED),
        "order_more": ToolPolicy(ToolEffect.UNCLASSIFIED),
    }
    assert all(c.policy.is_approval_required for c in requested.tool_calls)


async def test_mcp_tools_become_tool_steps_with_policies_from_trusted_annotations(tmp_path: Path) -> None:
    log = tmp_path / "mcp.log"
    server = _inventory_server(log)
    model = ScriptedResponsesModel.from_answers([_inventory_calls(), [text_item("Stock updated.")]])
    async with server:
        runner = OpenAIAgentsRunner(
            Agent(name="stock", model=model, mcp_servers=[server]), trust_mcp_annotations=True
        )
        # An explicit policy still wins over the server's annotations.
        session = SessionSide(
            tool_policies={"order_more": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)}
        )
        session.start_turn(runner.build_user_message("Check A-1, set it to 9, order more"))

        requested = await runner.run_model_step(session.context())

        assert isinstance(requested, ToolCallsRequested)
        assert [(c.tool_name, c.policy) for c in requested.tool_calls] == [
            ("count_items", ToolPolicy(ToolEffect.READ)),
            # idempotentHint makes it safe to retry; destructiveHint still has it ask first.
            ("set_stock", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)),
            ("order_more", ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, False)),
        ]
        assert set(_log_lines(log)) == {"tools/list"}, "a model Step only lists the server's tools"

        session.defer(requested)
        outputs: dict[str, str] = {}
        for tool_call_id in ["call-1", "call-2", "call-3"]:
            before = _log_lines(log)
            outputs[tool_call_id] = await session.execute(runner, tool_call_id)
            calls = [line for line in _log_lines(log)[len(before) :] if line.startswith("tools/call")]
            assert calls == [f"tools/call {session.records[tool_call_id].tool_name}"], "one call per Step"
            session.finish(tool_call_id, ToolCallStatus.SUCCEEDED, output=outputs[tool_call_id])
        assert outputs == {"call-1": "A-1: 7 in stock", "call-2": "A-1 set to 9", "call-3": "ordered A-1"}

        final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.calls) == 2
    assert model.calls[1].tool_outputs() == outputs
    assert len([line for line in _log_lines(log) if line.startswith("tools/call")]) == 3


async def test_an_sdk_mcp_server_with_the_meta_resolver_sends_the_sessions_idempotency_key(
    tmp_path: Path,
) -> None:
    log = tmp_path / "mcp.log"
    server = _inventory_server(log, tool_meta_resolver=idempotency_key_meta)
    model = ScriptedResponsesModel.from_answers(
        [[call_item("reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1")]]
    )
    async with server:
        runner = OpenAIAgentsRunner(Agent(name="stock", model=model, mcp_servers=[server]))
        session = SessionSide()
        session.start_turn(runner.build_user_message("Reserve two of A-1"))
        requested = await runner.run_model_step(session.context())
        assert isinstance(requested, ToolCallsRequested)
        session.defer(requested)
        # reserve_stock takes effect, then its server dies before it answers: the Step attempt fails, and
        # the session's retry would send the same key (McpToolSource reconnects for it; this server is gone).
        with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a dropped connection
            await session.execute(runner, "reserve-1")

    # The server logs the key it read from `_meta` under the core's wire name ("-" for none).
    key = f"{session.flow_id}/turn-1/reserve-1"
    assert [line for line in _log_lines(log) if line.startswith("tools/call")] == [
        f"tools/call reserve_stock A-1 {key}"
    ]
