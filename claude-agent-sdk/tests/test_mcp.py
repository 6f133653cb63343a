"""An `McpToolSource` given to the runner, against the core kit's inventory server on stdio and HTTP.

The source's tools (`inventory__<tool>` on stdio, `shipping__<tool>` on Streamable HTTP) go through the
runner's hook like the user's own: a read runs inline in `RunModel`, every other call is a Step that
sends its one `tools/call` with the session's idempotency key in `_meta`, and a tool that answers with an
MCP task is polled in the session's `PollToolTask` Steps. The shared `run_mcp_inventory_scenario` does not
fit the harness: its model asks for a read and two writes in one response, of which the CLI keeps one
waiting and the runner refuses the other (see the README's "One deferred call per response").
"""

from __future__ import annotations

import pytest
from dex_agents import AgentInterrupt, ToolEffect
from dex_agents.testing import (
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)

from tests.conftest import Features
from tests.feature_agents import mcp_log

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
