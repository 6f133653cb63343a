"""A scripted stand-in for a real model, so the demo runs without keys or network.

It plugs into Pydantic AI's own model slot (`FunctionModel`), streams its text, and decides what to say
only from the conversation it is shown, as a real model does: a retried model call gives the same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator

from pydantic_ai.messages import BaseToolReturnPart, ModelMessage, ModelRequest
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

_CHUNK = re.compile(r"\S+\s*")


def _tool_results(messages: list[ModelMessage]) -> dict[str, BaseToolReturnPart]:
    return {
        part.tool_name: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, BaseToolReturnPart)
    }


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    del info
    results = _tool_results(messages)
    lookup = results.get("lookup_order")
    refund = results.get("refund_order")
    if lookup is None:
        text = "Sorry to hear that. Let me look up order A-17 first."
        call = DeltaToolCall("lookup_order", json.dumps({"order_id": "A-17"}), tool_call_id="lookup-1")
    elif refund is None:
        paid = json.loads(lookup.model_response_str()).get("paid_eur", 0)
        text = f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it."
        call = DeltaToolCall(
            "refund_order", json.dumps({"order_id": "A-17", "amount_eur": paid}), tool_call_id="refund-1"
        )
    elif refund.outcome == "success":
        text = f"Done: {refund.model_response_str()} You will see it on your card in a few days."
        call = None
    else:
        text = f"I did not refund order A-17: {refund.model_response_str(wrap_if_error=False)}"
        call = None
    for chunk in _CHUNK.findall(text):
        yield chunk
    if call is not None:
        yield {1: call}


def scripted_model() -> FunctionModel:
    """The demo's scripted model."""
    return FunctionModel(stream_function=_answer, model_name="order-desk-scripted")
