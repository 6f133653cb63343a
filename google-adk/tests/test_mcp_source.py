"""`McpToolSource` tools as ADK tools in whole sessions: a devserver, a Worker child, the test kit's
inventory server on stdio and on Streamable HTTP, and the official server-memory from npm on stdio.

Each MCP call runs in its own tool Step through the source, with the session's idempotency key in
``_meta``; a task an HTTP server starts is polled in the session's own `PollToolTask` Steps; server-memory's
unhinted and destructive tools wait for approval although its annotations are trusted.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from dex_agents import AgentEventType, AgentSessionClient, AgentSnapshot, MessageRole, ToolEffect
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    official_mcp_server_version,
    read_agent_events,
    read_mcp_wire_log,
    start_mcp_inventory_http_server,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)

from tests.matrix_spec import PACKAGE_DIR
from tests.mcp_source_agents import (
    build_mcp_source_flow,
    memory_graph_path,
    memory_wire_log,
    stdio_log_path,
    write_http_server_url,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class McpSource:
    stack: AgentTestStack
    sessions: AgentSessionClient
    http_log: Path

    def requests(self, prefix: str, *, stdio: bool = True) -> list[str]:
        log = stdio_log_path(self.stack.state_dir) if stdio else self.http_log
        lines = log.read_text().splitlines() if log.exists() else []
        return [line for line in lines if line.startswith(prefix)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpSource]:
    state_dir = tmp_path_factory.mktemp("mcp-source")
    http_log = state_dir / "mcp-http-requests.log"
    async with await start_mcp_inventory_http_server(http_log) as shipping:
        write_http_server_url(state_dir, shipping.url)
        flow = build_mcp_source_flow(state_dir)
        async with AgentTestStack(
            state_dir, [flow], "tests.mcp_source_agents", worker_cwd=PACKAGE_DIR
        ) as stack:
            await stack.start_worker()
            yield McpSource(stack, stack.sessions(flow), http_log)


def _tool_outputs(snapshot: AgentSnapshot) -> dict[str, str]:
    return {
        message.tool_call_id: message.tool_output
        for message in snapshot.messages
        if message.role is MessageRole.TOOL and message.tool_call_id and message.tool_output
    }


async def test_a_read_and_an_approved_write_run_as_steps_with_the_idempotency_key_in_meta(
    mcp: McpSource,
) -> None:
    session = mcp.stack.new_session_id("mcp-source")
    calls = (
        ScriptedToolCall("inventory__count_items", {"sku": "A-1"}, "count-1"),
        ScriptedToolCall("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1"),
        ScriptedToolCall("inventory__order_more", {"sku": "A-1"}, "order-1"),
    )
    mcp.stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Done.")]]
    )
    await mcp.sessions.start_session(session, "Check A-1, reserve 2 and order more")

    def approval_pending(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        final = {call.tool_call_id for call in snapshot.tool_calls if call.is_final}
        return snapshot if snapshot.pending_interrupts and final == {"count-1", "reserve-1"} else None

    waiting = await wait_for_agent_snapshot(
        mcp.sessions, session, approval_pending, description="order-1's approval"
    )
    records = {call.tool_call_id: call for call in waiting.tool_calls}
    assert {call_id: record.effect for call_id, record in records.items()} == {
        "count-1": ToolEffect.READ,
        "reserve-1": ToolEffect.IDEMPOTENT_WRITE,
        "order-1": ToolEffect.UNCLASSIFIED,
    }, "effects from the tools' annotations"
    assert mcp.requests("tools/call order_more") == [], "order_more reached the server before its approval"
    assert await mcp.sessions.resolve_interrupt(session, "order-1", approved=True)
    done = await wait_for_turn_end(mcp.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert _tool_outputs(done) == {
        "count-1": "A-1: 7 in stock",
        "reserve-1": "reserved 2 of A-1",
        "order-1": "ordered A-1",
    }
    # reserve_stock's server died after its first request; CallTool sent it again with the same key.
    key = f"{session}/turn-1/reserve-1"
    assert mcp.requests("tools/call reserve_stock") == [f"tools/call reserve_stock A-1 {key}"] * 2
    assert mcp.requests("tools/call count_items") == ["tools/call count_items"]
    assert mcp.requests("tools/call order_more") == ["tools/call order_more"]
    first, second = mcp.stack.invocations.model_calls(session)
    assert {"lookup_order", "inventory__count_items", "shipping__ship_order"} <= set(first.offered_tools), (
        "the agent's own tools and every server's tools are offered",
        first.offered_tools,
    )
    assert '{"result":"reserved 2 of A-1"}' in second.model_input_text, second.model_input_text
    history = await mcp.stack.read_step_history(session)
    expected = ["StartAgentSession", "RunModel", "CallTool", "CallTool", "AwaitToolApproval"]
    expected += ["CallSingleAttemptTool", "ResumeTurn", "RunModel"]
    assert sorted(executed_step_types(history)) == sorted(expected)
    [reserve] = [
        entry
        for entry in history
        if entry.step_type == "CallTool"
        and entry.step_input == "reserve-1"
        and entry.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert reserve.final_attempt == 2


async def test_an_http_servers_task_is_polled_in_the_sessions_own_steps(mcp: McpSource) -> None:
    session = mcp.stack.new_session_id("mcp-source-task")
    ship = ScriptedToolCall("shipping__ship_order", {"sku": "K-1", "polls": 2}, "ship-1")
    mcp.stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=(ship,)), ScriptedResponse(text="Shipped.")]]
    )
    await mcp.sessions.start_session(session, "Ship K-1")
    done = await wait_for_turn_end(mcp.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert _tool_outputs(done) == {"ship-1": "shipped K-1"}
    assert mcp.requests("tools/call ship_order", stdio=False) == ["tools/call ship_order K-1"]
    assert mcp.requests("tasks/get ship_order K-1", stdio=False) == [
        "tasks/get ship_order K-1 working",
        "tasks/get ship_order K-1 completed",
    ]
    steps = executed_step_types(await mcp.stack.read_step_history(session))
    assert steps.count("PollToolTask") == 2 and steps.count("CallTool") == 1, steps
    events = await read_agent_events(mcp.sessions, session)
    started = [
        json.loads(event.payload) for event in events if event.type == AgentEventType.TOOL_TASK_STARTED
    ]
    assert [(item["tool_call_id"], item["tool_name"]) for item in started] == [
        ("ship-1", "shipping__ship_order")
    ]
    assert "shipped K-1" in mcp.stack.invocations.model_calls(session)[-1].model_input_text


async def test_official_mcp_server_memory_asks_before_unhinted_and_destructive_tools_and_reads_between(
    mcp: McpSource,
) -> None:
    stack, sessions = mcp.stack, mcp.sessions
    session = stack.new_session_id("memory")
    name = f"K-9 of {session}"
    entity = {"name": name, "entityType": "sku", "observations": ["7 in stock"]}
    turn = [
        ScriptedToolCall("memory__create_entities", {"entities": [entity]}, "create-1"),
        ScriptedToolCall("memory__read_graph", {}, "read-1"),
        ScriptedToolCall("memory__delete_entities", {"entityNames": [name]}, "delete-1"),
    ]
    script = [ScriptedResponse(tool_calls=(call,)) for call in turn] + [ScriptedResponse(text="Forgotten.")]
    stack.scripts.set_turns(session, [script])
    await sessions.start_session(session, "Remember K-9, show the graph, then forget K-9")

    def sent(tool: str) -> int:
        wire = read_mcp_wire_log(memory_wire_log(stack.state_dir))
        requests = [m for m in wire if m.direction == "client" and m.method == "tools/call"]
        return sum(1 for request in requests if request.params.get("name") == tool)

    async def approval(tool_call_id: str) -> dict[str, ToolEffect | None]:
        snapshot = await wait_for_agent_snapshot(
            sessions,
            session,
            lambda s: s if tool_call_id in {i.tool_call_id for i in s.pending_interrupts} else None,
            description=f"{tool_call_id}'s approval",
        )
        return {call.tool_call_id: call.effect for call in snapshot.tool_calls}

    # No hint classifies create_entities: unclassified, so a person approves it before it runs.
    effects = await approval("create-1")
    assert sent("create_entities") == 0, "create_entities reached the server before its approval"
    assert await sessions.resolve_interrupt(session, "create-1", approved=True)
    # delete_entities is idempotent by its trusted hints, and destructive, so it asks too.
    effects |= await approval("delete-1")
    assert sent("delete_entities") == 0, "delete_entities reached the server before its approval"
    assert await sessions.resolve_interrupt(session, "delete-1", approved=True)
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    print(f"\nserver-memory {official_mcp_server_version('server-memory')}: effects {effects}")
    assert effects == {
        "create-1": ToolEffect.UNCLASSIFIED,
        "read-1": ToolEffect.READ,
        "delete-1": ToolEffect.IDEMPOTENT_WRITE,
    }
    assert [sent(tool) for tool in ("create_entities", "read_graph", "delete_entities")] == [1, 1, 1]
    outputs = _tool_outputs(done)
    print(f"read_graph: {outputs['read-1']!r}")
    assert name in outputs["read-1"] and "7 in stock" in outputs["read-1"], outputs
    assert name not in memory_graph_path(stack.state_dir).read_text(encoding="utf-8"), "the entity stays"
    steps = executed_step_types(await stack.read_step_history(session))
    print(f"Steps: {steps}")
    # Approval then a single attempt; the read; approval then an idempotent CallTool.
    assert [step for step in steps if step.startswith(("Call", "Await"))] == [
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "CallTool",
        "AwaitToolApproval",
        "CallTool",
    ], steps
