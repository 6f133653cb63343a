"""Test helpers: a scripted Responses API model in the SDK's own model slot, for running agents offline.

`ScriptedResponsesModel` is an `agents.Model` whose answers come from an async function of the call's
input items and offered tool names. It streams each answer the way a Responses API model does (reasoning
summary deltas, then text deltas, in word chunks, and a closing `ResponseCompletedEvent`), so the agent
runs the SDK's real agent loop, through `OpenAIAgentsRunner` or `Runner.run`, with no key and no network.
`scripted_stream_events` builds that stream on its own, for a model of your own.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

__all__ = [
    "Answerer",
    "ScriptedAnswer",
    "ScriptedResponsesModel",
    "call_item",
    "reasoning_item",
    "scripted_stream_events",
    "text_item",
]

# Each chunk keeps its trailing whitespace, so the chunks add up to the text exactly.
_CHUNK = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class ScriptedAnswer:
    """One scripted model answer.

    Attributes:
        output: The response's output items, in order (see `text_item`, `reasoning_item`, `call_item`).
        input_tokens: The usage the response reports.
        output_tokens: The usage the response reports.
    """

    output: Sequence[TResponseOutputItem]
    input_tokens: int = 10
    output_tokens: int = 5


Answerer = Callable[[list[TResponseInputItem], Sequence[str]], Awaitable[ScriptedAnswer]]
"""Answers one model call from its input items and the names of the tools (and handoffs) it was offered."""


def text_item(text: str, *, item_id: str = "msg") -> TResponseOutputItem:
    """Return an assistant message output item holding ``text``.

    Args:
        text: The message's text, streamed in word chunks.
        item_id: The item's ID.
    """
    return ResponseOutputMessage(
        id=item_id,
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


def reasoning_item(summary: str, *, item_id: str = "rs") -> TResponseOutputItem:
    """Return a reasoning output item with one summary text.

    Args:
        summary: The summary's text, streamed in word chunks.
        item_id: The item's ID.
    """
    return ResponseReasoningItem(
        id=item_id, type="reasoning", summary=[Summary(text=summary, type="summary_text")]
    )


def call_item(name: str, arguments: Mapping[str, object], call_id: str) -> TResponseOutputItem:
    """Return a function call output item (a tool call, or a handoff by its tool name).

    Args:
        name: The tool's name.
        arguments: The call's arguments, sent as JSON with sorted keys.
        call_id: The tool call ID; also the item's ID.
    """
    return ResponseFunctionToolCall(
        id=call_id,
        call_id=call_id,
        type="function_call",
        name=name,
        arguments=json.dumps(dict(arguments), sort_keys=True),
    )


def scripted_stream_events(
    answer: ScriptedAnswer, *, response_id: str = "resp", model_name: str = "dex-scripted"
) -> Iterator[TResponseStreamEvent]:
    """Yield the Responses API stream of ``answer``, as `Model.stream_response` must.

    Every reasoning summary and message text is sent as deltas in word chunks, in output order, and the
    stream ends with a `ResponseCompletedEvent` holding the whole response and its usage.

    Args:
        answer: The response to stream.
        response_id: The response's ID.
        model_name: The model name the response reports.
    """
    sequence = 0
    for index, item in enumerate(answer.output):
        if isinstance(item, ResponseReasoningItem):
            for summary_index, summary in enumerate(item.summary):
                for chunk in _CHUNK.findall(summary.text):
                    yield ResponseReasoningSummaryTextDeltaEvent(
                        type="response.reasoning_summary_text.delta",
                        item_id=item.id,
                        output_index=index,
                        summary_index=summary_index,
                        delta=chunk,
                        sequence_number=sequence,
                    )
                    sequence += 1
        if isinstance(item, ResponseOutputMessage):
            for part in item.content:
                for chunk in _CHUNK.findall(getattr(part, "text", "")):
                    yield ResponseTextDeltaEvent(
                        type="response.output_text.delta",
                        item_id=item.id,
                        output_index=index,
                        content_index=0,
                        delta=chunk,
                        logprobs=[],
                        sequence_number=sequence,
                    )
                    sequence += 1
    usage = _usage(answer)
    response = Response(
        id=response_id,
        created_at=0,
        model=model_name,
        object="response",
        output=list(answer.output),
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
    yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=sequence)


class ScriptedResponsesModel(Model):
    """A Responses-style `agents.Model` whose answers come from ``answer``; it streams and never calls out.

    Args:
        answer: Answers each model call from its input items and offered tool names.
        response_id: The ID every response reports.
        model_name: The model name every response reports.
    """

    def __init__(
        self, answer: Answerer, *, response_id: str = "resp", model_name: str = "dex-scripted"
    ) -> None:
        self._answer = answer
        self._response_id = response_id
        self._model_name = model_name

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
        """Answer one call without streaming."""
        answer = await self._answer(_items(input), _offered(tools, handoffs))
        return ModelResponse(output=list(answer.output), usage=_usage(answer), response_id=self._response_id)

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
        """Answer one call as a stream (see `scripted_stream_events`)."""
        answer = await self._answer(_items(input), _offered(tools, handoffs))
        for event in scripted_stream_events(
            answer, response_id=self._response_id, model_name=self._model_name
        ):
            yield event


def _items(value: str | list[TResponseInputItem]) -> list[TResponseInputItem]:
    if isinstance(value, str):
        return [cast(TResponseInputItem, {"role": "user", "content": value})]
    return list(value)


def _offered(tools: Sequence[Tool], handoffs: Sequence[Handoff]) -> list[str]:
    return [str(getattr(tool, "name", type(tool).__name__)) for tool in tools] + [
        handoff.tool_name for handoff in handoffs
    ]


def _usage(answer: ScriptedAnswer) -> Usage:
    return Usage(
        requests=1,
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        total_tokens=answer.input_tokens + answer.output_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )
