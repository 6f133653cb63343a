"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is a LiteLLM custom provider, so the agent's model call is the real ``litellm.acompletion(stream=True)``
that a hosted model gets. It decides what to say only from the conversation it is sent, as a real model
does, so a retried model call gives the same answer, and streams it in word chunks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

# Stepwise before LiteLLM: Stepwise starts LiteLLM with the model price map in its wheel, where LiteLLM's
# own default downloads it first.
from dex_agents.stepwise import LiteLLMModelClient
from dex_agents.stepwise.testing import scripted_chunks
from dex_agents.testing import ScriptedResponse, ScriptedToolCall

# isort: split
from litellm import custom_provider_map
from litellm.llms.custom_llm import CustomLLM, CustomLLMError

PROVIDER = "order-desk-scripted"


def _tool_results(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """The latest result of each tool, by tool name."""
    names: dict[str, str] = {}
    results: dict[str, str] = {}
    for message in messages:
        for call in cast(list[Mapping[str, Any]], message.get("tool_calls") or []):
            names[str(call["id"])] = str(call["function"]["name"])
        if message.get("role") == "tool":
            results[names.get(str(message.get("tool_call_id")), "?")] = str(message.get("content"))
    return results


def answer(messages: Sequence[Mapping[str, Any]]) -> ScriptedResponse:
    """What the order desk says next, given the conversation so far."""
    results = _tool_results(messages)
    lookup = results.get("lookup_order")
    refund = results.get("refund_order")
    calls: tuple[ScriptedToolCall, ...] = ()
    if lookup is None:
        text = "Sorry to hear that. Let me look up order A-17 first."
        calls = (ScriptedToolCall("lookup_order", {"order_id": "A-17"}, "lookup-1"),)
    elif refund is None:
        paid = json.loads(lookup).get("paid_eur", 0)
        text = f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it."
        calls = (ScriptedToolCall("refund_order", {"order_id": "A-17", "amount_eur": paid}, "refund-1"),)
    elif refund.startswith("Refunded "):
        text = f"Done: {refund} You will see it on your card in a few days."
    else:
        text = f"I did not refund order A-17: {refund}"
    # Roughly what a tokenizer would count, so the transcript's usage line means something.
    words = sum(len(str(message.get("content") or "").split()) for message in messages)
    return ScriptedResponse(
        text=text, tool_calls=calls, input_tokens=words * 4 // 3, output_tokens=len(text) // 4
    )


class OrderDeskModel(CustomLLM):
    """The provider: streams `answer` for each call."""

    async def astreaming(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, model: str, messages: list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Stream the answer to this conversation."""
        for chunk in scripted_chunks(answer(messages)):
            yield chunk

    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Refuse a call without streaming: Stepwise always streams."""
        raise CustomLLMError(status_code=400, message="the order desk's scripted model only streams")


def scripted_model() -> LiteLLMModelClient:
    """Register the provider with LiteLLM and return the client of its model."""
    if not any(entry["provider"] == PROVIDER for entry in custom_provider_map):
        custom_provider_map.append({"provider": PROVIDER, "custom_handler": OrderDeskModel()})
    return LiteLLMModelClient(f"{PROVIDER}/order-desk")
