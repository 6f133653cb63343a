"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is the adapter's public scripted model, `dex_agents_google_adk.testing.ScriptedLlm`, in ADK's own model
slot, and it streams its text as Gemini does. What it says comes only from the conversation it is shown,
as with a real model: a retried model call gives the same answer.
"""

from __future__ import annotations

import json
from typing import Any

from google.adk.models.llm_request import LlmRequest

from dex_agents_google_adk.testing import ScriptedAnswer, ScriptedLlm, ScriptedResponse, ScriptedToolCall


def _tool_results(request: LlmRequest) -> dict[str, dict[str, Any]]:
    return {
        part.function_response.name or "": dict(part.function_response.response or {})
        for content in request.contents
        for part in content.parts or ()
        if part.function_response is not None
    }


def _answer(text: str, *calls: ScriptedToolCall) -> ScriptedResponse:
    return ScriptedResponse(text=text, tool_calls=calls, input_tokens=120, output_tokens=30)


class OrderDeskScriptedLlm(ScriptedLlm):
    """Looks the order up, refunds it, then reports what happened."""

    model: str = "order-desk-scripted"

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        """Answer from the tool results the conversation holds so far."""
        results = _tool_results(llm_request)
        lookup = results.get("lookup_order")
        refund = results.get("refund_order")
        if lookup is None:
            call = ScriptedToolCall("lookup_order", {"order_id": "A-17"}, "lookup-1")
            text = "Sorry to hear that. Let me look up order A-17 first."
            return _answer(text, call)
        if refund is None:
            paid = int(lookup.get("paid_eur", 0))
            call = ScriptedToolCall("refund_order", {"order_id": "A-17", "amount_eur": paid}, "refund-1")
            text = f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it."
            return _answer(text, call)
        if "error" not in refund:
            text = f"Done: {refund.get('result')} You will see it on your card in a few days."
        else:
            text = f"I did not refund order A-17: {json.dumps(refund['error'])}"
        return _answer(text)
