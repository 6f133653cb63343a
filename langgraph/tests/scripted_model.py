"""Scripted chat models in LangChain's own model slot: `BaseChatModel`s with `bind_tools` and streaming.

`GenericFakeChatModel` drops tool calls when it streams, so these implement `_astream` themselves: text in
word chunks, then one last chunk with the tool calls and the usage. `MatrixChatModel` answers from
`dex_agents.testing`'s script store (the matrix's sessions); `ListChatModel` answers from a list and
records every input (framework tests without a server).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from dex_agents.testing import scripted_model_response
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
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
from pydantic import Field

# Each chunk keeps its trailing whitespace, so the chunks add up to the scripted text exactly.
_CHUNK = re.compile(r"\S+\s*|\s+")


def render_model_input(messages: Sequence[BaseMessage]) -> list[str]:
    """Render the messages a model call receives as one text per message or tool call."""
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


def tool_call(name: str, arguments: dict[str, object], tool_call_id: str) -> ToolCall:
    return ToolCall(name=name, args=arguments, id=tool_call_id, type="tool_call")


def respond(text: str = "", *calls: ToolCall, input_tokens: int = 10, output_tokens: int = 5) -> AIMessage:
    return AIMessage(
        content=text,
        tool_calls=list(calls),
        usage_metadata=UsageMetadata(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        ),
        response_metadata={"model_name": "dex-scripted"},
    )


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    for text in _CHUNK.findall(message.text):
        yield ChatGenerationChunk(message=AIMessageChunk(content=text))
    yield ChatGenerationChunk(
        message=AIMessageChunk(
            content="",
            tool_call_chunks=[
                ToolCallChunk(name=call["name"], args=json.dumps(call["args"]), id=call["id"], index=index)
                for index, call in enumerate(message.tool_calls)
            ],
            usage_metadata=message.usage_metadata,
            response_metadata=message.response_metadata,
            chunk_position="last",
        )
    )


class _ScriptedChatModel(BaseChatModel):
    """Shared plumbing: tool binding and streaming of one scripted `AIMessage` per call."""

    offered_tools: list[list[str]] = Field(default_factory=list[list[str]])

    @property
    def _llm_type(self) -> str:
        return "dex-scripted"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        del tool_choice
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    async def _answer(self, messages: list[BaseMessage], tools: Sequence[Any]) -> AIMessage:
        raise NotImplementedError

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("the scripted model only runs asynchronously")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = await self._answer(messages, kwargs.get("tools") or ())
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = await self._answer(messages, kwargs.get("tools") or ())
        for chunk in _chunks(message):
            yield chunk

    def _record_tools(self, tools: Sequence[Any]) -> None:
        self.offered_tools.append([str(tool["function"]["name"]) for tool in tools])


class MatrixChatModel(_ScriptedChatModel):
    """Answers every call from the session's script (`dex_agents.testing.scripted_model_response`)."""

    async def _answer(self, messages: list[BaseMessage], tools: Sequence[Any]) -> AIMessage:
        response = await scripted_model_response(render_model_input(messages))
        calls = [
            tool_call(call.tool_name, dict(call.arguments), call.tool_call_id) for call in response.tool_calls
        ]
        return respond(
            response.text, *calls, input_tokens=response.input_tokens, output_tokens=response.output_tokens
        )


class ListChatModel(_ScriptedChatModel):
    """Answers call ``n`` with ``responses[n]`` and records what each call saw."""

    responses: list[AIMessage]
    seen: list[list[BaseMessage]] = Field(default_factory=list[list[BaseMessage]])

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def _answer(self, messages: list[BaseMessage], tools: Sequence[Any]) -> AIMessage:
        self.seen.append(list(messages))
        self._record_tools(tools)
        if len(self.seen) > len(self.responses):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        return self.responses[len(self.seen) - 1]

    def texts_seen(self, call_number: int) -> list[str]:
        """What model call ``call_number`` (one-based) saw, rendered."""
        return render_model_input(self.seen[call_number - 1])
