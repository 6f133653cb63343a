"""The Stepwise order-desk demo, run as a user runs it: `python -m examples.order_desk_stepwise --yes`."""

from __future__ import annotations

from dex_agents.testing import run_example
from tests.stepwise_agents import CORE_DIR


def test_the_stepwise_order_desk_demo_plans_then_refunds_once_across_a_worker_kill() -> None:
    output = run_example(["-m", "examples.order_desk_stepwise", "--yes"], CORE_DIR)
    live, after = output.split("Transcript (stored messages):")
    transcript, history = after.split("Step history")

    # The planning turn drafted the plan, which was printed and approved before anything ran.
    planned = live.index("Plan revision 1 (draft):\n  1. [pending] Look up order A-17")
    approved = live.index("Approve plan revision 1? [y/N] y  (approved automatically")
    started = live.index("[plan revision 1 approved: the executing turn starts]")
    looked_up = live.index("[tool call] lookup_order (read)")
    assert planned < approved < started < looked_up, live
    assert "Here is my plan: look the order up" in live.split("Plan revision 1")[0]
    # The executing turn streamed live text and asked for the refund, approved across a Worker kill.
    assert "Thanks. Let me look up order A-17 first." in live
    assert "[tool call] refund_order (non_idempotent_write, needs approval)" in live
    assert live.index("killed with SIGKILL while the approval waits") < live.index("Approve refund_order")

    assert "6 user      [Dex] The user approved plan revision 1." in transcript
    assert '11 assistant calls refund_order {"amount_eur":40,"order_id":"A-17"}' in transcript
    assert "17 assistant Done: Refunded 40 EUR for order A-17." in transcript
    # The executing turn kept the plan's tasks current until they were all done.
    assert "Plan revision 3 (completed):\n  1. [completed] Look up order A-17\n  2. [completed] Refund" in (
        transcript
    )
    assert history.index("AwaitToolApproval(refund-1)") < history.index("CallSingleAttemptTool(refund-1)")
    assert history.count("RunModel attempt 1: ok") == 6, history
    assert history.count("AwaitUserMessage attempt 1: ok") == 2, history
    assert "Refund ledger: 1 refund(s)" in output
    assert '"idempotency_key": "order-desk-1/turn-2/refund-1"' in output
