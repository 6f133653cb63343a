"""Scripted models in the OpenAI Agents SDK's own model slot (an `agents.Model` subclass), no network.

`ScriptedSdkModel` answers each call from an async function of the input items and streams its text as
`ResponseTextDeltaEvent`s before a `ResponseCompletedEvent`, exactly as a Responses API model would, so
the agent under test runs the SDK's real agent loop. `matrix_model()` answers from the
`dex_agents.testing` script store, which logs every call with its Step execution and attempt.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
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
from agents.testing import assistant_message, function_call
from dex_agents.testing import scripted_model_response
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseOutputMessage,
    ResponseReasoningItem,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseTextDeltaEvent,
    ResponseUsage,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

_CHUNK = re.compile(r"\S+\s*|\s+")


@dataclass(frozen=True)
class ScriptedAnswer:
    """One model answer: output items (text messages and function calls) and the usage it reports."""

    output: Sequence[TResponseOutputItem]
    input_tokens: int = 10
    output_tokens: int = 5


Answer = Callable[[list[TResponseInputItem], Sequence[str]], Awaitable[ScriptedAnswer]]
"""Answers one model call from its input items and the names of the tools it was offered."""


def text(value: str) -> TResponseOutputItem:
    return assistant_message(value, item_id="msg")


def reasoning(summary: str) -> TResponseOutputItem:
    return ResponseReasoningItem(
        id="rs", type="reasoning", summary=[Summary(text=summary, type="summary_text")]
    )


def call(name: str, arguments: Mapping[str, object], call_id: str) -> TResponseOutputItem:
    return function_call(name, json.dumps(dict(arguments), sort_keys=True), call_id=call_id)


def render_model_input(items: Sequence[TResponseInputItem]) -> list[str]:
    """Render what a model call sees as one text per input item."""
    texts: list[str] = []
    for raw in items:
        item = cast(Mapping[str, Any], raw)
        kind = item.get("type")
        if kind == "function_call":
            texts.append(f"assistant calls {item['name']} {item['arguments']} [{item['call_id']}]")
        elif kind == "function_call_output":
            texts.append(f"tool [{item['call_id']}]: {item['output']}")
        elif kind in (None, "message"):
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(
                    str(cast(Mapping[str, Any], part).get("text", "")) for part in cast(list[object], content)
                )
            texts.append(f"{item.get('role')}: {content}")
        else:
            texts.append(f"{kind}: {json.dumps(item, sort_keys=True)}")
    return texts


class ScriptedSdkModel(Model):
    """A Responses-style model whose answers come from ``answer``."""

    def __init__(self, answer: Answer) -> None:
        self._answer = answer

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
        answer = await self._answer(_items(input), _offered(tools, handoffs))
        return ModelResponse(output=list(answer.output), usage=_usage(answer), response_id="resp")

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
        answer = await self._answer(_items(input), _offered(tools, handoffs))
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
            id="resp",
            created_at=0,
            model="dex-scripted",
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
                input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
                output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            ),
        )
        yield ResponseCompletedEvent(type="response.completed", response=response, sequence_number=sequence)


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


async def _matrix_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del offered
    response = await scripted_model_response(render_model_input(items))
    output: list[TResponseOutputItem] = []
    if response.text:
        output.append(text(response.text))
    output.extend(
        call(scripted.tool_name, scripted.arguments, scripted.tool_call_id)
        for scripted in response.tool_calls
    )
    return ScriptedAnswer(output, response.input_tokens, response.output_tokens)


def matrix_model() -> ScriptedSdkModel:
    """Return the scripted model of the matrix agent."""
    return ScriptedSdkModel(_matrix_answer)
