"""An `McpToolSource` given to the runner, against the core kit's inventory server on stdio and HTTP.

The source's tools (`inventory__<tool>` on stdio, `shipping__<tool>` on Streamable HTTP) go through the
runner's hook like the user's own: a read runs inline in `RunModel`, every other call is a Step that
sends its one `tools/call` with the session's idempotency key in `_meta`, and a tool that answers with an
MCP task is polled in the session's `PollToolTask` Steps. The shared `run_mcp_inventory_scenario` does not
fit the harness: its model asks for a read and two writes in one response, of which the CLI keeps one
waiting and the runner refuses the other (see "One deferred call per response" in the docs site's
`docs/pages/frameworks/claude-agent-sdk/index.md`).

The official server-memory (from npm, on stdio) has a Flow of its own (``memory__<tool>``): its unhinted
and its trusted destructive tools wait for approval, and its read runs inline between them.
"""

from __future__ import annotations

import pytest
from dex_agents import AgentInterrupt, ToolEffect
from dex_agents.testing import (
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    official_mcp_server_version,
    read_mcp_wire_log,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)

from tests.conftest import Features
from tests.feature_agents import mcp_log, memory_graph_path, memory_wire_log

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_read_runs_inline_and_each_write_is_a_step_with_the_key_in_meta(features: Features) -> None:
    stack, sessions = features.stack, features.mcp
    session = stack.new_session_id("mcp")
    sku = {"sku": "K-9"}
    stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(ScriptedToolCall("inventory__count_items", sku, "count-1"),)),
                ScriptedResponse(
                    tool_calls=(ScriptedToolCall("inventory__set_stock", {**sku, "count": 3}, "set-1"),)
                ),
                ScriptedResponse(
                    tool_calls=(
                        ScriptedToolCall("inventory__reserve_stock", {**sku, "count": 2}, "reserve-1"),
                    )
                ),
                ScriptedResponse(tool_calls=(ScriptedToolCall("inventory__order_more", sku, "order-1"),)),
                ScriptedResponse(text="Stock fixed and more ordered."),
            ]
        ],
    )
    await sessions.start_session(session, "Fix the stock of K-9")

    async def approval(tool_call_id: str, description: str) -> AgentInterrupt:
        return await wait_for_agent_snapshot(
            sessions,
            session,
            lambda snapshot: next(
                (i for i in snapshot.pending_interrupts if i.tool_call_id == tool_call_id), None
            ),
            description=description,
            timeout=120,
        )

    # The trusted server says set_stock is idempotent and destructive: retried with the key, but asked first.
    interrupt = await approval("set-1", "the approval of set_stock")
    assert "tools/call set_stock" not in mcp_log(stack.state_dir).read_text()
    assert await sessions.resolve_interrupt(session, interrupt.interrupt_id, approved=True)
    # No hint and no policy: unclassified, so the call waits for approval and has not reached the server.
    interrupt = await approval("order-1", "the approval of order_more")
    snapshot = await sessions.get_agent_snapshot(session)
    assert [(call.tool_name, call.effect) for call in snapshot.tool_calls] == [
        ("inventory__set_stock", ToolEffect.IDEMPOTENT_WRITE),
        ("inventory__reserve_stock", ToolEffect.IDEMPOTENT_WRITE),
        ("inventory__order_more", ToolEffect.UNCLASSIFIED),
    ]
    assert "tools/call order_more" not in mcp_log(stack.state_dir).read_text()
    assert await sessions.resolve_interrupt(session, interrupt.interrupt_id, approved=True)
    done = await wait_for_turn_end(sessions, session, 1, timeout=120)
    assert done.state is not None and done.state.last_turn_error is None, done.state

    steps = executed_step_types(await stack.read_step_history(session))
    # readOnlyHint: inline in the first RunModel; idempotentHint: a CallTool Step each, set_stock's after
    # its approval (reserve_stock's first attempt dies with its server, and the Step's second attempt sends
    # the same key); no hint: approval, then a single attempt.
    assert [step for step in steps if step.startswith(("Call", "Await"))] == [
        "AwaitToolApproval",
        "CallTool",
        "CallTool",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
    ], steps
    calls = [
        line for line in mcp_log(stack.state_dir).read_text().splitlines() if line.startswith("tools/call")
    ]
    key = f"{session}/turn-1/reserve-1"
    assert calls == [
        "tools/call count_items",
        "tools/call set_stock",
        f"tools/call reserve_stock K-9 {key}",
        f"tools/call reserve_stock K-9 {key}",
        "tools/call order_more",
    ]
    last_input = features.last_model_input(session)
    assert "tool inventory__count_items [count-1] ok: K-9: 7 in stock" in last_input
    assert "tool inventory__reserve_stock [reserve-1] ok: reserved 2 of K-9" in last_input
    assert "tool inventory__order_more [order-1] ok: ordered K-9" in last_input


async def test_an_http_tool_that_answers_with_a_task_is_polled_in_the_sessions_steps(
    features: Features,
) -> None:
    stack, sessions = features.stack, features.mcp
    ship = ScriptedToolCall(
        "shipping__ship_order", {"sku": "K-9", "polls": 2, "poll_interval_ms": 1000}, "ship-1"
    )
    session, _ = await features.one_call_turn(sessions, "mcp-task", "Ship K-9", ship, "K-9 is on its way.")

    requests = [line for line in features.shipping_requests() if "ship_order K-9" in line]
    # One task, created by the one tools/call, then read with tasks/get until it completed.
    assert requests[:2] == ["tools/call ship_order K-9", "tasks/create ship_order K-9"], requests
    assert [line.rsplit(" ", 1)[-1] for line in requests[2:]] == ["working", "completed"], requests
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps.count("CallTool") == 1 and steps.count("PollToolTask") >= 1, steps
    assert "tool shipping__ship_order [ship-1] ok: shipped K-9" in features.last_model_input(session)


async def test_official_mcp_server_memory_asks_before_unhinted_and_destructive_tools_and_reads_between(
    features: Features,
) -> None:
    stack, sessions = features.stack, features.official
    session = stack.new_session_id("memory")
    name = f"K-9 of {session}"
    entity = {"name": name, "entityType": "sku", "observations": ["7 in stock"]}
    create = ScriptedToolCall("memory__create_entities", {"entities": [entity]}, "create-1")
    read = ScriptedToolCall("memory__read_graph", {}, "read-1")
    delete = ScriptedToolCall("memory__delete_entities", {"entityNames": [name]}, "delete-1")
    script = [
        ScriptedResponse(tool_calls=(create,)),
        ScriptedResponse(tool_calls=(read,)),
        ScriptedResponse(tool_calls=(delete,)),
        ScriptedResponse(text="Forgotten."),
    ]
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
            timeout=120,
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
    done = await wait_for_turn_end(sessions, session, 1, timeout=120)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    print(f"\nserver-memory {official_mcp_server_version('server-memory')}: effects {effects}")
    # The read ran inline in RunModel, so it left no tool call record.
    assert effects == {"create-1": ToolEffect.UNCLASSIFIED, "delete-1": ToolEffect.IDEMPOTENT_WRITE}
    assert [sent(tool) for tool in ("create_entities", "read_graph", "delete_entities")] == [1, 1, 1]
    [read_graph] = [
        line
        for line in stack.invocations.model_calls(session)[-1].model_input
        if line.startswith("tool memory__read_graph [read-1] ok: ")
    ]
    print(f"read_graph: {read_graph!r}")
    assert name in read_graph and "7 in stock" in read_graph, read_graph
    assert name not in memory_graph_path(stack.state_dir).read_text(encoding="utf-8"), "the entity stays"
    steps = executed_step_types(await stack.read_step_history(session))
    print(f"Steps: {steps}")
    # Approval then a single attempt; approval then an idempotent CallTool (the read ran inline).
    assert [step for step in steps if step.startswith(("Call", "Await"))] == [
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "AwaitToolApproval",
        "CallTool",
    ], steps
