"""The Stepwise order-desk demo, run as a user runs it: `python -m examples.order_desk_stepwise --yes`."""

from __future__ import annotations

from dex_agents.testing import check_order_desk_output, run_example
from tests.stepwise_agents import CORE_DIR


def test_the_stepwise_order_desk_demo_refunds_once_across_a_worker_kill() -> None:
    output = run_example(["-m", "examples.order_desk_stepwise", "--yes"], CORE_DIR)
    check_order_desk_output(output, answer_sequence=8, model_calls=3)
    transcript = output.split("Transcript (stored messages):")[1].split("Step history")[0]
    # Each answer is its text, then its call on a message of its own, then the call's result.
    assert "2 assistant Sorry to hear that. Let me look up order A-17 first." in transcript
    assert '3 assistant calls lookup_order {"order_id":"A-17"}' in transcript
    assert '"paid_eur": 40}' in transcript.split("\n   4 tool      lookup_order")[1]
    assert '6 assistant calls refund_order {"amount_eur":40,"order_id":"A-17"}' in transcript
    assert "7 tool      refund_order" in transcript
    # The refund tool's own effect and approval are the policy: the Flow sets none.
    assert "[tool call] refund_order (non_idempotent_write, needs approval)" in output
    assert "[tool call] lookup_order (read)" in output
