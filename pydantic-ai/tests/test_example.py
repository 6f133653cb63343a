"""The README's example, run as a user runs it: `python -m examples.order_desk` with `--yes`, with
`--model test` (Pydantic AI's offline `TestModel`, by name), and at a terminal that rejects the refund."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time

from dex_agents.testing import check_order_desk_output, run_example

from tests.matrix_spec import PACKAGE_DIR

DEMO = [sys.executable, "-m", "examples.order_desk"]


def run_demo(*arguments: str) -> str:
    return run_example([*DEMO[1:], *arguments], PACKAGE_DIR)


def test_the_order_desk_demo_refunds_once_across_a_worker_kill() -> None:
    output = run_demo("--yes")
    check_order_desk_output(output, answer_sequence=8, model_calls=3)


def test_the_demo_runs_a_pydantic_ai_model_name_from_the_model_option() -> None:
    # `--model test` is Pydantic AI's own `TestModel`, resolved by name in the Worker exactly like
    # `openai:gpt-4.1` would be, but offline. It calls every tool at once with generated arguments
    # (order "a", 0 EUR), then answers with the tools' results as JSON.
    output = run_demo("--model", "test", "--yes")
    assert "model test" in output
    assert "[tool call] lookup_order (read)" in output
    assert "[tool call] refund_order (non_idempotent_write, needs approval)" in output
    assert "killed with SIGKILL while the approval waits" in output
    assert 'Approve refund_order {"order_id":"a","amount_eur":0}? [y/N] y  (approved automatically' in output
    assert "[turn_completed]" in output
    transcript = output.split("Transcript (stored messages):")[1].split("Step history")[0]
    # One response asked for both tools: each call is stored as its own message, before the results.
    assert '2 assistant calls lookup_order {"order_id":"a"}' in transcript
    assert '3 assistant calls refund_order {"order_id":"a","amount_eur":0}' in transcript
    assert 'lookup_order {"order_id":"a"} -> There is no order a.' in transcript
    assert 'refund_order {"order_id":"a","amount_eur":0} -> Refunded 0 EUR for order a.' in transcript
    assert "usage: 2 model calls" in transcript
    history = output.split("Step history")[1]
    assert history.count("RunModel attempt 1: ok") == 2
    assert history.index("AwaitToolApproval(") < history.index("CallSingleAttemptTool(")
    # The refund ran exactly once, across the Worker kill.
    assert "Refund ledger: 1 refund(s)" in output
    assert '{"order_id": "a", "amount_eur": 0, "idempotency_key": "order-desk-1/turn-1/' in output


class _Terminal:
    """The demo as a child process on a pseudo-terminal, read and answered like a person would."""

    def __init__(self, *arguments: str, deadline: float) -> None:
        self._deadline = deadline
        self.output = ""
        master, slave = pty.openpty()
        self._master = master
        try:
            self.process = subprocess.Popen(
                [*DEMO, *arguments],
                cwd=PACKAGE_DIR,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)

    def _read(self, timeout: float) -> bool:
        """Read what the demo printed so far; False once it closed the terminal."""
        ready, _, _ = select.select([self._master], [], [], max(0.0, timeout))
        if not ready:
            return True
        try:
            data = os.read(self._master, 4096)
        except OSError:  # EIO: every process holding the terminal's other side exited
            return False
        if not data:
            return False
        self.output += data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        return True

    def wait_for(self, text: str) -> None:
        while text not in self.output:
            remaining = self._deadline - time.monotonic()
            assert remaining > 0, f"timed out waiting for {text!r}:\n{self.output}"
            assert self._read(min(remaining, 1.0)), f"the demo ended before {text!r}:\n{self.output}"

    def answer(self, line: str) -> None:
        os.write(self._master, (line + "\n").encode())

    def finish(self) -> int:
        while self._read(min(self._deadline - time.monotonic(), 1.0)):
            assert time.monotonic() < self._deadline, f"the demo did not end:\n{self.output}"
        return self.process.wait(timeout=max(1.0, self._deadline - time.monotonic()))

    def close(self) -> None:
        if self.process.poll() is None:
            # The demo's own devserver and Workers are in its process group.
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self._master)


REASON = "Please send the machine back first."


def test_a_refund_rejected_at_the_terminal_never_runs_and_the_model_sees_why() -> None:
    terminal = _Terminal(deadline=time.monotonic() + 120)
    try:
        terminal.wait_for('Approve refund_order {"order_id":"A-17","amount_eur":40}? [y/N] ')
        terminal.answer("n")
        terminal.wait_for("Why not? ")
        terminal.answer(REASON)
        status = terminal.finish()
    finally:
        terminal.close()
    output = terminal.output
    assert status == 0, output
    assert "approved automatically" not in output
    assert "killed with SIGKILL while the approval waits" in output
    assert "[tool call finished] refund_order: rejected" in output
    transcript = output.split("Transcript (stored messages):")[1].split("Step history")[0]
    # The stored tool result carries the reason, and the model's answer repeats it.
    assert f'refund_order {{"order_id":"A-17","amount_eur":40}} -> {REASON}' in transcript
    assert f"assistant I did not refund order A-17: {REASON}" in transcript
    history = output.split("Step history")[1]
    assert "AwaitToolApproval(refund-1)" in history
    assert "CallSingleAttemptTool(refund-1)" not in history
    assert "Refund ledger: 0 refund(s)" in output
