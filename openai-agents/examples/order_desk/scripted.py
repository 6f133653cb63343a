"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is an `agents.Model`, the same slot a real OpenAI model fills: the adapter's
`dex_agents_openai_agents.testing.ScriptedResponsesModel`, which streams its text as a Responses API model
does. What it says comes only from the conversation it is shown, as with a real model: a retried model
call gives the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agents import TResponseInputItem
from agents.items import TResponseOutputItem

from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel, call_item, text_item


def _tool_outputs(items: list[TResponseInputItem]) -> dict[str, str]:
    """The output of every tool call in the conversation, by the called tool's name."""
    names: dict[str, str] = {}
    outputs: dict[str, str] = {}
    for raw in items:
        item = cast(Mapping[str, Any], raw)
        if item.get("type") == "function_call":
            names[str(item["call_id"])] = str(item["name"])
        elif item.get("type") == "function_call_output":
            outputs[names.get(str(item["call_id"]), "")] = str(item["output"])
    return outputs


def _answer(items: list[TResponseInputItem]) -> tuple[str, TResponseOutputItem | None]:
    outputs = _tool_outputs(items)
    lookup = outputs.get("lookup_order")
    refund = outputs.get("refund_order")
    if lookup is None:
        call = call_item("lookup_order", {"order_id": "A-17"}, "lookup-1")
        return "Sorry to hear that. Let me look up order A-17 first.", call
    if refund is None:
        paid = json.loads(lookup).get("paid_eur", 0)
        call = call_item("refund_order", {"order_id": "A-17", "amount_eur": paid}, "refund-1")
        return f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it.", call
    if refund.startswith("Refunded"):
        return f"Done: {refund} You will see it on your card in a few days.", None
    return f"I did not refund order A-17: {refund}", None


async def _scripted_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del offered
    text, call = _answer(items)
    output: list[TResponseOutputItem] = [text_item(text)]
    if call is not None:
        output.append(call)
    return ScriptedAnswer(output, input_tokens=120, output_tokens=30)


def scripted_model() -> ScriptedResponsesModel:
    """The demo's scripted model: it streams its text as a Responses API model does."""
    return ScriptedResponsesModel(
        _scripted_answer, response_id="order-desk", model_name="order-desk-scripted"
    )
