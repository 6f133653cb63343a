"""The order-desk example, run as a user runs it: `python -m examples.order_desk --yes`.

The docs site's `docs/pages/frameworks/claude-agent-sdk/index.md` describes it ("A complete example").
"""

from __future__ import annotations

from dex_agents.testing import check_order_desk_output, run_example

from tests.matrix_spec import PACKAGE_DIR


def test_the_order_desk_demo_refunds_once_across_a_worker_kill() -> None:
    output = run_example(["-m", "examples.order_desk", "--yes"], PACKAGE_DIR)
    history = check_order_desk_output(output, answer_sequence=8, model_calls=2)
    # The read ran inline in the first RunModel; the refund waited for approval in its own Step.
    assert "CallTool" not in history
