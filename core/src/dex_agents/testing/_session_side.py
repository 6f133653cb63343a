"""The session's side of the runner contract, played in process so framework tests need no server."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

from dex_agents import (
    AgentEvent,
    AgentEventType,
    AgentEventWriter,
    AgentFrameworkRunner,
    AgentMessage,
    AgentToolCall,
    AgentTurnContext,
    CancellationReason,
    ContextSummary,
    ContextSummaryRequest,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    UnfinishedTurnMessageBuilder,
    cancellation_rejection_message,
)
from dex_agents._tools._context import running_tool_execution

__all__ = ["SessionSide"]

_FLOW_ID = "session-1"


class SessionSide:
    """What the session keeps for one session: stored messages, run state, tool call records and events.

    A framework test drives a runner with it exactly as the Steps do (stored messages in, outcomes out,
    final records on resume), so each framework behaviour is checked without a server. Only one turn's
    records are kept, as the session keeps them.

    Attributes:
        messages: The stored messages, in sequence order.
        events: Every event the runner wrote.
        tool_policies: The policies the turn context hands the runner.
        default_tool_effect: The effect of a tool without a policy.
        turn_number: The current turn, one-based; 0 before the first.
        framework_run_state: The run state of the last deferral, or ``None``.
        records: The current turn's tool call records by tool call ID.
        attempt: The attempt number the turn context and events carry.
    """

    def __init__(
        self,
        *,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED,
    ) -> None:
        self.messages: list[AgentMessage] = []
        self.events: list[AgentEvent] = []
        self.tool_policies = dict(tool_policies or {})
        self.default_tool_effect = default_tool_effect
        self.turn_number = 0
        self.framework_run_state: str | None = None
        self.records: dict[str, AgentToolCall] = {}
        self.attempt = 1

    @property
    def flow_id(self) -> str:
        """The session ID that every turn context and tool execution carries."""
        return _FLOW_ID

    @property
    def turn_id(self) -> str:
        """The current turn's ID, ``turn-<number>``."""
        return f"turn-{self.turn_number}"

    def start_turn(self, message: FrameworkMessage) -> None:
        """Start the next turn with the user's ``message``, as `StartAgentSession` or a new message does."""
        self.turn_number += 1
        self.framework_run_state = None
        self.records = {}
        self.store([message])

    def store(self, messages: Sequence[FrameworkMessage]) -> None:
        """Append ``messages`` to the stored conversation, numbered on from the last one."""
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
        """The turn context a `RunModel` Step hands the runner now."""

        async def heartbeat() -> None:
            return None

        return AgentTurnContext(
            flow_id=_FLOW_ID,
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

    def summary_request(
        self,
        through_sequence: int,
        *,
        previous_summary: ContextSummary | None = None,
        input_token_budget: int = 100_000,
        session_settings: Mapping[str, object] | None = None,
    ) -> ContextSummaryRequest:
        """The request `CompactContext` hands ``summarize_context`` to summarize through ``through_sequence``.

        Args:
            through_sequence: The last stored message the summary covers.
            previous_summary: The summary to fold in; its messages are not in the request.
            input_token_budget: The policy's context window.
            session_settings: The turn's settings.
        """

        async def heartbeat() -> None:
            return None

        after = 0 if previous_summary is None else previous_summary.last_sequence
        return ContextSummaryRequest(
            flow_id=_FLOW_ID,
            turn_id=self.turn_id,
            attempt=self.attempt,
            previous_summary=previous_summary,
            messages=tuple(m for m in self.messages if after < m.sequence <= through_sequence),
            through_sequence=through_sequence,
            events=AgentEventWriter(self.events.append, self.turn_id, self.attempt, "CompactContext-1"),
            heartbeat_function=heartbeat,
            input_token_budget=input_token_budget,
            session_settings=dict(session_settings or {}),
        )

    def defer(self, outcome: ToolCallsRequested) -> None:
        """Store the incremental messages, the run state and one record per call, as `RunModel` does.

        Records are numbered on from the turn's earlier ones, as the session numbers them, so a turn that
        defers more than once keeps its calls in model order.
        """
        self.store(outcome.new_messages)
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

    def abandon(self, tool_call_id: str, reason: CancellationReason) -> None:
        """Record a call that steering or `cancel_turn` abandoned before it started, as the session does."""
        self.records[tool_call_id] = dataclasses.replace(
            self.records[tool_call_id],
            status=ToolCallStatus.REJECTED,
            rejection_message=cancellation_rejection_message(reason),
            cancellation_reason=reason,
        )

    async def end_turn_early(self, runner: UnfinishedTurnMessageBuilder) -> list[FrameworkMessage]:
        """End the turn without a final answer, as a failed, steered or cancelled turn ends.

        Stores what ``runner.build_unfinished_turn_messages`` returns for the turn's committed state (every
        record must be final), clears the run state and records, and returns the stored items.
        """
        items = list(await runner.build_unfinished_turn_messages(self.context()))
        self.store(items)
        self.framework_run_state = None
        self.records = {}
        return items

    def text_deltas(self) -> list[str]:
        """The text of every text delta event, in order."""
        return [
            json.loads(event.payload)["text"]
            for event in self.events
            if event.type == AgentEventType.TEXT_DELTA
        ]

    def reasoning_deltas(self) -> list[str]:
        """The text of every reasoning delta event, in order."""
        return [
            json.loads(event.payload)["text"]
            for event in self.events
            if event.type == AgentEventType.REASONING_DELTA
        ]

    def execution(self, tool_call_id: str) -> DeferredToolExecution:
        """The first attempt of the tool Step for the recorded call ``tool_call_id``."""

        async def heartbeat() -> None:
            return None

        return DeferredToolExecution(
            flow_id=_FLOW_ID,
            tool_call=self.records[tool_call_id],
            idempotency_key=f"{_FLOW_ID}/{self.turn_id}/{tool_call_id}",
            attempt=1,
            events=self.context().events,
            heartbeat_function=heartbeat,
        )

    async def execute(self, runner: AgentFrameworkRunner, tool_call_id: str) -> str:
        """Run one recorded call as its tool Step does and return the output.

        Raises:
            ToolExecutionError: As the runner raises it.
            AssertionError: If the tool asked a question or started a task instead (see `execute_outcome`).
        """
        outcome = await self.execute_outcome(runner, tool_call_id)
        if not isinstance(outcome, ToolExecutionResult):
            raise AssertionError(f"tool call {tool_call_id!r} did not return a result: {outcome!r}")
        return outcome.output

    async def execute_outcome(self, runner: AgentFrameworkRunner, tool_call_id: str) -> DeferredToolOutcome:
        """Run one recorded call as its tool Step does and return its outcome.

        As in the tool Step, a question (`ask_user_input`) or a started task (`start_tool_task`) that the
        tool's code recorded wins over what the runner returned or raised, because a framework may turn the
        tool's exception into an error result. Give the record ``input_answers`` (replace it in
        :attr:`records`) to run the tool again with answers.

        Raises:
            ToolExecutionError: As the runner raises it, when the tool recorded nothing.
        """
        execution = self.execution(tool_call_id)
        # The session's tool Step makes the call current around the runner, as here, so tool code that
        # reads `current_tool_execution()` sees it.
        with running_tool_execution(execution) as requests:
            try:
                result = await runner.execute_deferred_tool_call(execution)
            except Exception:
                if requests.outcome is not None:
                    return requests.outcome
                raise
        return requests.outcome or result


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
