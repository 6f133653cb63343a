"""The README's complete example runs from a fresh process with no terminal."""

import subprocess
import sys
from pathlib import Path

CORE_DIR = Path(__file__).resolve().parents[1]


def test_refund_example_runs_end_to_end() -> None:
    result = subprocess.run(
        [sys.executable, "examples/refund_agent.py"],
        check=False,
        cwd=CORE_DIR,
        stdin=subprocess.DEVNULL,  # no terminal: the example approves by itself
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout
    assert "killed with SIGKILL while the approval waits" in output
    assert "(automatic)" in output
    assert "refund_order -> refund R-7 issued" in output
    assert "Done: order 7 is refunded (refund R-7)." in output
    assert "CallSingleAttemptTool-1" in output and "AwaitToolApproval-1" in output
    assert output.count("refund_order x1") == 1 and output.count("lookup_order x1") == 1
