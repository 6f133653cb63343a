"""The order-desk example, run as a user runs it: `python -m examples.order_desk --yes`.

The docs describe it on docs/pages/frameworks/langgraph/index.md.
"""

from __future__ import annotations

from dex_agents.testing import check_order_desk_output, run_example
from langchain_core.messages import HumanMessage, ToolMessage

from examples.order_desk.scripted import scripted_model
from tests.matrix_spec import PACKAGE_DIR


def test_the_order_desk_demo_refunds_once_across_a_worker_kill() -> None:
    output = run_example(["-m", "examples.order_desk", "--yes"], PACKAGE_DIR)
    history = check_order_desk_output(output, answer_sequence=8, model_calls=3)
    assert "assistant: Sorry to hear that. Let me look up order A-17 first." in output
    assert "[tool call] refund_order (non_idempotent_write, needs approval)" in output
    transcript = output.split("Transcript (stored messages):")[1].split("Step history")[0]
    # The answer's text and its tool call are stored as two messages (the shared projection); LangChain's
    # arguments are stored as compact JSON with sorted keys.
    assert "5 assistant Order A-17 was an espresso machine for 40 EUR, delivered broken." in transcript
    assert '6 assistant calls refund_order {"amount_eur":40,"order_id":"A-17"}' in transcript
    assert "usage: 3 model calls, 360 input / 90 output tokens" in transcript
    assert "CallTool(lookup-1) attempt 1: ok" in history
    assert "ResumeTurn(1) attempt 1: ok" in history


def test_the_scripted_model_reports_a_rejected_refund_with_the_reason() -> None:
    model = scripted_model()
    asks = model.invoke([HumanMessage("My order A-17 arrived broken.")])
    lookup = ToolMessage('{"order_id": "A-17", "paid_eur": 40}', tool_call_id="lookup-1", name="lookup_order")
    offers = model.invoke([HumanMessage("..."), asks, lookup])
    assert offers.tool_calls[0]["args"] == {"order_id": "A-17", "amount_eur": 40}
    rejected = ToolMessage(
        "Please send it back first.", tool_call_id="refund-1", name="refund_order", status="error"
    )
    final = model.invoke([HumanMessage("..."), asks, lookup, offers, rejected])
    assert final.text == "I did not refund order A-17: Please send it back first."
