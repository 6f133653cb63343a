"""Framework-level test helpers: a scripted Pydantic AI model and the session's side of the contract.

These tests drive `PydanticAiRunner` the way the session does (stored messages in, outcomes out, final
tool call records on resume), without a server, so each framework behaviour is checked on its own.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from dex_agents import (
    AgentEvent,
    AgentEventWriter,
    AgentMessage,
    AgentToolCall,
    AgentTurnContext,
    DeferredToolCall,
    FrameworkMessage,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
)
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


class SessionSide:
    """What the session keeps for one turn: stored messages, run state, records and events."""

    def __init__(self, *, tool_policies: Mapping[str, ToolPolicy] | None = None) -> None:
        self.messages: list[AgentMessage] = []
        self.events: list[AgentEvent] = []
        self.tool_policies = dict(tool_policies or {})
        self.turn_number = 0
        self.framework_run_state: str | None = None
        self.records: dict[str, AgentToolCall] = {}
        self.attempt = 1

    @property
    def turn_id(self) -> str:
        return f"turn-{self.turn_number}"

    def start_turn(self, message: FrameworkMessage) -> None:
        self.turn_number += 1
        self.framework_run_state = None
        self.records = {}
        self.store([message])

    def store(self, messages: Sequence[FrameworkMessage]) -> None:
        for message in messages:
            self.messages.append(
                AgentMessage(
                    sequence=len(self.messages) + 1,
                    turn_id=self.turn_id,
                    role=message.role,
                    text=message.text,
                    tool_call_id=message.tool_call_id,
                    tool_name=message.tool_name,
                    tool_arguments=message.tool_arguments,
                    tool_output=message.tool_output,
                    framework_item=message.framework_item,
                    created_at="2026-11-29T00:00:00Z",
                )
            )

    def context(self) -> AgentTurnContext:
        async def heartbeat() -> None:
            return None

        return AgentTurnContext(
            flow_id="session-1",
            turn_id=self.turn_id,
            attempt=self.attempt,
            messages=tuple(self.messages),
            framework_run_state=self.framework_run_state,
            tool_calls=dict(self.records),
            events=AgentEventWriter(self.events.append, self.turn_id, self.attempt, "RunModel-1"),
            tool_policies=self.tool_policies,
            default_tool_effect=ToolEffect.UNCLASSIFIED,
            heartbeat_function=heartbeat,
        )

    def defer(self, outcome: ToolCallsRequested) -> None:
        """Store the run state and one awaiting record per call, as `RunModel` does."""
        self.framework_run_state = outcome.framework_run_state
        for order, call in enumerate(outcome.tool_calls):
            self.records[call.tool_call_id] = _record(self.turn_id, call, order)

    def finish(
        self,
        tool_call_id: str,
        status: ToolCallStatus,
        *,
        output: str | None = None,
        error: str | None = None,
        rejection_message: str | None = None,
    ) -> None:
        """Make one record final, as a tool Step or an approval does."""
        self.records[tool_call_id] = dataclasses.replace(
            self.records[tool_call_id],
            status=status,
            output=output,
            error=error,
            rejection_message=rejection_message,
        )

    def text_deltas(self) -> list[str]:
        return [json.loads(event.payload)["text"] for event in self.events if event.type == "text_delta"]


def _record(turn_id: str, call: DeferredToolCall, order: int) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call.tool_call_id,
        turn_id=turn_id,
        tool_name=call.tool_name,
        arguments=call.arguments,
        effect=call.policy.effect,
        requires_approval=call.policy.is_approval_required,
        status=ToolCallStatus.AWAITING_APPROVAL
        if call.policy.is_approval_required
        else ToolCallStatus.APPROVED,
        deferral_order=order,
    )
