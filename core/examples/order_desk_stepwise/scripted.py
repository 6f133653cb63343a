"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is a LiteLLM custom provider, so the agent's model call is the real ``litellm.acompletion(stream=True)``
that a hosted model gets. It decides what to say only from the conversation it is sent, as a real model
does, so a retried model call gives the same answer, and streams it in word chunks. The conversation holds
the session's plan note when there is a plan: in a planning turn it drafts the plan with ``write_todos``;
once the plan is approved it works through it and keeps the tasks' statuses current.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

# Stepwise before LiteLLM: Stepwise starts LiteLLM with the model price map in its wheel, where LiteLLM's
# own default downloads it first.
from dex_agents.stepwise import LiteLLMModelClient
from dex_agents.testing import ScriptedResponse, ScriptedToolCall
from dex_agents.testing.stepwise import scripted_chunks

# isort: split
from litellm import custom_provider_map
from litellm.llms.custom_llm import CustomLLM, CustomLLMError

PROVIDER = "order-desk-scripted"

LOOK_UP = "Look up order A-17"
REFUND = "Refund what the customer paid"
# The session's plan note, as dex_agents.build_plan_note writes it.
_PLAN_NOTE = re.compile(r"\[Dex\] The current plan, revision \d+, is \w+:\n((?:- \[\w+\] .*\n?)*)")
_PLAN_TASK = re.compile(r"- \[(\w+)\] (.*)")


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


def _plan(messages: Sequence[Mapping[str, Any]]) -> dict[str, str] | None:
    """The tasks of the plan the latest plan note shows, by content with their statuses; `None` for none."""
    notes = [str(message.get("content")) for message in messages if message.get("role") == "user"]
    for note in reversed(notes):
        shown = _PLAN_NOTE.search(note)
        if shown is not None:
            return {task.group(2): task.group(1) for task in _PLAN_TASK.finditer(shown.group(1))}
    return None


def _todos(call_id: str, look_up: str, refund: str) -> ScriptedToolCall:
    todos = [{"content": LOOK_UP, "status": look_up}, {"content": REFUND, "status": refund}]
    return ScriptedToolCall("write_todos", {"todos": todos}, call_id)


def _planning(messages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[ScriptedToolCall, ...]]:
    if _plan(messages) is None:
        text = "Sorry to hear that. Here is my plan: look the order up, then refund what you paid."
        return text, (_todos("plan-1", "pending", "pending"),)
    return "Please review the plan; I start as soon as you approve it.", ()


def _working(messages: Sequence[Mapping[str, Any]]) -> tuple[str, tuple[ScriptedToolCall, ...]]:
    results = _tool_results(messages)
    lookup = results.get("lookup_order")
    refund = results.get("refund_order")
    plan = _plan(messages)
    if lookup is None:
        text = (
            "Thanks. Let me look up order A-17 first."
            if plan
            else "Sorry to hear that. Let me look up order A-17 first."
        )
        return text, (ScriptedToolCall("lookup_order", {"order_id": "A-17"}, "lookup-1"),)
    if refund is None:
        paid = json.loads(lookup).get("paid_eur", 0)
        text = f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it."
        calls = (ScriptedToolCall("refund_order", {"order_id": "A-17", "amount_eur": paid}, "refund-1"),)
        return text, calls + ((_todos("progress-1", "completed", "in_progress"),) if plan else ())
    if not refund.startswith("Refunded "):
        return f"I did not refund order A-17: {refund}", ()
    if plan is not None and plan.get(REFUND) != "completed":
        return "", (_todos("progress-2", "completed", "completed"),)
    return f"Done: {refund} You will see it on your card in a few days.", ()


def answer(messages: Sequence[Mapping[str, Any]]) -> ScriptedResponse:
    """What the order desk says next, given the conversation so far."""
    planning = any("This turn only plans" in str(message.get("content")) for message in messages)
    text, calls = _planning(messages) if planning else _working(messages)
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
