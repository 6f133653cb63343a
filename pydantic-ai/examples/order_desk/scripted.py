"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is `dex_agents_pydantic_ai.testing.ScriptedModel`, which plugs into Pydantic AI's own model slot and
streams its text. It decides what to say only from the conversation it is shown, as a real model does, so
a retried model call gives the same answer.
"""

from __future__ import annotations

import json

from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
)

from dex_agents_pydantic_ai.testing import ScriptedAnswer, ScriptedModel


def _tool_results(messages: list[ModelMessage]) -> dict[str, BaseToolReturnPart]:
    return {
        part.tool_name: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, BaseToolReturnPart)
    }


def _answer(messages: list[ModelMessage]) -> ScriptedAnswer:
    results = _tool_results(messages)
    lookup = results.get("lookup_order")
    refund = results.get("refund_order")
    if lookup is None:
        return ModelResponse(
            parts=[
                TextPart("Sorry to hear that. Let me look up order A-17 first."),
                ToolCallPart("lookup_order", {"order_id": "A-17"}, tool_call_id="lookup-1"),
            ]
        )
    if refund is None:
        paid = json.loads(lookup.model_response_str()).get("paid_eur", 0)
        return ModelResponse(
            parts=[
                TextPart(
                    f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it."
                ),
                ToolCallPart(
                    "refund_order", {"order_id": "A-17", "amount_eur": paid}, tool_call_id="refund-1"
                ),
            ]
        )
    if refund.outcome == "success":
        return f"Done: {refund.model_response_str()} You will see it on your card in a few days."
    return f"I did not refund order A-17: {refund.model_response_str(wrap_if_error=False)}"


def scripted_model() -> ScriptedModel:
    """The demo's scripted model."""
    return ScriptedModel(_answer, model_name="order-desk-scripted")
