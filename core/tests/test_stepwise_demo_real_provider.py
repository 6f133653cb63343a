"""The Stepwise demo with a real provider model, run as a user runs it against any OpenAI-compatible server.

``python -m examples.order_desk_stepwise --model openai/gpt-4.1-mini --yes`` with only ``OPENAI_BASE_URL``
and a dummy ``OPENAI_API_KEY`` set, as ``scripts/demo --runner stepwise --model ...`` runs it: LiteLLM's
OpenAI provider streams over HTTP from the kit's scripted provider server, which answers by the
conversation's position what the demo's scripted model would, and fails the way providers do: a 429 with
``Retry-After`` on the executing turn's first answer, then a connection cut mid-answer on the answer that
asks for the refund (taken for a final answer, it would end the turn without the refund).
"""

from __future__ import annotations

import pytest

from dex_agents.testing import (
    ProviderFault,
    ScriptedProviderServer,
    ScriptedResponse,
    ScriptedToolCall,
    run_example,
)
from tests.stepwise_agents import CORE_DIR

LOOK_UP = "Look up order A-17"
REFUND = "Refund what the customer paid"
REFUND_TEXT = "Order A-17 was an espresso machine for 40 EUR, delivered broken. I will refund it."
FINAL_TEXT = "Done: Refunded 40 EUR for order A-17. You will see it on your card in a few days."
RETRY_AFTER_SECONDS = 1.0


def _todos(call_id: str, look_up: str, refund: str) -> ScriptedToolCall:
    todos = [{"content": LOOK_UP, "status": look_up}, {"content": REFUND, "status": refund}]
    return ScriptedToolCall("write_todos", {"todos": todos}, call_id)


# The demo's conversation (examples/order_desk_stepwise/scripted.py), as a provider answers it: the planning
# turn, then the executing turn.
REPLIES = (
    ScriptedResponse(
        text="Sorry to hear that. Here is my plan: look the order up, then refund what you paid.",
        tool_calls=(_todos("plan-1", "pending", "pending"),),
    ),
    ScriptedResponse(text="Please review the plan; I start as soon as you approve it."),
    ScriptedResponse(
        text="Thanks. Let me look up order A-17 first.",
        tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-17"}, "lookup-1"),),
        provider_faults=(ProviderFault("rate_limit", retry_after_seconds=RETRY_AFTER_SECONDS),),
    ),
    ScriptedResponse(
        text=REFUND_TEXT,
        tool_calls=(
            ScriptedToolCall("refund_order", {"order_id": "A-17", "amount_eur": 40}, "refund-1"),
            _todos("progress-1", "completed", "in_progress"),
        ),
        provider_faults=(ProviderFault("cut_stream"),),
    ),
    ScriptedResponse(tool_calls=(_todos("progress-2", "completed", "completed"),)),
    ScriptedResponse(text=FINAL_TEXT),
)


def test_the_stepwise_demo_on_an_openai_compatible_server_survives_a_rate_limit_and_a_cut_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = "openai/gpt-4.1-mini"
    with ScriptedProviderServer(replies=REPLIES) as server:
        # The demo and its Workers inherit the environment: the base URL and a key are all that change.
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
        output = run_example(["-m", "examples.order_desk_stepwise", "--model", model, "--yes"], CORE_DIR)
    requests = server.requests
    live, after = output.split("Transcript (stored messages):")
    transcript, history = after.split("Step history")

    # Both turns completed; the refund, approved across a Worker kill, ran exactly once.
    assert f"model {model}" in output
    assert live.count("[turn_completed]") == 2, live
    assert live.index("killed with SIGKILL while the approval waits") < live.index("Approve refund_order")
    assert "Refund ledger: 1 refund(s)" in output
    assert '"idempotency_key": "order-desk-1/turn-2/refund-1"' in output
    assert history.index("AwaitToolApproval(refund-1)") < history.index("CallSingleAttemptTool(refund-1)")
    assert history.count("CallSingleAttemptTool(refund-1)") == 1, history
    # The cut answer was asked again as a new attempt of its model call, and the user saw it start over.
    assert history.count("RunModel attempt 1: ok") == 5, history
    assert history.count("RunModel attempt 2: ok") == 1, history
    assert live.count("[model call retried: attempt 2]") == 1, live
    assert f"[model call retried: attempt 2]\nassistant: {REFUND_TEXT}\n" in live, live
    # The stored answers are the whole texts, never the part before a cut; the plan was kept current.
    lines = transcript.splitlines()
    assert f"  10 assistant {REFUND_TEXT}" in lines, transcript
    assert '  11 assistant calls refund_order {"amount_eur":40,"order_id":"A-17"}' in lines, transcript
    # The final answer is the last stored message: the usage line follows it.
    usage = next(number for number, line in enumerate(lines) if line.startswith("  usage:"))
    assert lines[usage - 1] == f"  17 assistant {FINAL_TEXT}", transcript
    assert "Plan revision 3 (completed):\n  1. [completed] Look up order A-17\n  2. [completed] Refund" in (
        transcript
    )

    # Every answer came over Chat Completions; the OpenAI client in LiteLLM retried the 429 after Retry-After.
    assert {request.api for request in requests} == {"chat_completions"}
    faults = [request.fault for request in requests]
    assert faults == [None, None, "rate_limit", None, "cut_stream", None, None, None], faults
    assert requests[3].at - requests[2].at >= RETRY_AFTER_SECONDS
