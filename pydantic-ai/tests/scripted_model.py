"""A scripted model in Pydantic AI's own model slot, answering from `dex_agents.testing`'s script store.

`scripted_function_model()` is an ordinary `FunctionModel` with a stream function, so the agent under test
is a real Pydantic AI agent and every call goes through Pydantic AI's real agent loop. On each call the
model renders what it sees as texts (prompts, answers, tool calls, tool results with their outcome),
hands them to `scripted_model_response` (which logs the call with its session, turn, Step execution and
attempt), and streams the scripted answer back: its text in chunks, then its tool calls.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

from dex_agents.testing import scripted_model_response
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    RetryFeedbackPart,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

# Each chunk keeps its trailing whitespace, so the chunks add up to the scripted text exactly.
_CHUNK = re.compile(r"\S+\s*|\s+")


def render_model_input(messages: list[ModelMessage]) -> list[str]:
    """Render the messages a model call receives as one text per part."""
    texts: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart):
                    texts.append(f"user: {part.content}")
                elif isinstance(part, BaseToolReturnPart):
                    texts.append(
                        f"tool {part.tool_name} [{part.tool_call_id}] {part.outcome}: "
                        f"{part.model_response_str(wrap_if_error=False)}"
                    )
                elif isinstance(part, RetryFeedbackPart):
                    texts.append(f"retry: {part.model_response()}")
        else:
            for part in message.parts:
                if isinstance(part, TextPart):
                    texts.append(f"assistant: {part.content}")
                elif isinstance(part, ToolCallPart):
                    texts.append(
                        f"assistant calls {part.tool_name} {part.args_as_json_str()} [{part.tool_call_id}]"
                    )
    return texts


async def _stream_scripted_response(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    del info
    response = await scripted_model_response(render_model_input(messages))
    for chunk in _CHUNK.findall(response.text):
        yield chunk
    for index, call in enumerate(response.tool_calls, start=1):
        yield {index: DeltaToolCall(call.tool_name, call.arguments_json, tool_call_id=call.tool_call_id)}


def scripted_function_model() -> FunctionModel:
    """Return the scripted model for an agent under test."""
    return FunctionModel(stream_function=_stream_scripted_response, model_name="dex-scripted")
