"""The README's complete example runs from a fresh process with no terminal."""

from pathlib import Path

from dex_agents.testing import run_example

CORE_DIR = Path(__file__).resolve().parents[1]


def test_refund_example_runs_end_to_end() -> None:
    output = run_example(["examples/refund_agent.py"], CORE_DIR)
    assert "killed with SIGKILL while the approval waits" in output
    assert "(automatic)" in output
    assert "refund_order -> refund R-7 issued" in output
    assert "Done: order 7 is refunded (refund R-7)." in output
    assert "CallSingleAttemptTool-1" in output and "AwaitToolApproval-1" in output
    assert output.count("refund_order x1") == 1 and output.count("lookup_order x1") == 1
