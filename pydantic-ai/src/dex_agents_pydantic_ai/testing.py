"""A scripted Pydantic AI model, for developing and testing agents offline.

`ScriptedModel` is a Pydantic AI `Model` (a `FunctionModel`), so it goes in the agent's own model slot,
`Agent(ScriptedModel(...))` or `PydanticAiRunner(agent, model=ScriptedModel(...))`, and the agent runs
Pydantic AI's real agent loop with no key and no network. It answers in one of three ways:

- a list of answers, each a text or a `ModelResponse` (text, tool calls, thinking). Which answer a call
  gets follows from the conversation it is shown, not from a counter: the first answer goes to a call
  whose messages hold no model response yet, the second to a call whose messages hold one, and so on.
  So a retried call, or the same call in another Worker process, gets the same answer, as a durable
  session needs;
- a function of the messages the call is shown (plain or `async`), returning a text or a
  `ModelResponse`, for a model that reacts to tool results;
- `ScriptedModel.from_script_store()`: the script of `dex_agents.testing`'s `ScriptStore`, for tests on the
  `dex_agents.testing` stack (matrix, runner contract). Wrap the runner with
  `dex_agents.testing.with_model_call_scope`, which tells the model which session and turn it answers.

Streamed calls send text in word chunks (`dex_agents.testing.text_chunks`), then thinking and tool calls,
so live `text_delta` events add up to the stored text; a response's text parts stream as one text part.
Each response reports what a provider's would, for tracing: the model's name, the provider
``dex.scripted`` (`SCRIPTED_PROVIDER_NAME`), a response ID
``<model name>-<n>`` for the answer to a call shown n - 1 model responses (so a retried call reports the
same one), and the finish reason: ``tool_calls`` when it calls tools, else ``stop``, as the provider's
own reason in ``provider_details`` and Pydantic AI's normalized one (``tool_call``, ``stop``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeAlias

from dex_agents.testing import (
    DEFAULT_SCRIPTED_SUMMARY,  # re-exported: the kit's default, shared by every adapter's scripted model
    ScriptedResponse,
    ScriptStore,
    current_model_call,
    scripted_model_response,
    text_chunks,
)
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    NativeToolCallPart,
    NativeToolReturnPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters, StreamedResponse
from pydantic_ai.models.function import (
    AgentInfo,
    BuiltinToolCallsReturns,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import RunContext

from dex_agents_pydantic_ai._transcript import render_transcript

__all__ = [
    "DEFAULT_SCRIPTED_SUMMARY",
    "SCRIPTED_PROVIDER_NAME",
    "Answerer",
    "ScriptedAnswer",
    "ScriptedModel",
    "ScriptedModelCall",
]

ScriptedAnswer: TypeAlias = str | ModelResponse | ScriptedResponse
"""One answer of a `ScriptedModel`: a text, a whole `ModelResponse` (text, tool calls, thinking), or the
core's `ScriptedResponse` (its text and tool calls; a call without a ``tool_call_id`` gets one)."""

Answerer: TypeAlias = Callable[[list[ModelMessage]], ScriptedAnswer | Awaitable[ScriptedAnswer]]
"""A function that answers a model call from the messages it is shown, plain or `async`."""
_CallAnswerer: TypeAlias = Callable[
    [list[ModelMessage], AgentInfo], ScriptedAnswer | Awaitable[ScriptedAnswer]
]
_StreamItem: TypeAlias = str | DeltaToolCalls | DeltaThinkingCalls | BuiltinToolCallsReturns
SCRIPTED_PROVIDER_NAME = "dex.scripted"
"""The provider a `ScriptedModel` reports (`Model.system`), as the core's `ScriptedRunner` does."""
_KEPT_CALLS = 200
# The answer of the streamed call in progress, so `request_stream` can report its identity and finish reason.
_STREAMED_ANSWER: ContextVar[list[ModelResponse] | None] = ContextVar("_STREAMED_ANSWER", default=None)
_STREAMABLE_PARTS = (TextPart, ThinkingPart, ToolCallPart, NativeToolCallPart, NativeToolReturnPart)


@dataclass(frozen=True)
class ScriptedModelCall:
    """One call a `ScriptedModel` answered in this process.

    Attributes:
        messages: The messages the call was shown.
        tool_names: The function tools the call was offered, by name.
    """

    messages: list[ModelMessage]
    tool_names: tuple[str, ...]

    @property
    def tool_returns(self) -> list[BaseToolReturnPart]:
        """The tool results among the messages, in order."""
        return [
            part
            for message in self.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, BaseToolReturnPart)
        ]

    @property
    def user_prompts(self) -> list[str]:
        """The user prompts among the messages, in order, as text."""
        return [
            str(part.content)
            for message in self.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]


class ScriptedModel(FunctionModel):
    """A Pydantic AI model that answers from a script (see the module docstring).

    Args:
        answers: The answers in conversation order, or a function of the messages a call is shown.
        model_name: The name the model reports.

    Raises:
        TypeError: If an answer is neither a text nor a `ModelResponse`, or holds a part the model cannot
            stream (only text, thinking, tool calls and provider-side tool parts stream).
    """

    def __init__(self, answers: Sequence[ScriptedAnswer] | Answerer, *, model_name: str = "scripted") -> None:
        if callable(answers):
            answerer = answers
            self._answerer: _CallAnswerer = lambda messages, info: answerer(messages)
        else:
            script = [_as_response(answer, position) for position, answer in enumerate(answers)]
            self._answerer = lambda messages, info: _answer_in_conversation_order(script, messages)
        self._calls: deque[ScriptedModelCall] = deque(maxlen=_KEPT_CALLS)
        super().__init__(self._answer, stream_function=self._stream, model_name=model_name)
        # The provider the model reports (`Model.system`, the `gen_ai.provider.name` of its chat spans), as
        # the core's `ScriptedRunner` reports it; `FunctionModel` would say "function".
        self._system = SCRIPTED_PROVIDER_NAME

    @classmethod
    def from_script_store(cls, store: ScriptStore | None = None) -> ScriptedModel:
        """Return a model that answers from `dex_agents.testing`'s script store.

        Each call renders what it is shown as one line per message part (user prompts, tool results,
        response text and tool calls; instructions and system prompts are left out) and awaits
        `dex_agents.testing.scripted_model_response`, which logs the call with its session, turn, Step
        execution and attempt, holds it at the script's gates, and, for a response that
        `block_until_cancelled`, waits until the call's coroutine is cancelled (and logs that). A context
        summary call (the runner's `summarize_context` inside `with_model_call_scope`) answers from the
        session's summary script (`ScriptStore.set_summaries`), with `DEFAULT_SCRIPTED_SUMMARY` when the
        script gives no text.

        Args:
            store: The script store; by default the one named by ``DEX_AGENTS_TEST_STATE_DIR``.
        """

        async def answer(messages: list[ModelMessage], info: AgentInfo) -> ScriptedAnswer:
            # Every tool the model is offered (the agent's, the session's built-ins, an MCP source's).
            offered = [tool.name for tool in info.function_tools]
            response = await scripted_model_response(
                render_transcript(messages), store, offered_tools=offered
            )
            scope = current_model_call()
            if scope is not None and scope.is_summary and not response.text:
                # The summary script leaves the text to the runner; a real summary must not be blank.
                return DEFAULT_SCRIPTED_SUMMARY
            return _scripted_response(response, _responses_shown(messages))

        model = cls((), model_name="dex-scripted")
        model._answerer = answer
        return model

    @property
    def calls(self) -> list[ScriptedModelCall]:
        """The last 200 calls this model answered in this process, oldest first.

        A Worker process's calls stay in that process; across processes, `ScriptStore.invocations` logs
        the calls of a model `from_script_store`.
        """
        return list(self._calls)

    async def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self._calls.append(
            ScriptedModelCall(list(messages), tuple(tool.name for tool in info.function_tools))
        )
        answer = self._answerer(messages, info)
        if inspect.isawaitable(answer):
            answer = await answer
        position = _responses_shown(messages)
        response = _as_response(answer, position)
        calls_tools = bool(response.tool_calls)
        # A copy: Pydantic AI sets the model name and usage on the response it is given.
        response = dataclasses.replace(
            response,
            provider_response_id=f"{self.model_name}-{position + 1}",
            provider_details={"finish_reason": "tool_calls" if calls_tools else "stop"},
            finish_reason="tool_call" if calls_tools else "stop",
        )
        streamed = _STREAMED_ANSWER.get()
        if streamed is not None:
            streamed.append(response)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        """Stream the answer as `FunctionModel` does, reporting its response ID and finish reason."""
        answered: list[ModelResponse] = []
        token = _STREAMED_ANSWER.set(answered)
        try:
            async with super().request_stream(
                messages, model_settings, model_request_parameters, run_context
            ) as streamed:
                # Pydantic AI read the stream's first item before handing it over, so the call has answered.
                if answered:
                    streamed.provider_response_id = answered[-1].provider_response_id
                    streamed.provider_details = answered[-1].provider_details
                    streamed.finish_reason = answered[-1].finish_reason
                yield streamed
        finally:
            _STREAMED_ANSWER.reset(token)

    async def _stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[_StreamItem]:
        response = await self._answer(messages, info)
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for chunk in text_chunks(part.content):
                    yield chunk
            elif isinstance(part, ThinkingPart):
                yield {index: DeltaThinkingPart(content=part.content, signature=part.signature)}
            elif isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id
                    )
                }
            elif isinstance(part, NativeToolCallPart | NativeToolReturnPart):
                yield {index: part}


def _responses_shown(messages: Sequence[ModelMessage]) -> int:
    return sum(1 for message in messages if isinstance(message, ModelResponse))


def _as_response(answer: object, position: int) -> ModelResponse:
    if isinstance(answer, ScriptedResponse):
        return _scripted_response(answer, position)
    if isinstance(answer, str):
        return ModelResponse(parts=[TextPart(answer)])
    if not isinstance(answer, ModelResponse):
        raise TypeError(
            "a ScriptedModel answer is a str, a ModelResponse or a ScriptedResponse, got "
            f"{type(answer).__name__}"
        )
    for part in answer.parts:
        if not isinstance(part, _STREAMABLE_PARTS):
            raise TypeError(
                f"ScriptedModel cannot answer with a {type(part).__name__}; it answers with text, thinking, "
                "tool calls and provider-side tool parts"
            )
    return answer


def _answer_in_conversation_order(
    script: Sequence[ModelResponse], messages: Sequence[ModelMessage]
) -> ModelResponse:
    position = sum(1 for message in messages if isinstance(message, ModelResponse))
    if position >= len(script):
        raise LookupError(
            f"ScriptedModel has {len(script)} answers, and this call is shown {position} model responses "
            f"already, so it would need answer {position + 1}"
        )
    return script[position]


def _scripted_response(response: ScriptedResponse, position: int) -> ModelResponse:
    """The response of the answer to a call shown ``position`` model responses.

    A call without an ID gets ``call-<n>-<k>``, the k-th call of answer n, so a retried call, or the same
    call in another Worker, gets the same ID.
    """
    parts: list[ModelResponsePart] = [TextPart(response.text)] if response.text else []
    parts.extend(
        ToolCallPart(
            call.tool_name,
            call.arguments_json,
            tool_call_id=call.tool_call_id or f"call-{position + 1}-{index + 1}",
        )
        for index, call in enumerate(response.tool_calls)
    )
    return ModelResponse(parts=parts)
