"""The session's side of the runner contract, played in process for framework tests without a server.

`SessionSide` keeps stored messages, the run state and the tool call records of one turn the way the
session does, so each test drives `LangGraphRunner` exactly as the Steps would and asserts what a user
would notice.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from dex_agents._tool_context import running_tool_execution
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

from dex_agents_langgraph import LangGraphRunner


class SessionSide:
    """What the session keeps for one session: stored messages, run state, records and events."""

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
        """Store the run state and one waiting record per call, as `RunModel` does."""
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

    async def execute(self, runner: LangGraphRunner, tool_call_id: str) -> str:
        """Run one deferred call as its tool Step does and return the output."""

        async def heartbeat() -> None:
            return None

        execution = DeferredToolExecution(
            flow_id="session-1",
            tool_call=self.records[tool_call_id],
            idempotency_key=f"session-1/{self.turn_id}/{tool_call_id}",
            attempt=1,
            events=self.context().events,
            heartbeat_function=heartbeat,
        )
        # The session's tool Step makes the call current around the runner, as here.
        with running_tool_execution(execution):
            result = await runner.execute_deferred_tool_call(execution)
        return result.output


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
