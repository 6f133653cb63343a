"""How `RunModel` records the tool calls of one model response, built-in tools and planning turns included.

An ordinary call gets a record and its first Step: `AwaitToolApproval` when it needs approval, else its
tool Step. A call to an enabled built-in never reaches a tool Step and needs no approval: ``ask_user``
raises its question here and goes to `AwaitQuestionAnswer`, ``durable_wait`` goes to `AwaitTimer`, and
``write_todos`` replaces the plan in this commit. Built-in arguments are checked here, and an invalid call
records `failed` at once. In a planning turn every call but ``write_todos`` records `rejected`. A call that
becomes final here publishes its result in this commit, and `ResumeTurn` counts it with the others.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from dex import AsyncContext, StepMovement

from dex_agents._plans import (
    PLANNING_TURN_REJECTION_MESSAGE,
    WRITE_TODOS_CALLED_TWICE_ERROR,
    write_todos_result,
)
from dex_agents._tools._builtins import (
    ASK_USER,
    DURABLE_WAIT,
    WRITE_TODOS,
    BuiltInArgumentError,
    parse_ask_user_arguments,
    parse_durable_wait_arguments,
    parse_write_todos_arguments,
)
from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.persistence import AGENT_TOOL_CALLS
from dex_agents.runner import DeferredToolCall, ToolPolicy
from dex_agents.session._deps import SessionDeps
from dex_agents.session._interrupts import deadline_after, question_interrupt, raise_interrupt
from dex_agents.session._moves import Moves
from dex_agents.session._plan import write_plan
from dex_agents.session._records import store_final_call
from dex_agents.session._state import format_time, now
from dex_agents.values import (
    AgentInterrupt,
    AgentToolCall,
    InteractionMode,
    InterruptKind,
    ToolCallStatus,
    ToolEffect,
)

__all__ = ["BUILT_IN_TOOL_POLICY", "ResponseCalls"]

#: The policy of every built-in call: nothing to approve, and nothing that takes effect outside the session.
BUILT_IN_TOOL_POLICY = ToolPolicy(ToolEffect.READ, requires_approval=False)


class ResponseCalls:
    """Records the tool calls of one model response in `RunModel`'s commit.

    Args:
        context: `RunModel`'s context.
        deps: The Flow type's dependencies.
        moves: Where each call goes next.
        writer: `RunModel`'s event writer for the turn.
        interrupt_list: The pending interrupts, which ``record`` extends; store them after the last call.
        interaction_mode: The turn's mode.
        calls: Every call of the response, to find a repeated ``write_todos`` and a call that is alone.

    Attributes:
        movements: Where the recorded calls go next.
        resumes_turn_itself: The response's only call goes straight to its tool Step, whose end moves
            the turn on (`AgentToolCall.resumes_turn`), so `RunModel` schedules no `ResumeTurn`.
    """

    def __init__(
        self,
        context: AsyncContext,
        deps: SessionDeps,
        moves: Moves,
        writer: AgentEventWriter,
        interrupt_list: list[AgentInterrupt],
        interaction_mode: InteractionMode,
        calls: list[DeferredToolCall],
    ) -> None:
        self._context = context
        self._deps = deps
        self._moves = moves
        self._writer = writer
        self._interrupts = interrupt_list
        self._planning = interaction_mode is InteractionMode.PLANNING
        self._created_at = now()
        self._trace_context = deps.tracing.current_root(context)
        enabled = deps.options.built_in_tools
        self._built_ins = frozenset(enabled)
        self._write_todos_calls = sum(
            1 for call in calls if call.tool_name == WRITE_TODOS and WRITE_TODOS in enabled
        )
        self._alone = len(calls) == 1
        self.movements: list[StepMovement[str]] = []
        self.resumes_turn_itself = False

    def record(self, call: DeferredToolCall, turn_id: str, order: int) -> None:
        """Record one call and note the Step it moves to, if it is not final already."""
        built_in = call.tool_name in self._built_ins
        policy = BUILT_IN_TOOL_POLICY if built_in else call.policy
        requires_approval = policy.is_approval_required
        record = AgentToolCall(
            tool_call_id=call.tool_call_id,
            turn_id=turn_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            effect=policy.effect,
            requires_approval=requires_approval,
            status=ToolCallStatus.AWAITING_APPROVAL if requires_approval else ToolCallStatus.APPROVED,
            deferral_order=order,
            tool_source_reference=call.tool_source_reference,
            trace_context=self._trace_context,
        )
        self._writer.write_event(
            AgentEventType.TOOL_CALL_DEFERRED,
            {
                "tool_call_id": record.tool_call_id,
                "tool_name": record.tool_name,
                "effect": record.effect.value,
                "requires_approval": requires_approval,
            },
        )
        if self._planning and not (built_in and call.tool_name == WRITE_TODOS):
            self._final(record, ToolCallStatus.REJECTED, rejection_message=PLANNING_TURN_REJECTION_MESSAGE)
        elif built_in:
            try:
                self._record_built_in(record)
            except BuiltInArgumentError as error:
                self._final(record, ToolCallStatus.FAILED, error=str(error))
        else:
            self._record_ordinary(record)

    def _final(
        self,
        record: AgentToolCall,
        status: ToolCallStatus,
        *,
        output: str | None = None,
        error: str | None = None,
        rejection_message: str | None = None,
    ) -> None:
        store_final_call(
            self._context,
            self._deps,
            record,
            status,
            output=output,
            error=error,
            rejection_message=rejection_message,
        )

    def _record_ordinary(self, record: AgentToolCall) -> None:
        if self._alone and not record.requires_approval:
            # A join of one call costs a wait and a Step per round; the tool Step's end is the join.
            record = replace(record, resumes_turn=True)
            self.resumes_turn_itself = True
        AGENT_TOOL_CALLS.set(self._context, record.tool_call_id, record)
        if record.requires_approval:
            raise_interrupt(
                self._writer,
                self._interrupts,
                AgentInterrupt(
                    interrupt_id=record.tool_call_id,
                    kind=InterruptKind.TOOL_APPROVAL,
                    tool_call_id=record.tool_call_id,
                    tool_name=record.tool_name,
                    arguments=record.arguments,
                    created_at=format_time(self._created_at),
                    deadline=deadline_after(self._created_at, self._deps.options.interrupt_deadline),
                ),
            )
        self.movements.append(self._moves.to_first_step_of(record))

    def _record_built_in(self, record: AgentToolCall) -> None:
        options = self._deps.options
        if record.tool_name == ASK_USER:
            arguments = parse_ask_user_arguments(record.arguments)
            waiting = replace(
                record,
                status=ToolCallStatus.AWAITING_ANSWER,
                input_question=arguments.question,
                input_choices=arguments.choices,
                input_allows_free_text=arguments.allows_free_text,
            )
            AGENT_TOOL_CALLS.set(self._context, waiting.tool_call_id, waiting)
            interrupt = question_interrupt(
                waiting, waiting.tool_call_id, self._created_at, options.interrupt_deadline
            )
            raise_interrupt(self._writer, self._interrupts, interrupt)
            self.movements.append(self._moves.to_await_question_answer(waiting))
        elif record.tool_name == DURABLE_WAIT:
            wait = parse_durable_wait_arguments(record.arguments, options.max_durable_wait)
            wait_until = format_time(self._created_at + timedelta(seconds=wait.seconds))
            waiting = replace(record, status=ToolCallStatus.WAITING_FOR_TIMER, wait_until=wait_until)
            AGENT_TOOL_CALLS.set(self._context, waiting.tool_call_id, waiting)
            self._writer.write_event(
                AgentEventType.TIMER_STARTED,
                {"tool_call_id": record.tool_call_id, "wait_until": wait_until, "reason": wait.reason},
            )
            self.movements.append(self._moves.to_await_timer(waiting.tool_call_id))
        elif self._write_todos_calls > 1:
            self._final(record, ToolCallStatus.FAILED, error=WRITE_TODOS_CALLED_TWICE_ERROR)
        else:
            tasks = parse_write_todos_arguments(record.arguments)
            plan = write_plan(self._context, self._writer, tasks, planning=self._planning)
            self._final(record, ToolCallStatus.SUCCEEDED, output=write_todos_result(plan))
