"""Framework-level test helpers: a scripted Pydantic AI model and its responses.

The framework tests drive `PydanticAiRunner` the way the session does with `dex_agents.testing`'s
`SessionSide` (stored messages in, outcomes out, final tool call records on resume), without a server, so
each framework behaviour is checked on its own.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel


@dataclass
class ScriptedModel:
    """A `FunctionModel` that streams one scripted `ModelResponse` per call and logs what it saw.

    Only text and tool call parts are scripted; text is streamed word by word so tests can check the
    deltas.
    """

    responses: list[ModelResponse]
    seen: list[list[ModelMessage]] = field(default_factory=list[list[ModelMessage]])
    offered_tools: list[list[str]] = field(default_factory=list[list[str]])

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(stream_function=self._stream)

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def _stream(
        self, messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        self.seen.append(list(messages))
        self.offered_tools.append([tool.name for tool in info.function_tools])
        if len(self.seen) > len(self.responses):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        response = self.responses[len(self.seen) - 1]
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                for word in part.content.split(" "):
                    yield word + " "
            elif isinstance(part, ToolCallPart):
                yield {
                    index: DeltaToolCall(
                        part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id
                    )
                }

    def tool_returns_seen(self, call_number: int) -> list[BaseToolReturnPart]:
        """The tool results in the input of model call ``call_number`` (one-based)."""
        return [
            part
            for message in self.seen[call_number - 1]
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, BaseToolReturnPart)
        ]

    def user_prompts_seen(self, call_number: int) -> list[str]:
        return [
            str(part.content)
            for message in self.seen[call_number - 1]
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]


def tool_call(name: str, arguments: Mapping[str, object], tool_call_id: str) -> ToolCallPart:
    return ToolCallPart(name, json.dumps(dict(arguments)), tool_call_id=tool_call_id)


def respond(*parts: TextPart | ToolCallPart) -> ModelResponse:
    return ModelResponse(parts=list(parts))
