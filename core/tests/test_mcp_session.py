"""Sessions whose tools come from an McpToolSource: a real devserver, a Worker child, and a stdio MCP server.

Each tool call runs in its own tool Step on a new connection; a killed Worker never runs a single-attempt
MCP write twice.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from dex_agents import OUTCOME_UNKNOWN_TOOL_RESULT, AgentSessionClient, AgentSnapshot, ToolEffect
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    AgentTestStack,
    FileGate,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from tests.agents import CORE_DIR
from tests.mcp_agent import build_mcp_flow, mcp_log_path, tool_outputs

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class McpSessions:
    stack: AgentTestStack
    sessions: AgentSessionClient

    @property
    def log(self) -> Path:
        return mcp_log_path(self.stack.state_dir)

    def calls(self, prefix: str) -> list[str]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [line for line in lines if line.startswith(f"tools/call {prefix}")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpSessions]:
    state_dir = tmp_path_factory.mktemp("mcp-sessions")
    flow = build_mcp_flow(state_dir)
    async with AgentTestStack(state_dir, [flow], "tests.mcp_agent", worker_cwd=CORE_DIR) as stack:
        await stack.start_worker()
        yield McpSessions(stack, stack.sessions(flow))


async def test_each_mcp_call_runs_in_its_own_step_with_its_effect_and_the_sessions_idempotency_key(
    mcp: McpSessions,
) -> None:
    session = mcp.stack.new_session_id("mcp")
    calls = (
        ScriptedToolCall("inventory__count_items", {"sku": "A-1"}, "count-1"),
        ScriptedToolCall("inventory__set_stock", {"sku": "A-1", "count": 9}, "set-1"),
        ScriptedToolCall("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1"),
        ScriptedToolCall("inventory__order_more", {"sku": "A-1"}, "order-1"),
    )
    mcp.stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Done.")]]
    )
    await mcp.sessions.start_session(session, "Check A-1, set it to 9, reserve 2 and order more")

    def approval_pending(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        final = {call.tool_call_id for call in snapshot.tool_calls if call.is_final}
        pending = {interrupt.tool_call_id for interrupt in snapshot.pending_interrupts}
        return snapshot if pending == {"set-1", "order-1"} and final == {"count-1", "reserve-1"} else None

    snapshot = await wait_for_agent_snapshot(
        mcp.sessions, session, approval_pending, description="set-1's and order-1's approvals"
    )
    records = {call.tool_call_id: call for call in snapshot.tool_calls}
    assert {call_id: record.effect for call_id, record in records.items()} == {
        "count-1": ToolEffect.READ,
        "set-1": ToolEffect.IDEMPOTENT_WRITE,
        "reserve-1": ToolEffect.IDEMPOTENT_WRITE,
        "order-1": ToolEffect.UNCLASSIFIED,
    }
    assert records["reserve-1"].output == "reserved 2 of A-1"
    assert mcp.calls("order_more") == [], "order_more reached the server before its approval"
    # set_stock is idempotent but destructive by its trusted annotations: it waits for approval too.
    assert mcp.calls("set_stock") == [], "set_stock reached the server before its approval"
    assert await mcp.sessions.resolve_interrupt(session, "set-1", approved=True)
    assert await mcp.sessions.resolve_interrupt(session, "order-1", approved=True)
    snapshot = await wait_for_turn_end(mcp.sessions, session, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert tool_outputs(snapshot) == {
        "count-1": "A-1: 7 in stock",
        "set-1": "A-1 set to 9",
        "reserve-1": "reserved 2 of A-1",
        "order-1": "ordered A-1",
    }
    assert snapshot.messages[-1].text == "Done."
    # reserve_stock's server died after its first request; CallTool sent it again with the same key.
    key = f"{session}/turn-1/reserve-1"
    assert mcp.calls("reserve_stock") == [f"tools/call reserve_stock A-1 {key}"] * 2
    assert [mcp.calls(tool) for tool in ("count_items", "set_stock", "order_more")] == [
        ["tools/call count_items"],
        ["tools/call set_stock"],
        ["tools/call order_more"],
    ]
    history = await mcp.stack.read_step_history(session)
    expected = ["StartAgentSession", "RunModel", "CallTool", "CallTool", "CallTool"]
    expected += ["CallSingleAttemptTool", "ResumeTurn", "RunModel"]
    executed = executed_step_types(history)
    # One AwaitToolApproval per decision it saw: the two approvals may land in one execution or two.
    assert 1 <= executed.count("AwaitToolApproval") <= 2
    assert sorted(step for step in executed if step != "AwaitToolApproval") == sorted(expected)
    [reserve] = [
        entry
        for entry in history
        if entry.step_type == "CallTool"
        and entry.step_input == "reserve-1"
        and entry.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert reserve.final_attempt == 2


async def test_a_worker_killed_during_a_single_attempt_mcp_write_records_outcome_unknown_and_never_reruns_it(
    mcp: McpSessions,
) -> None:
    session = mcp.stack.new_session_id("mcp-kill")
    place = ScriptedToolCall("inventory__place_order", {"sku": "B-7"}, "place-1")
    mcp.stack.scripts.set_turns(
        session,
        [[ScriptedResponse(tool_calls=(place,)), ScriptedResponse(text="The order may have gone out.")]],
    )
    await mcp.sessions.start_session(session, "Place an order for B-7")
    # The server got tools/call and holds it; the Worker dies (and the stdio server with it).
    gate = FileGate(mcp.stack.state_dir, "place_order-B-7")
    await gate.wait_until_reached()
    mcp.stack.kill_workers()
    await mcp.stack.start_worker()
    snapshot = await wait_for_turn_end(mcp.sessions, session, 1)
    gate.release()

    assert tool_outputs(snapshot) == {"place-1": OUTCOME_UNKNOWN_TOOL_RESULT}
    assert snapshot.messages[-1].text == "The order may have gone out."
    assert mcp.calls("place_order") == ["tools/call place_order B-7"]
    history = await mcp.stack.read_step_history(session)
    assert [entry.step_type for entry in history if entry.event_type == EXECUTE_FAILED_EVENT] == [
        "CallSingleAttemptTool"
    ]
    assert executed_step_types(history) == [
        "StartAgentSession",
        "RunModel",
        "RecordToolOutcomeUnknown",
        "RunModel",
    ]
