"""The demo with a real provider model, run as a user runs it against any OpenAI-compatible server.

``python -m examples.order_desk --model openai-chat:gpt-4.1 --yes`` (and ``openai:gpt-4.1``, the Responses
API) with only ``OPENAI_BASE_URL`` and a dummy ``OPENAI_API_KEY`` set, as ``scripts/demo --model ...`` runs
it: Pydantic AI's own OpenAI client streams over HTTP from the kit's scripted provider server, which answers
by the conversation's position what the demo's scripted model would, and fails the way providers do: a 429
with ``Retry-After`` first, then a connection cut mid-answer on the answer that asks for the refund (the
issue a truncated answer once caused: taken for the final one, it ended the turn without the refund).
"""

from __future__ import annotations

import pytest
from dex_agents.testing import (
    ProviderFault,
    ScriptedProviderServer,
    ScriptedResponse,
    ScriptedToolCall,
    check_order_desk_output,
    run_example,
)

from tests.matrix_spec import PACKAGE_DIR

LOOKUP_TEXT = "Sorry to hear that. Let me look up order A-17 first."
REFUND_TEXT = "Order A-17 was an espresso machine for 40 EUR, delivered broken. I will refund it."
FINAL_TEXT = "Done: Refunded 40 EUR for order A-17. You will see it on your card in a few days."
RETRY_AFTER_SECONDS = 1.0

# The demo's conversation (examples/order_desk/scripted.py), as a provider answers it.
REPLIES = (
    ScriptedResponse(
        text=LOOKUP_TEXT,
        tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-17"}, "lookup-1"),),
        provider_faults=(ProviderFault("rate_limit", retry_after_seconds=RETRY_AFTER_SECONDS),),
    ),
    ScriptedResponse(
        text=REFUND_TEXT,
        tool_calls=(ScriptedToolCall("refund_order", {"order_id": "A-17", "amount_eur": 40}, "refund-1"),),
        provider_faults=(ProviderFault("cut_stream"),),
    ),
    ScriptedResponse(text=FINAL_TEXT),
)


@pytest.mark.parametrize(
    ("model", "api"), [("openai-chat:gpt-4.1", "chat_completions"), ("openai:gpt-4.1", "responses")]
)
def test_the_demo_on_an_openai_compatible_server_survives_a_rate_limit_and_a_cut_stream(
    model: str, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedProviderServer(replies=REPLIES) as server:
        # The demo and its Workers inherit the environment: the base URL and a key are all that change.
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-scripted")
        output = run_example(["-m", "examples.order_desk", "--model", model, "--yes"], PACKAGE_DIR)
    requests = server.requests

    # The turn completed, the approval survived the Worker kill and the refund ran exactly once.
    assert f"model {model}" in output
    assert "[turn_completed]" in output
    history = check_order_desk_output(output, answer_sequence=8, model_calls=2)
    # The cut answer was asked again as a new attempt of its model call, and the user saw it start over.
    assert history.count("RunModel attempt 2: ok") == 1, history
    live = output.split("Transcript (stored messages):")[0]
    assert live.count("[model call retried: attempt 2]") == 1, live
    assert f"[model call retried: attempt 2]\nassistant: {REFUND_TEXT}\n" in live, live
    # The stored answers are the whole texts, never the part before a cut.
    transcript = output.split("Transcript (stored messages):")[1].split("  usage:")[0]
    assert transcript.splitlines()[1:] == [
        "   1 user      Hi, my order A-17 arrived broken. Can I get my money back?",
        f"   2 assistant {LOOKUP_TEXT}",
        '   3 assistant calls lookup_order {"order_id":"A-17"}',
        '   4 tool      lookup_order {"order_id":"A-17"} -> {"order_id": "A-17", "item": "espresso machine", '
        '"status": "delivered broken", "paid_eur": 40}',
        f"   5 assistant {REFUND_TEXT}",
        '   6 assistant calls refund_order {"amount_eur":40,"order_id":"A-17"}',
        '   7 tool      refund_order {"amount_eur":40,"order_id":"A-17"} -> Refunded 40 EUR for order A-17.',
        f"   8 assistant {FINAL_TEXT}",
    ], transcript

    # Every answer came over the chosen API; the OpenAI client itself retried the 429 after Retry-After.
    assert {request.api for request in requests} == {api}
    faults = [request.fault for request in requests]
    assert faults == ["rate_limit", None, "cut_stream", None, None], faults
    assert requests[1].at - requests[0].at >= RETRY_AFTER_SECONDS
