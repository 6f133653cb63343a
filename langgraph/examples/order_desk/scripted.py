"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is `dex_agents_langgraph.testing.ScriptedChatModel`, a `BaseChatModel` in the agent's own model slot,
which streams its text and then its tool calls and usage, as a provider does. It decides what to say only
from the conversation it is shown, as a real model does, so a retried model call, or a turn resumed by
another Worker, gets the same answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call

from dex_agents_langgraph.testing import ScriptedChatModel


def _answer(text: str, *calls: tuple[str, dict[str, object], str]) -> AIMessage:
    return AIMessage(
        text,
        tool_calls=[tool_call(name=name, args=args, id=call_id) for name, args, call_id in calls],
        usage_metadata=UsageMetadata(input_tokens=120, output_tokens=30, total_tokens=150),
    )


def _respond(messages: Sequence[BaseMessage]) -> AIMessage:
    results = {message.name: message for message in messages if isinstance(message, ToolMessage)}
    lookup = results.get("lookup_order")
    refund = results.get("refund_order")
    if lookup is None:
        return _answer(
            "Sorry to hear that. Let me look up order A-17 first.",
            ("lookup_order", {"order_id": "A-17"}, "lookup-1"),
        )
    if refund is None:
        paid = json.loads(lookup.text).get("paid_eur", 0)
        return _answer(
            f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it.",
            ("refund_order", {"order_id": "A-17", "amount_eur": paid}, "refund-1"),
        )
    if refund.status == "success":
        return _answer(f"Done: {refund.text} You will see it on your card in a few days.")
    return _answer(f"I did not refund order A-17: {refund.text}")


def scripted_model() -> ScriptedChatModel:
    """The demo's scripted model: it looks the order up, refunds it, then reports what happened."""
    return ScriptedChatModel(respond=_respond, model_name="order-desk-scripted")
