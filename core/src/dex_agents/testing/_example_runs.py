"""Running an example as a user does, and checking what the kit's order-desk driver printed.

Every package tests its README example by running it in a child process with no terminal (so approvals are
answered automatically). The lines that `run_order_desk_demo` itself prints are the same for every adapter;
`check_order_desk_output` checks those, and the adapter's test adds the lines its framework decides.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["check_order_desk_output", "run_example"]

_EXAMPLE_TIMEOUT_SECONDS = 150.0


def run_example(arguments: Sequence[str], cwd: Path, *, timeout: float = _EXAMPLE_TIMEOUT_SECONDS) -> str:
    """Run ``python <arguments>`` in ``cwd`` without a terminal and return what it printed.

    Args:
        arguments: The interpreter's arguments, such as ``["-m", "examples.order_desk", "--yes"]``.
        cwd: The package directory.
        timeout: Seconds the example may take.

    Returns:
        The example's standard output.

    Raises:
        AssertionError: When the example exits with a non-zero status; the message holds both outputs.
    """
    completed = subprocess.run(
        [sys.executable, *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,  # no terminal: the example approves by itself
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def check_order_desk_output(output: str, *, answer_sequence: int, model_calls: int) -> str:
    """Check an auto-approved order-desk run: live text, the Worker kill, one refund, and the Step order.

    Args:
        output: What ``python -m examples.order_desk --yes`` printed.
        answer_sequence: The stored sequence of the final answer (it depends on how many messages the
            framework stores for the tool calls).
        model_calls: How many ``RunModel`` Steps the turn took.

    Returns:
        The printed Step history, for the adapter's own checks.

    Raises:
        AssertionError: Naming the first expectation the output does not meet.
    """
    # Live text streamed before the tools ran, and the approval survived the Worker kill.
    assert "Let me look up order A-17 first." in output, output
    assert "killed with SIGKILL while the approval waits" in output, output
    assert "approved automatically" in output, output
    # The stored transcript ends with the final answer; the refund ran exactly once, with its key.
    assert f"{answer_sequence} assistant Done: Refunded 40 EUR for order A-17." in output, output
    assert "Refund ledger: 1 refund(s)" in output, output
    assert '"idempotency_key": "order-desk-1/turn-1/refund-1"' in output, output
    history = output.split("Step history")[1]
    approval = history.index("AwaitToolApproval(refund-1)")
    assert approval < history.index("CallSingleAttemptTool(refund-1)"), history
    assert history.count("RunModel attempt 1: ok") == model_calls, history
    return history
