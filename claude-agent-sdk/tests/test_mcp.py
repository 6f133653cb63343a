"""MCP tools through the runner: effects from a real stdio server's annotations, one `tools/call` per Step."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from dex_agents import AgentSessionClient, ToolEffect
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)

from tests.matrix_spec import PACKAGE_DIR
from tests.specifics_agents import build_flows, mcp_log_path

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp_session(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[AgentTestStack, AgentSessionClient]]:
    flows = build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("mcp"), flows, "tests.specifics_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        await stack.start_worker()
        yield stack, stack.sessions(flows[2])


async def test_mcp_annotations_give_effects_and_each_write_step_sends_one_tools_call(
    mcp_session: tuple[AgentTestStack, AgentSessionClient],
) -> None:
    stack, sessions = mcp_session
    session_id = stack.new_session_id("mcp")
    count = ScriptedToolCall("count_items", {"sku": "K-9"}, "count-1")
    set_stock = ScriptedToolCall("set_stock", {"sku": "K-9", "count": 3}, "set-1")
    order = ScriptedToolCall("order_more", {"sku": "K-9"}, "order-1")
    stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(tool_calls=(count,)),
                ScriptedResponse(tool_calls=(set_stock,)),
                ScriptedResponse(tool_calls=(order,)),
                ScriptedResponse(text="Stock fixed and more ordered."),
            ]
        ],
    )
    await sessions.start_session(session_id, "Fix the stock of K-9")
    interrupt = await wait_for_agent_snapshot(
        sessions,
        session_id,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        description="the approval of order_more",
        timeout=90,
    )
    # No hint and no policy: unclassified, so the call waits for approval.
    assert interrupt.tool_call_id == "order-1"
    snapshot = await sessions.get_agent_snapshot(session_id)
    assert [(call.tool_name, call.effect) for call in snapshot.tool_calls] == [
        ("set_stock", ToolEffect.IDEMPOTENT_WRITE),
        ("order_more", ToolEffect.UNCLASSIFIED),
    ]
    assert await sessions.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)
    done = await wait_for_turn_end(sessions, session_id, 1, timeout=90)
    assert done.state is not None and done.state.last_turn_error is None

    # readOnlyHint: inline in RunModel; idempotentHint: a CallTool Step; no hint: approval + single attempt.
    assert executed_step_types(await stack.read_step_history(session_id)) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "ResumeTurn",
        "RunModel",
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "ResumeTurn",
        "RunModel",
    ]
    log = mcp_log_path(stack.state_dir).read_text().splitlines()
    calls = [line for line in log if line.startswith("tools/call")]
    assert calls == ["tools/call count_items", "tools/call set_stock", "tools/call order_more"]
    # Besides those calls the server only lists its tools (the runner for each Step, the MCP client
    # again before a call).
    assert {line for line in log if not line.startswith("tools/call")} == {"tools/list"}
    assert "[order-1] ok: ordered K-9" in stack.invocations.model_calls(session_id)[-1].model_input_text
