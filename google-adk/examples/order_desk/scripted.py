"""A scripted stand-in for a real model, so the demo runs without keys or network.

It plugs into ADK's own model slot (`BaseLlm`), streams its text, and decides what to say only from the
conversation it is shown, as a real model does: a retried model call gives the same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

_CHUNK = re.compile(r"\S+\s*")


def _tool_results(request: LlmRequest) -> dict[str, dict[str, Any]]:
    return {
        part.function_response.name or "": dict(part.function_response.response or {})
        for content in request.contents
        for part in content.parts or ()
        if part.function_response is not None
    }


class OrderDeskScriptedLlm(BaseLlm):
    """Looks the order up, refunds it, then reports what happened."""

    model: str = "order-desk-scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        results = _tool_results(llm_request)
        lookup = results.get("lookup_order")
        refund = results.get("refund_order")
        call: types.FunctionCall | None = None
        if lookup is None:
            text = "Sorry to hear that. Let me look up order A-17 first."
            call = types.FunctionCall(name="lookup_order", args={"order_id": "A-17"}, id="lookup-1")
        elif refund is None:
            paid = int(lookup.get("paid_eur", 0))
            text = f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it."
            call = types.FunctionCall(
                name="refund_order", args={"order_id": "A-17", "amount_eur": paid}, id="refund-1"
            )
        elif "error" not in refund:
            text = f"Done: {refund.get('result')} You will see it on your card in a few days."
        else:
            text = f"I did not refund order A-17: {json.dumps(refund['error'])}"
        if stream:
            for chunk in _CHUNK.findall(text):
                yield LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text=chunk)]), partial=True
                )
        parts = [types.Part(text=text)]
        if call is not None:
            parts.append(types.Part(function_call=call))
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=120, candidates_token_count=30, total_token_count=150
            ),
            partial=False,
            turn_complete=True,
            finish_reason=types.FinishReason.STOP,
        )
