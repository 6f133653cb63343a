"""The example of "A first test" in docs/pages/how-to/test-an-adapter.md.

`tests/test_test_an_adapter_page.py` checks that the page shows this file unchanged.
"""

# tests/test_approvals.py: the test process builds the same Flow for its Client.
from pathlib import Path

from dex_agents.testing import EXECUTE_COMPLETED_EVENT, AgentTestStack, InvocationLog, wait_for_agent_snapshot
from tests.my_agent import build_flow

PACKAGE_DIR = Path(__file__).resolve().parents[1]


async def test_write_survives_a_worker_kill(tmp_path: Path) -> None:
    flow = build_flow()
    async with AgentTestStack(
        tmp_path,
        [flow],
        "tests.my_worker",
        worker_cwd=PACKAGE_DIR,
        worker_env={"MY_STATE_DIR": str(tmp_path)},
    ) as stack:
        sessions = stack.sessions(flow)
        worker = await stack.start_worker()
        await sessions.start_session("session-1", "refund order 7")
        interrupt = await wait_for_agent_snapshot(
            sessions,
            "session-1",
            lambda snapshot: next(iter(snapshot.pending_interrupts), None),
            description="a pending approval",
        )
        worker.kill()  # SIGKILL while the session waits
        await stack.start_worker()  # replacement Worker
        assert await sessions.resolve_interrupt("session-1", interrupt.interrupt_id, approved=True)
        # The rest proves what the example promises.
        await wait_for_agent_snapshot(
            sessions,
            "session-1",
            lambda snapshot: snapshot.state is not None and snapshot.state.turn_count == 1,
            description="the turn to end",
        )
        history = await stack.read_step_history("session-1")
        executed = [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
        assert executed == [
            "StartAgentSession",
            "RunModel",
            "AwaitToolApproval",
            "CallSingleAttemptTool",
            "ResumeTurn",
            "RunModel",
        ]
        refunds = InvocationLog(tmp_path / "invocations.jsonl").tool_calls("session-1", "refund_order")
        assert len(refunds) == 1
        snapshot = await sessions.get_agent_snapshot("session-1")
        assert snapshot.messages[-1].text == "Order 7 is refunded."
