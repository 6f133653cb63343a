"""Framework-level test helpers: a canned ADK model and the session's side of the runner contract.

These tests drive `GoogleAdkRunner` the way the session does (stored messages in, outcomes out, final
tool call records on resume), without a server, so each framework behaviour is checked on its own.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import cast

from dex_agents.events import AgentEventWriter
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolPolicy,
)
from dex_agents.values import (
    AgentEvent,
    AgentMessage,
    AgentToolCall,
    FrameworkMessage,
    ToolCallStatus,
    ToolEffect,
)
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

from dex_agents_google_adk import GoogleAdkRunner


class CannedLlm(BaseLlm):
    """An ADK model that answers call ``n`` with ``responses[n]`` and keeps what every call saw.

    Text is streamed word by word when ADK asks for streaming, so tests can check the deltas.
    """

    model: str = "canned"
    responses: list[types.Content] = Field(default_factory=list[types.Content])
    seen: list[list[types.Content]] = Field(default_factory=list[list[types.Content]])
    offered_tools: list[list[str]] = Field(default_factory=list[list[str]])
    instructions_seen: list[str] = Field(default_factory=list[str])

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append([content.model_copy(deep=True) for content in llm_request.contents])
        self.offered_tools.append(sorted(llm_request.tools_dict))
        instruction = cast(object, llm_request.config.system_instruction)  # pyright: ignore[reportUnknownMemberType]
        self.instructions_seen.append(str(instruction or ""))
        if len(self.seen) > len(self.responses):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        # ADK assigns IDs to function calls in place, so every call answers with a fresh copy.
        content = self.responses[len(self.seen) - 1].model_copy(deep=True)
        if stream:
            for part in content.parts or ():
                for word in (part.text or "").split(" ") if part.text else ():
                    yield LlmResponse(
                        content=types.Content(
                            role="model", parts=[types.Part(text=word + " ", thought=part.thought)]
                        ),
                        partial=True,
                    )
        yield LlmResponse(
            content=content,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=50, candidates_token_count=20, total_token_count=70
            ),
            partial=False,
            turn_complete=True,
            finish_reason=types.FinishReason.STOP,
        )

    def function_responses_seen(self, call_number: int) -> dict[str, dict[str, object]]:
        """The function responses in the input of model call ``call_number`` (one-based), by call name."""
        return {
            f"{part.function_response.name}#{index}": dict(part.function_response.response or {})
            for index, part in enumerate(
                part
                for content in self.seen[call_number - 1]
                for part in content.parts or ()
                if part.function_response is not None
            )
            if part.function_response is not None
        }

    def responses_seen(self, call_number: int) -> list[dict[str, object]]:
        """The function responses in the input of model call ``call_number``, in order."""
        return [
            dict(part.function_response.response or {})
            for content in self.seen[call_number - 1]
            for part in content.parts or ()
            if part.function_response is not None
        ]

    def texts_seen(self, call_number: int) -> list[str]:
        return [
            part.text for content in self.seen[call_number - 1] for part in content.parts or () if part.text
        ]


def call(name: str, arguments: Mapping[str, object], tool_call_id: str | None = None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=dict(arguments), id=tool_call_id))


def respond(*parts: types.Part | str) -> types.Content:
    return types.Content(
        role="model", parts=[types.Part(text=part) if isinstance(part, str) else part for part in parts]
    )


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
        """Store the run state and one record per call, as `RunModel` does."""
        self.framework_run_state = outcome.framework_run_state
        order = len(self.records)
        for index, deferred in enumerate(outcome.tool_calls):
            self.records[deferred.tool_call_id] = _record(self.turn_id, deferred, order + index)

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

    def reasoning_deltas(self) -> list[str]:
        return [json.loads(event.payload)["text"] for event in self.events if event.type == "reasoning_delta"]

    def execution(self, tool_call_id: str) -> DeferredToolExecution:
        async def heartbeat() -> None:
            return None

        return DeferredToolExecution(
            flow_id="session-1",
            tool_call=self.records[tool_call_id],
            idempotency_key=f"session-1/{self.turn_id}/{tool_call_id}",
            attempt=1,
            events=self.context().events,
            heartbeat_function=heartbeat,
        )


async def execute(runner: GoogleAdkRunner, session: SessionSide, tool_call_id: str) -> str:
    """Run one recorded call as its tool Step does, with the core's tool accessor set."""
    from dex_agents._tool_context import running_tool_execution

    execution = session.execution(tool_call_id)
    with running_tool_execution(execution):
        result = await runner.execute_deferred_tool_call(execution)
    return result.output


def _record(turn_id: str, deferred: DeferredToolCall, order: int) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=deferred.tool_call_id,
        turn_id=turn_id,
        tool_name=deferred.tool_name,
        arguments=deferred.arguments,
        effect=deferred.policy.effect,
        requires_approval=deferred.policy.is_approval_required,
        status=ToolCallStatus.AWAITING_APPROVAL
        if deferred.policy.is_approval_required
        else ToolCallStatus.APPROVED,
        deferral_order=order,
        tool_source_reference=deferred.tool_source_reference,
    )
