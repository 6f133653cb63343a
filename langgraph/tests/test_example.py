"""The README's complete example runs from a fresh process with no terminal."""

from pathlib import Path

from dex_agents.testing import run_example

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def test_refund_example_runs_end_to_end() -> None:
    output = run_example(["examples/refund_agent.py"], PACKAGE_DIR)
    assert "killed with SIGKILL while the approval waits" in output
    assert "(automatic)" in output
    assert '  assistant calls refund_order {"order_id":"7"}\n' in output
    assert "  tool      refund_order -> refund R-7 issued\n" in output
    assert "  assistant Done: order 7 is refunded (refund R-7).\n" in output
    assert "CallSingleAttemptTool-1" in output and "AwaitToolApproval-1" in output
    assert output.count("refund_order 7 pid=") == 1 and output.count("lookup_order 7 pid=") == 1
    assert "key=refund-session-1/turn-1/refund-7" in output
    assert "Usage: 3 model calls" in output
