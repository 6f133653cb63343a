"""A scripted Responses API model in the SDK's own model slot, for running agents offline and in tests.

`ScriptedResponsesModel` is an `agents.Model`: put it in an agent's ``model`` slot, where a real OpenAI
model would go, and the agent runs the SDK's real agent loop (through `OpenAIAgentsRunner` or
`Runner.run`) with no key and no network. It streams each answer the way a Responses API model does
(reasoning summary deltas, then text deltas in word chunks, and a closing `ResponseCompletedEvent`) and
records what each call saw (`ScriptedResponsesModel.calls`). It answers in one of three ways:

- `ScriptedResponsesModel.from_answers`: a list of answers (text, tool calls), one per model call, in
  order; no test kit needed;
- `ScriptedResponsesModel.from_script_store`: from a `dex_agents.testing.ScriptStore`, as every adapter's
  scripted model does in the shared matrix and contract tests;
- `ScriptedResponsesModel(answer)`: from an async function of the call's input items and offered tools.

`scripted_stream_events` builds the stream on its own, for a model of your own.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
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
from dex_agents.testing import (
    DEFAULT_SCRIPTED_SUMMARY,
    ScriptedResponse,
    ScriptStore,
    current_model_call,
    scripted_model_response,
    text_chunks,
)
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
    "SCRIPTED_PROVIDER_NAME",
    "Answerer",
    "ScriptedAnswer",
    "ScriptedModelCall",
    "ScriptedResponsesModel",
    "call_item",
    "reasoning_item",
    "render_model_input",
    "scripted_stream_events",
    "text_item",
]


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


@dataclass(frozen=True)
class ScriptedModelCall:
    """What one call of a `ScriptedResponsesModel` was given.

    Attributes:
        input_items: The call's input items: the conversation the model sees.
        offered_tools: The names of the tools (and handoffs) the call offered the model.
        instructions: The call's system instructions, if any.
    """

    input_items: list[TResponseInputItem] = field(default_factory=list[TResponseInputItem])
    offered_tools: list[str] = field(default_factory=list[str])
    instructions: str | None = None

    def tool_outputs(self) -> dict[str, str]:
        """Return the output of every tool call in the input, by tool call ID."""
        outputs: dict[str, str] = {}
        for raw in self.input_items:
            item = cast(Mapping[str, Any], raw)
            if item.get("type") == "function_call_output":
                outputs[str(item.get("call_id"))] = str(item.get("output"))
        return outputs


SCRIPTED_PROVIDER_NAME = "dex.scripted"
"""The provider a `ScriptedResponsesModel` reports to tracing (``gen_ai.provider.name``), as the core's
`dex_agents.testing.ScriptedRunner` does."""

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


def call_item(
    name: str, arguments: Mapping[str, object] | None = None, call_id: str | None = None
) -> TResponseOutputItem:
    """Return a function call output item (a tool call, or a handoff by its tool name).

    Args:
        name: The tool's name.
        arguments: The call's arguments, sent as JSON with sorted keys; none is ``{}``.
        call_id: The tool call ID, also the item's ID; ``call-<12 hex digits>`` when left out.
    """
    call_id = call_id or f"call-{uuid.uuid4().hex[:12]}"
    arguments = arguments or {}
    return ResponseFunctionToolCall(
        id=call_id,
        call_id=call_id,
        type="function_call",
        name=name,
        arguments=json.dumps(dict(arguments), sort_keys=True),
    )


def render_model_input(items: Sequence[TResponseInputItem]) -> list[str]:
    """Render what a model call sees as one text per input item, as the script store logs it.

    Messages are ``<role>: <text>``, calls ``assistant calls <tool> <arguments> [<id>]``, and results
    ``tool <tool> [<id>]: <output>``; any other item is its type and JSON.

    Args:
        items: The call's input items.

    Returns:
        The texts.
    """
    names: dict[str, str] = {}
    texts: list[str] = []
    for raw in items:
        item = cast(Mapping[str, Any], raw)
        kind = item.get("type")
        if kind == "function_call":
            names[str(item.get("call_id"))] = str(item.get("name"))
            texts.append(
                f"assistant calls {item.get('name')} {item.get('arguments')} [{item.get('call_id')}]"
            )
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            texts.append(f"tool {names.get(call_id, '?')} [{call_id}]: {item.get('output')}")
        elif kind in (None, "message"):
            content = item.get("content")
            if isinstance(content, list):
                parts = cast(list[object], content)
                content = "".join(
                    str(cast(Mapping[str, Any], part).get("text", ""))
                    for part in parts
                    if isinstance(part, Mapping)
                )
            texts.append(f"{item.get('role')}: {content}")
        else:
            texts.append(f"{kind}: {json.dumps(item, sort_keys=True)}")
    return texts


def scripted_stream_events(
    answer: ScriptedAnswer, *, response_id: str = "resp", model_name: str = "dex-scripted"
) -> Iterator[TResponseStreamEvent]:
    """Yield the Responses API stream of ``answer``, as `Model.stream_response` must.

    Every reasoning summary and message text is sent as deltas in word chunks
    (`dex_agents.testing.text_chunks`), in output order, and the stream ends with a
    `ResponseCompletedEvent` holding the whole response and its usage.

    Args:
        answer: The response to stream.
        response_id: The response's ID.
        model_name: The model name the response reports.
    """
    sequence = 0
    for index, item in enumerate(answer.output):
        if isinstance(item, ResponseReasoningItem):
            for summary_index, summary in enumerate(item.summary):
                for chunk in text_chunks(summary.text):
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
                for chunk in text_chunks(getattr(part, "text", "")):
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

    Tracing reports its ``model`` (the model name) as the request and response model and its
    ``provider_name`` (`SCRIPTED_PROVIDER_NAME`) as the provider, as it would a real model's.

    Args:
        answer: Answers each model call from its input items and offered tool names.
        response_id: The ID every response reports.
        model_name: The model name every response reports.
    """

    provider_name: str = SCRIPTED_PROVIDER_NAME
    """The provider tracing reports for this model's calls."""

    def __init__(
        self, answer: Answerer, *, response_id: str = "resp", model_name: str = "dex-scripted"
    ) -> None:
        self._answer = answer
        self._response_id = response_id
        self._model_name = model_name
        self._calls: list[ScriptedModelCall] = []

    @classmethod
    def from_answers(
        cls,
        answers: Sequence[ScriptedAnswer | ScriptedResponse | Sequence[TResponseOutputItem] | str],
        *,
        model_name: str = "dex-scripted",
    ) -> ScriptedResponsesModel:
        """Return a model that gives the n-th answer to its n-th call; no test kit needed.

        The model counts its own calls in its own process: every call made through this object, in any
        session, takes the next answer, and a new process starts from the first. That suits a run in
        process (`Runner.run`, or `OpenAIAgentsRunner` driven by a test) and a demo with one Worker; for
        sessions whose Workers restart or whose model calls are retried, answer from committed state
        with `from_script_store` instead.

        Args:
            answers: One answer per model call: a `ScriptedAnswer`, its output items (such as
                ``[text_item("Let me look."), call_item("lookup_order", {"order_id": "A-1"}, "call-1")]``),
                text for an answer that is only that text, or the kit's `dex_agents.testing.ScriptedResponse`
                (its text, then its `ScriptedToolCall`s; a call without an ID gets ``call-<n>-<i>``, the
                n-th answer's i-th call).
            model_name: The model name every response reports.

        Returns:
            The model. A call after the last answer raises `RuntimeError`, which fails the model call.
        """
        script = [_scripted_answer(answer, number) for number, answer in enumerate(answers, start=1)]
        numbers = itertools.count(1)

        async def next_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
            del items, offered
            number = next(numbers)
            if number > len(script):
                raise RuntimeError(
                    f"the scripted model has no answer for model call {number}: it was given "
                    f"{len(script)} answer(s)"
                )
            return script[number - 1]

        return cls(next_answer, model_name=model_name)

    @classmethod
    def from_script_store(
        cls, store: ScriptStore | None = None, *, model_name: str = "dex-scripted"
    ) -> ScriptedResponsesModel:
        """Return a model that answers from a `dex_agents.testing` script store.

        Each call renders its input with `render_model_input` and awaits
        `dex_agents.testing.scripted_model_response`, which logs the call, holds it at the script's gates,
        fails it on the script's failing attempts, and blocks until it is cancelled when the script says
        so; the scripted text and tool calls come back as a streamed response. A context summary call
        (`summarize_context` inside `with_model_call_scope`) answers from the session's summary script
        (`ScriptStore.set_summaries`), with `DEFAULT_SCRIPTED_SUMMARY` when it gives no text. The runner
        must be wrapped with `dex_agents.testing.with_model_call_scope` (the matrix harness does), so the
        store knows the call's session, turn and attempt.

        Args:
            store: The script store; by default the one ``DEX_AGENTS_TEST_STATE_DIR`` names, which
                `dex_agents.testing.AgentTestStack` sets for its Workers, read on each call.
            model_name: The model name every response reports.

        Returns:
            The model.
        """

        async def scripted_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
            response = await scripted_model_response(render_model_input(items), store, offered_tools=offered)
            scope = current_model_call()
            if scope is not None and scope.is_summary and not response.text:
                # The summary script leaves the text to the runner; a real summary must not be blank.
                return ScriptedAnswer([text_item(DEFAULT_SCRIPTED_SUMMARY)])
            # A call without an ID gets one from the input's length: the same on a retried attempt.
            return _from_scripted_response(response, len(items))

        return cls(scripted_answer, model_name=model_name)

    @property
    def model(self) -> str:
        """The model name every response reports."""
        return self._model_name

    @property
    def calls(self) -> list[ScriptedModelCall]:
        """Every call this model was asked to answer, oldest first."""
        return list(self._calls)

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
        answer = await self._answer_call(system_instructions, input, tools, handoffs)
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
        answer = await self._answer_call(system_instructions, input, tools, handoffs)
        for event in scripted_stream_events(
            answer, response_id=self._response_id, model_name=self._model_name
        ):
            yield event

    async def _answer_call(
        self,
        instructions: str | None,
        value: str | list[TResponseInputItem],
        tools: Sequence[Tool],
        handoffs: Sequence[Handoff],
    ) -> ScriptedAnswer:
        items = (
            [cast(TResponseInputItem, {"role": "user", "content": value})]
            if isinstance(value, str)
            else list(value)
        )
        offered = [str(getattr(tool, "name", type(tool).__name__)) for tool in tools]
        offered.extend(handoff.tool_name for handoff in handoffs)
        self._calls.append(ScriptedModelCall(items, offered, instructions))
        return await self._answer(items, offered)


def _from_scripted_response(response: ScriptedResponse, call_number: int) -> ScriptedAnswer:
    """The answer for the kit's shape: its text, then its calls (a call without an ID gets one)."""
    output: list[TResponseOutputItem] = [text_item(response.text)] if response.text else []
    output.extend(
        call_item(
            call.tool_name,
            call.arguments,
            # Derived from the call's place, so a retried model call repeats the same IDs.
            getattr(call, "tool_call_id", None) or f"call-{call_number}-{index}",
        )
        for index, call in enumerate(response.tool_calls, start=1)
    )
    return ScriptedAnswer(output, response.input_tokens, response.output_tokens)


def _scripted_answer(
    answer: ScriptedAnswer | ScriptedResponse | Sequence[TResponseOutputItem] | str, call_number: int
) -> ScriptedAnswer:
    if isinstance(answer, ScriptedAnswer):
        return answer
    if isinstance(answer, ScriptedResponse):
        return _from_scripted_response(answer, call_number)
    if isinstance(answer, str):
        return ScriptedAnswer([text_item(answer)])
    return ScriptedAnswer(list(answer))


def _usage(answer: ScriptedAnswer) -> Usage:
    return Usage(
        requests=1,
        input_tokens=answer.input_tokens,
        output_tokens=answer.output_tokens,
        total_tokens=answer.input_tokens + answer.output_tokens,
        input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
    )
