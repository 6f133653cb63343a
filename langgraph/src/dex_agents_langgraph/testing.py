"""A scripted chat model for offline development and tests: `ScriptedChatModel`.

LangChain's own fake chat models do not run inside `create_agent`: `GenericFakeChatModel.bind_tools` raises
a bare `NotImplementedError`, and its streaming drops tool calls. `ScriptedChatModel` is a `BaseChatModel`
for the agent's own model slot: `bind_tools` works, it streams its text in word chunks and then its tool
calls and usage as one last chunk, as a provider does, and it answers `invoke`, `ainvoke`, `stream` and
`astream`, inside `create_agent`, your own graph, `LangGraphRunner`, or on its own.

It answers in one of three ways:

- ``ScriptedChatModel(responses=[...])``: from a list of answers (`AIMessage`, or plain text), in conversation
  order. Model call ``n`` of a conversation is the one whose input holds ``n - 1`` model answers, so a
  turn resumed in another Worker process, or a retried model call, gets the same answer.
- ``ScriptedChatModel(respond=function)``: from a function of the call's input messages, which decides as a
  real model does, from the conversation alone (what the tools returned, whether a call was rejected); the
  same input gets the same answer.
- ``ScriptedChatModel()``: from the session script of `dex_agents.testing` (a `ScriptStore`, through
  `scripted_model_response`), for tests that run a runner wrapped with `with_model_call_scope`, such as
  `AgentMatrixTests`. The script's gates, failures and ``block_until_cancelled`` apply; its other
  runner-specific fields (``partial_text``, ``thread_text``, ``late_text``, ``turn_error``,
  ``run_state_padding``) do not.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, cast

from dex_agents.testing import ScriptedResponse, current_model_call, scripted_model_response, text_chunks
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolCallChunk,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, field_validator, model_validator

__all__ = ["ScriptedChatModel", "render_model_input"]


def render_model_input(messages: Sequence[BaseMessage]) -> list[str]:
    """Render what a model call receives as one text per message and per tool call.

    System, user and assistant texts read ``system: ...``, ``user: ...`` and ``assistant: ...``; each tool
    call of an assistant message reads ``assistant calls <name> <arguments JSON> [<tool call ID>]``; a tool
    result reads ``tool <name> [<tool call ID>] <status>: <text>``.

    Args:
        messages: The model call's input messages.

    Returns:
        The texts, in input order.
    """
    texts: list[str] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            texts.append(f"system: {message.text}")
        elif isinstance(message, HumanMessage):
            texts.append(f"user: {message.text}")
        elif isinstance(message, AIMessage):
            if message.text:
                texts.append(f"assistant: {message.text}")
            for call in message.tool_calls:
                arguments = json.dumps(call["args"], sort_keys=True)
                texts.append(f"assistant calls {call['name']} {arguments} [{call['id']}]")
        elif isinstance(message, ToolMessage):
            texts.append(f"tool {message.name} [{message.tool_call_id}] {message.status}: {message.text}")
    return texts


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script, for offline development and tests.

    With ``responses``, model call ``n`` of a conversation answers ``responses[n - 1]``, where ``n - 1`` is
    the number of model answers (`AIMessage`) in the call's input; with ``respond``, each call answers what
    the function returns for its input messages. A text stands for ``AIMessage(text)``, and an answer
    without ``usage_metadata`` reports an estimate: one token per word of the input and of the answer.
    With neither, each call answers from the session script of `dex_agents.testing`, which works only
    inside a ``RunModel`` call of a runner wrapped with ``with_model_call_scope``.

    Use it as any chat model::

        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage
        from langchain_core.messages.tool import tool_call

        lookup = tool_call(name="lookup_order", args={"order_id": "7"}, id="lookup-1")
        model = ScriptedChatModel(
            responses=[AIMessage("Let me look.", tool_calls=[lookup]), "Order 7 has shipped."]
        )
        agent = create_agent(model, tools=[lookup_order])

    The model keeps what every call saw (``inputs``, ``offered_tools``), for tests to assert on; a
    long-running process keeps all of it. Each answer reports, as a provider's does, the model name and a
    finish reason (``tool_calls`` or ``stop``) and a response ID (``scripted-<hex>``) in
    ``response_metadata``; its provider (``ls_provider``, which LangSmith and the runner's tracing
    metadata read) is ``dex.scripted``.

    Attributes:
        responses: The answers in conversation order, or `None`: `AIMessage`s, texts, or the core's
            `dex_agents.testing.ScriptedResponse` (its text, tool calls and token counts), each made an
            `AIMessage`. A `ScriptedToolCall` without an ID gets one (``call-<hex>``), as a provider gives
            it; an `AIMessage` is answered exactly as given.
        respond: Returns the answer (an `AIMessage`, or text) to a call's input messages, or `None`. At most
            one of ``responses`` and ``respond`` is given; with neither, the session script answers.
        inputs: Each call's input messages, oldest call first.
        offered_tools: The names of the tools each call was offered, oldest call first.
        model_name: The model name every answer reports in ``response_metadata``.
        temperature: A sampling temperature the model reports for its calls, as a provider's chat model
            does (LangSmith's ``ls_temperature``, the runner's tracing metadata); the script ignores it.
        max_tokens: An output token limit the model reports the same way (``ls_max_tokens``); the script
            ignores it.
    """

    responses: Sequence[AIMessage | str | ScriptedResponse] | None = None
    respond: Callable[[Sequence[BaseMessage]], AIMessage | str] | None = Field(default=None, exclude=True)
    inputs: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])
    offered_tools: list[list[str]] = Field(default_factory=list[list[str]])
    model_name: str = "dex-scripted"
    temperature: float | None = None
    max_tokens: int | None = None

    @field_validator("responses", mode="before")
    @classmethod
    def _texts_as_messages(cls, responses: object) -> object:
        # Before validation: LangChain's own validator of `AIMessage` cannot read a plain text.
        if isinstance(responses, list | tuple):
            return [_as_message(response) for response in cast(Sequence[object], responses)]
        return responses

    @model_validator(mode="after")
    def _one_way_to_answer(self) -> ScriptedChatModel:
        if self.responses is not None and self.respond is not None:
            raise ValueError("ScriptedChatModel takes responses or respond, not both")
        return self

    @property
    def _llm_type(self) -> str:
        return "dex-scripted"

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "dex.scripted"
        params["ls_model_name"] = self.model_name
        return params

    def input_texts(self, call_number: int) -> list[str]:
        """Return what model call ``call_number`` (one-based) saw, rendered by `render_model_input`."""
        return render_model_input(self.inputs[call_number - 1])

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offer the model tools; the script, not ``tool_choice``, decides which it calls.

        Args:
            tools: The tools, in any form `convert_to_openai_tool` accepts.
            tool_choice: Accepted and ignored.
            **kwargs: Bound to the model's calls.

        Returns:
            The model with the tools bound.
        """
        del tool_choice
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._record(messages, kwargs)
        return ChatResult(generations=[ChatGeneration(message=self._listed_answer(messages, "invoke"))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        self._record(messages, kwargs)
        yield from _chunks(self._listed_answer(messages, "stream"))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        offered = self._record(messages, kwargs)
        return ChatResult(generations=[ChatGeneration(message=await self._answer(messages, offered))])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        offered = self._record(messages, kwargs)
        for chunk in _chunks(await self._answer(messages, offered)):
            yield chunk

    def _record(self, messages: list[BaseMessage], call_options: dict[str, Any]) -> list[str]:
        """Keep the call's input and the names of the tools it was offered, and return those names."""
        self.inputs.append(list(messages))
        tools = cast(Sequence[dict[str, Any]], call_options.get("tools") or ())
        offered = [_tool_name(tool) for tool in tools]
        self.offered_tools.append(offered)
        return offered

    async def _answer(self, messages: list[BaseMessage], offered_tools: Sequence[str]) -> AIMessage:
        if self.responses is not None or self.respond is not None:
            return self._listed_answer(messages, "ainvoke")
        if current_model_call() is None:
            raise RuntimeError(
                "ScriptedChatModel() without responses answers from dex_agents.testing's session script, "
                "which needs a RunModel call of a runner wrapped with with_model_call_scope(); pass "
                "ScriptedChatModel(responses=[...]) or ScriptedChatModel(respond=...) to use it anywhere else"
            )
        # Awaited inside the model call, so cancelling the call (cancel_turn) cancels this wait, and the
        # script's log records the cancellation.
        response = await scripted_model_response(render_model_input(messages), offered_tools=offered_tools)
        return self._answer_message(_scripted_message(response))

    def _listed_answer(self, messages: list[BaseMessage], method: str) -> AIMessage:
        answer = self._chosen_answer(messages, method).model_copy(deep=True)
        if answer.usage_metadata is None:
            answer.usage_metadata = _usage(_word_count(render_model_input(messages)), _answer_words(answer))
        return self._answer_message(answer)

    def _chosen_answer(self, messages: list[BaseMessage], method: str) -> AIMessage:
        if self.respond is not None:
            answer = _as_message(self.respond(tuple(messages)))
            if not isinstance(answer, AIMessage):
                kind = type(answer).__name__
                raise TypeError(f"ScriptedChatModel's respond must return an AIMessage or text, got {kind}")
            return answer
        responses = self.responses
        if responses is None:
            raise RuntimeError(
                f"ScriptedChatModel() without responses answers only asynchronously, not with {method}: "
                "it reads dex_agents.testing's session script; pass responses or respond to use it that way"
            )
        answered = sum(isinstance(message, AIMessage) for message in messages)
        if answered >= len(responses):
            raise ValueError(
                f"ScriptedChatModel has no answer for model call {answered + 1} of this conversation: its "
                f"input already holds {answered} model answers, and the script has {len(responses)}"
            )
        return _as_message(responses[answered])

    def _answer_message(self, answer: AIMessage) -> AIMessage:
        answer.response_metadata = {
            "model_name": self.model_name,
            "finish_reason": "tool_calls" if answer.tool_calls else "stop",
            "id": f"scripted-{uuid.uuid4().hex}",
            **answer.response_metadata,
        }
        return answer


def _as_message(response: object) -> Any:
    if isinstance(response, ScriptedResponse):
        return _scripted_message(response)
    return AIMessage(content=response) if isinstance(response, str) else response


def _new_call_id() -> str:
    return f"call-{uuid.uuid4().hex[:12]}"


def _scripted_message(response: ScriptedResponse) -> AIMessage:
    """The answer a `ScriptedResponse` scripts: its text, its tool calls (IDs generated when left out)."""
    calls = [
        ToolCall(
            name=call.tool_name,
            args=dict(call.arguments),
            id=cast(str | None, call.tool_call_id) or _new_call_id(),
            type="tool_call",
        )
        for call in response.tool_calls
    ]
    usage = _usage(response.input_tokens, response.output_tokens)
    return AIMessage(content=response.text, tool_calls=calls, usage_metadata=usage)


def _tool_name(tool: dict[str, Any]) -> str:
    function = cast(dict[str, Any], tool.get("function") or {})
    return str(function.get("name") or tool.get("name") or tool.get("type") or "")


def _usage(input_tokens: int, output_tokens: int) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
    )


def _word_count(texts: Sequence[str]) -> int:
    return sum(len(text.split()) for text in texts)


def _answer_words(answer: AIMessage) -> int:
    return _word_count([answer.text, *(json.dumps(call["args"]) for call in answer.tool_calls)])


def _chunks(answer: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Stream an answer as a provider does: its text in word chunks, then its tool calls and usage."""
    content: object = answer.content
    if isinstance(content, str):
        for text in text_chunks(content):
            yield ChatGenerationChunk(message=AIMessageChunk(content=text, id=answer.id))
        last_content: str | list[str | dict[str, Any]] = ""
    else:
        # Content blocks (reasoning, text, ...) stream one block per chunk and add up to the same list.
        for block in cast(list[str | dict[str, Any]], content):
            yield ChatGenerationChunk(message=AIMessageChunk(content=[block], id=answer.id))
        last_content = []
    yield ChatGenerationChunk(
        message=AIMessageChunk(
            content=last_content,
            id=answer.id,
            tool_call_chunks=[
                ToolCallChunk(name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index)
                for index, call in enumerate(answer.tool_calls)
            ],
            usage_metadata=answer.usage_metadata,
            response_metadata=answer.response_metadata,
            chunk_position="last",
        )
    )
