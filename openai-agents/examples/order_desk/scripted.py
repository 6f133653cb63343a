"""A scripted stand-in for a real model, so the demo runs without keys or network.

It is an `agents.Model`, the same slot a real OpenAI model fills, streams its text, and decides what to
say only from the conversation it is shown, as a real model does: a retried model call gives the same
answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from agents import (
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    Tool,
    TResponseInputItem,
    Usage,
)
from agents.items import TResponseOutputItem, TResponseStreamEvent
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

_CHUNK = re.compile(r"\S+\s*")


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


def _answer(items: list[TResponseInputItem]) -> tuple[str, ResponseFunctionToolCall | None]:
    outputs = _tool_outputs(items)
    lookup = outputs.get("lookup_order")
    refund = outputs.get("refund_order")
    if lookup is None:
        call = ResponseFunctionToolCall(
            type="function_call", call_id="lookup-1", name="lookup_order", arguments='{"order_id": "A-17"}'
        )
        return "Sorry to hear that. Let me look up order A-17 first.", call
    if refund is None:
        paid = json.loads(lookup).get("paid_eur", 0)
        call = ResponseFunctionToolCall(
            type="function_call",
            call_id="refund-1",
            name="refund_order",
            arguments=json.dumps({"order_id": "A-17", "amount_eur": paid}),
        )
        return f"Order A-17 was an espresso machine for {paid} EUR, delivered broken. I will refund it.", call
    if refund.startswith("Refunded"):
        return f"Done: {refund} You will see it on your card in a few days.", None
    return f"I did not refund order A-17: {refund}", None


def _usage() -> Usage:
    return Usage(
        requests=1,
        input_tokens=120,
        output_tokens=30,
        total_tokens=150,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )


class OrderDeskModel(Model):
    """The demo's scripted model."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> ModelResponse:
        text, call = _answer(_items(input))
        return ModelResponse(output=_output(text, call), usage=_usage(), response_id="order-desk")

    async def stream_response(  # pyright: ignore[reportIncompatibleMethodOverride]
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        text, call = _answer(_items(input))
        for sequence, chunk in enumerate(_CHUNK.findall(text)):
            yield ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg",
                output_index=0,
                content_index=0,
                delta=chunk,
                logprobs=[],
                sequence_number=sequence,
            )
        usage = _usage()
        response = Response(
            id="order-desk",
            created_at=0,
            model="order-desk-scripted",
            object="response",
            output=_output(text, call),
            tool_choice="auto",
            tools=[],
            top_p=None,
            parallel_tool_calls=True,
            status="completed",
            usage=ResponseUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.total_tokens,
                input_tokens_details=usage.input_tokens_details,
                output_tokens_details=usage.output_tokens_details,
            ),
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=10_000)


def _items(value: str | list[TResponseInputItem]) -> list[TResponseInputItem]:
    if isinstance(value, str):
        return [cast(TResponseInputItem, {"role": "user", "content": value})]
    return list(value)


def _output(text: str, call: ResponseFunctionToolCall | None) -> list[TResponseOutputItem]:
    message = ResponseOutputMessage(
        id="msg",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )
    return [message] if call is None else [message, call]


def scripted_model() -> OrderDeskModel:
    """The demo's scripted model."""
    return OrderDeskModel()
