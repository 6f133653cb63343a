"""The README's example, run as a user runs it: `python -m examples.order_desk --yes`."""

from __future__ import annotations

import subprocess
import sys

from tests.matrix_spec import PACKAGE_DIR


def test_the_order_desk_demo_refunds_once_across_a_worker_kill() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "examples.order_desk", "--yes"],
        cwd=PACKAGE_DIR,
        capture_output=True,
        text=True,
        timeout=150,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    output = completed.stdout
    assert completed.returncode == 0, output + completed.stderr
    # Live text streamed while the CLI ran the turn, and the approval survived the Worker kill.
    assert "Let me look up order A-17 first." in output
    assert "killed with SIGKILL while the approval waits" in output
    assert "approved automatically" in output
    # The stored transcript ends with the final answer; the refund ran exactly once, with its key.
    assert "8 assistant Done: Refunded 40 EUR for order A-17." in output
    assert "Refund ledger: 1 refund(s)" in output
    assert '"idempotency_key": "order-desk-1/turn-1/refund-1"' in output
    history = output.split("Step history")[1]
    # The read ran inline in the first RunModel; the refund waited for approval in its own Step.
    assert "CallTool" not in history
    assert history.index("AwaitToolApproval(refund-1)") < history.index("CallSingleAttemptTool(refund-1)")
    assert history.count("RunModel attempt 1: ok") == 2
