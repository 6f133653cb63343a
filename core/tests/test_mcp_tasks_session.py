"""MCP tasks in sessions: a devserver, a Worker child, and the inventory server on stdio and Streamable HTTP.

The agent (`tests.mcp_agent`) passes its task polls and cancellations to its `McpToolSource`. The HTTP
server's tasks are polled in the session's own Steps (`PollToolTask`), where their questions reach the user;
the stdio server's are polled inside the tool Step. The server logs every ``tools/call`` and task request,
so each test counts what reached it across Worker kills and server restarts.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from dex_agents import (
    AgentEventType,
    AgentSessionClient,
    InterruptKind,
    ToolCallStatus,
)
from dex_agents.mcp import TASK_STATUS_EVENT
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    AgentTestStack,
    McpInventoryHttpServer,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    start_mcp_inventory_http_server,
    wait_for_turn_end,
    wait_until,
)
from tests.agents import CORE_DIR
from tests.builtin_support import payloads, pending_interrupt, tool_call_record, wait_for_event
from tests.mcp_agent import (
    TASK_HANDLE_SAVED_EVENT,
    build_mcp_flow,
    checkpoint_gate,
    mcp_log_path,
    tool_outputs,
    write_http_server_url,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

FINISHED = AgentEventType.TOOL_CALL_FINISHED


@dataclass
class McpTasks:
    stack: AgentTestStack
    sessions: AgentSessionClient
    shipping: McpInventoryHttpServer
    http_log: Path

    def requests(self, prefix: str, *, stdio: bool = False) -> list[str]:
        log = mcp_log_path(self.stack.state_dir) if stdio else self.http_log
        lines = log.read_text().splitlines() if log.exists() else []
        return [line for line in lines if line.startswith(prefix)]

    def script(
        self, session: str, *calls: ScriptedToolCall, answer: str = "Done.", gate: str | None = None
    ) -> None:
        turn = [ScriptedResponse(tool_calls=calls), ScriptedResponse(text=answer, gate=gate)]
        self.stack.scripts.set_turns(session, [turn])

    async def a_normal_turn_works(self, session: str, turn_count: int) -> None:
        self.stack.scripts.add_turn(session, ScriptedResponse(text="Still here."))
        assert await self.sessions.send_user_message(session, "Still there?")
        done = await wait_for_turn_end(self.sessions, session, turn_count)
        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].text == "Still here."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def mcp(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpTasks]:
    state_dir = tmp_path_factory.mktemp("mcp-tasks")
    http_log = state_dir / "mcp-http-requests.log"
    async with await start_mcp_inventory_http_server(http_log) as shipping:
        write_http_server_url(state_dir, shipping.url)
        flow = build_mcp_flow(state_dir)
        async with AgentTestStack(state_dir, [flow], "tests.mcp_agent", worker_cwd=CORE_DIR) as stack:
            await stack.start_worker()
            tasks = McpTasks(stack, stack.sessions(flow), shipping, http_log)
            try:
                yield tasks
            finally:
                tasks.shipping.stop()  # a test may have replaced it with a restarted server


async def test_a_worker_killed_after_tools_call_started_a_task_follows_that_task_and_starts_no_other(
    mcp: McpTasks,
) -> None:
    session = mcp.stack.new_session_id("mcp-task-kill")
    mcp.script(session, ScriptedToolCall("shipping__ship_order", {"sku": "K-1", "polls": 2}, "ship-held"))
    await mcp.sessions.start_session(session, "Ship K-1")
    # The tool Step got the task's handle and saved it; the Worker dies before the Step commits.
    await checkpoint_gate(mcp.stack.state_dir, "ship-held").wait_until_reached()
    await wait_for_event(mcp.sessions, session, TASK_HANDLE_SAVED_EVENT)
    mcp.stack.kill_workers()
    await mcp.stack.start_worker()
    done = await wait_for_turn_end(mcp.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert tool_outputs(done) == {"ship-held": "shipped K-1"}
    assert mcp.requests("tools/call ship_order") == ["tools/call ship_order K-1"]
    assert mcp.requests("tasks/create ship_order K-1") == ["tasks/create ship_order K-1"], "a second task"
    assert mcp.requests("tasks/get ship_order K-1") == [
        "tasks/get ship_order K-1 working",
        "tasks/get ship_order K-1 completed",
    ]
    history = await mcp.stack.read_step_history(session)
    [call_tool] = [
        entry
        for entry in history
        if entry.step_type == "CallTool" and entry.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert call_tool.final_attempt == 2, "the retried attempt handed over the saved task"
    assert executed_step_types(history).count("PollToolTask") == 2
    events = await read_agent_events(mcp.sessions, session)
    [started] = payloads(events, AgentEventType.TOOL_TASK_STARTED)
    assert (started["tool_call_id"], started["tool_name"]) == ("ship-held", "shipping__ship_order")
    statuses = [(item["previous_status"], item["status"]) for item in payloads(events, TASK_STATUS_EVENT)]
    assert statuses == [("working", "completed")], "one event per status change, none for an unchanged one"


async def test_a_tasks_question_reaches_the_user_and_the_answer_or_decline_reaches_the_task(
    mcp: McpTasks,
) -> None:
    session = mcp.stack.new_session_id("mcp-task-question")
    mcp.script(
        session,
        ScriptedToolCall("shipping__ship_with_carrier", {"sku": "C-1"}, "carrier-1"),
        ScriptedToolCall("shipping__ship_with_carrier", {"sku": "D-1"}, "carrier-2"),
        answer="One shipped, one not.",
    )
    await mcp.sessions.start_session(session, "Ship C-1 and D-1")
    asked = await pending_interrupt(mcp.sessions, session, "carrier-1-input-1")
    assert (asked.kind, asked.question, asked.allows_free_text, asked.choices) == (
        InterruptKind.QUESTION,
        "Which carrier ships C-1?",
        True,
        (),
    )
    await pending_interrupt(mcp.sessions, session, "carrier-2-input-1")
    assert await mcp.sessions.answer_question(session, "carrier-1-input-1", "DHL")
    assert await mcp.sessions.resolve_interrupt(
        session, "carrier-2-input-1", approved=False, rejection_message="Not now."
    )
    done = await wait_for_turn_end(mcp.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert tool_outputs(done) == {
        "carrier-1": "shipped C-1 with DHL",
        "carrier-2": "D-1 was not shipped: no carrier was chosen",
    }
    # Each resolution went out once, on the first poll after it, and only to the request it answers.
    assert sorted(mcp.requests("tasks/update ship_with_carrier")) == [
        "tasks/update ship_with_carrier C-1 carrier-1 accept DHL",
        "tasks/update ship_with_carrier D-1 carrier-1 decline -",
    ]
    steps = executed_step_types(await mcp.stack.read_step_history(session))
    assert "AwaitQuestionAnswer" in steps and "PollToolTask" in steps, steps
    await mcp.a_normal_turn_works(session, 2)


async def test_cancel_turn_cancels_the_abandoned_task_on_its_server(mcp: McpTasks) -> None:
    session = mcp.stack.new_session_id("mcp-task-cancel")
    mcp.script(session, ScriptedToolCall("shipping__ship_order", {"sku": "L-1", "polls": 1000}, "ship-1"))
    await mcp.sessions.start_session(session, "Ship L-1")
    await tool_call_record(mcp.sessions, session, "ship-1", ToolCallStatus.WAITING_FOR_TASK)
    await wait_until("a poll of L-1", lambda: bool(mcp.requests("tasks/get ship_order L-1")))
    assert await mcp.sessions.cancel_turn(session)
    done = await wait_for_turn_end(mcp.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    events = await read_agent_events(mcp.sessions, session)
    finished = [(item["tool_call_id"], item["status"]) for item in payloads(events, FINISHED)]
    assert finished == [("ship-1", "outcome_unknown")]
    assert len(payloads(events, AgentEventType.TURN_CANCELLED)) == 1
    assert mcp.requests("tasks/cancel") == ["tasks/cancel ship_order L-1"], "cancelled once"
    assert "CancelToolTask" in executed_step_types(await mcp.stack.read_step_history(session))
    await mcp.a_normal_turn_works(session, 2)


async def test_a_stdio_servers_task_is_polled_inside_its_tool_step(mcp: McpTasks) -> None:
    session = mcp.stack.new_session_id("mcp-task-stdio")
    mcp.script(session, ScriptedToolCall("inventory__ship_order", {"sku": "S-1", "polls": 2}, "ship-1"))
    await mcp.sessions.start_session(session, "Ship S-1")
    done = await wait_for_turn_end(mcp.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert tool_outputs(done) == {"ship-1": "shipped S-1"}
    assert mcp.requests("tasks/", stdio=True) == [
        "tasks/create ship_order S-1",
        "tasks/get ship_order S-1 working",
        "tasks/get ship_order S-1 completed",
    ]
    history = await mcp.stack.read_step_history(session)
    assert executed_step_types(history) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "RunModel",
    ]
    events = await read_agent_events(mcp.sessions, session)
    assert payloads(events, AgentEventType.TOOL_TASK_STARTED) == [], "the session never saw the task"
    assert [item["status"] for item in payloads(events, TASK_STATUS_EVENT)] == ["completed"]


async def test_a_task_its_restarted_server_forgot_is_recorded_by_its_effect(mcp: McpTasks) -> None:
    session = mcp.stack.new_session_id("mcp-task-forgot")
    mcp.script(
        session,
        ScriptedToolCall("shipping__ship_order", {"sku": "F-1", "polls": 1000}, "ship-1"),
        gate="answer",
    )
    await mcp.sessions.start_session(session, "Ship F-1")
    waiting = await tool_call_record(mcp.sessions, session, "ship-1", ToolCallStatus.WAITING_FOR_TASK)
    # The server restarts on the same address and knows no task any more.
    port = mcp.shipping.port
    mcp.shipping.kill()
    mcp.shipping = await start_mcp_inventory_http_server(mcp.http_log, port=port)
    await mcp.stack.gate(session, "answer").wait_until_reached()
    snapshot = await mcp.sessions.get_agent_snapshot(session)
    mcp.stack.gate(session, "answer").release()
    await wait_for_turn_end(mcp.sessions, session, 1)

    record = next(call for call in snapshot.tool_calls if call.tool_call_id == "ship-1")
    # ship_order is an idempotent write: its failure route records outcome_unknown.
    assert record.status is ToolCallStatus.OUTCOME_UNKNOWN, record
    assert record.error is not None and f"task {waiting.task_id!r}" in record.error, record.error
    # Polls while the server was down failed too: three failed polls in all. The last one reached the new
    # server, unless its start outlasted the poll's three attempts (seen with two suites sharing two
    # cores): then the poll could not connect, and the call ends by its effect all the same.
    reached = len(mcp.requests(f"tasks/get {waiting.task_id} unknown"))
    assert reached <= 3
    if reached:
        assert "is no longer known to the server" in record.error, record.error
    else:
        assert "could not be polled" in record.error, record.error
    assert mcp.requests("tools/call ship_order F-1") == ["tools/call ship_order F-1"], (
        "it was not called again"
    )
    history = await mcp.stack.read_step_history(session)
    [failed_poll] = [entry for entry in history if entry.event_type == EXECUTE_FAILED_EVENT]
    assert (failed_poll.step_type, failed_poll.final_attempt) == ("PollToolTask", 3)
    assert "RecordToolFailure" in executed_step_types(history)
    await mcp.a_normal_turn_works(session, 2)
