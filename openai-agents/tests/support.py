"""Framework-level test helpers: a scripted SDK model and the session's side of the contract.

These tests drive `OpenAIAgentsRunner` the way the session does (stored messages in, outcomes out, final
tool call records on resume), without a server, so each framework behaviour is checked on its own.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from agents import TResponseInputItem
from agents.items import TResponseOutputItem
from dex_agents.events import AgentEventWriter
from dex_agents.runner import (
    AgentTurnContext,
    DeferredToolCall,
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

from tests.scripted_model import ScriptedAnswer, ScriptedSdkModel


@dataclass
class ScriptedModel:
    """An SDK model answering one scripted output per call, recording each call's input and tools."""

    answers: list[Sequence[TResponseOutputItem]]
    seen: list[list[TResponseInputItem]] = field(default_factory=list[list[TResponseInputItem]])
    offered_tools: list[list[str]] = field(default_factory=list[list[str]])

    @property
    def model(self) -> ScriptedSdkModel:
        return ScriptedSdkModel(self._answer)

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def _answer(self, items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
        self.seen.append(list(items))
        self.offered_tools.append(list(offered))
        if len(self.seen) > len(self.answers):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        return ScriptedAnswer(self.answers[len(self.seen) - 1], input_tokens=100, output_tokens=7)

    def outputs_seen(self, call_number: int) -> dict[str, str]:
        """The tool outputs in the input of model call ``call_number`` (one-based), by call ID."""
        outputs: dict[str, str] = {}
        for raw in self.seen[call_number - 1]:
            item = cast(Mapping[str, Any], raw)
            if item.get("type") == "function_call_output":
                outputs[str(item["call_id"])] = str(item["output"])
        return outputs


class SessionSide:
    """What the session keeps for one turn: stored messages, run state, records and events."""

    def __init__(
        self,
        *,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
    ) -> None:
        self.default_tool_effect = default_tool_effect
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
            default_tool_effect=self.default_tool_effect,
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
        tool_source_reference=call.tool_source_reference,
    )
