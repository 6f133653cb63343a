"""The order-desk example, run as a user runs it: `python -m examples.order_desk --yes`.

The docs describe it on docs/pages/frameworks/google-adk/index.md.
"""

from __future__ import annotations

from dex_agents.testing import check_order_desk_output, run_example

from tests.matrix_spec import PACKAGE_DIR


def test_the_order_desk_demo_refunds_once_across_a_worker_kill() -> None:
    output = run_example(["-m", "examples.order_desk", "--yes"], PACKAGE_DIR)
    history = check_order_desk_output(output, answer_sequence=8, model_calls=3)
    assert "assistant: Sorry to hear that. Let me look up order A-17 first." in output
    assert "usage: 3 model calls, 360 input / 90 output tokens" in output
    assert "ResumeTurn(1) attempt 1: ok" in history
