"""Questions for the user: ``ask_user`` calls, tools that ask before they take effect, and started tasks.

A question is an interrupt of kind ``question``. ``ask_user`` raises it in `RunModel` under the call's own
ID; a tool (`ToolInputRequested`) or a task's poll only stores the question on its record, and
`AwaitQuestionAnswer` raises it as ``<tool_call_id>-input-<n>`` under the `PendingInterrupts` lock, so
parallel tool Steps never write that Attribute. `answer_question` answers it, and `resolve_interrupt` with
``approved=False`` declines it.

How a question ends depends on who asked. ``ask_user`` records its answer as the call's result. A tool's
answer is appended to ``input_answers`` and the tool runs again. A started task's question never ends the
call here: its answer, decline or passed deadline goes to the task in the next poll. For the others a
decline or a passed deadline records the call `rejected`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

from dex import (
    AsyncContext,
    Context,
    RPCResult,
    StepDecision,
    Timer,
    Wait,
    dead_end,
    go_to_many,
)
from dex.condition import Condition

from dex_agents.limits import MAX_USER_MESSAGE_BYTES, unencodable_index, utf8_size
from dex_agents.persistence import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    TOOL_CALL_CANCELLATIONS,
)
from dex_agents.runner import QUESTION_DEADLINE_PASSED, QUESTION_DECLINED_TOOL_RESULT
from dex_agents.session._control import (
    apply_cancellation_wake,
    is_answer_pending,
    read_turn_control,
    record_call_cancelled,
)
from dex_agents.session._interrupts import (
    deadline_timer,
    find_interrupt,
    has_passed,
    question_interrupt,
    raise_interrupt,
    remove_interrupt,
    write_interrupt_resolved,
)
from dex_agents.session._records import (
    finish_by_effect,
    finish_call,
    is_ask_user_call,
    question_interrupt_id,
)
from dex_agents.session._state import now, read_interrupts, read_tool_call
from dex_agents.session._step import SessionStep
from dex_agents.values import (
    AgentInterrupt,
    AgentInterruptResolution,
    AgentToolCall,
    AnswerQuestionRequest,
    InterruptKind,
    QuestionAnswer,
    QuestionResolution,
    ToolCallStatus,
)

__all__ = ["AwaitQuestionAnswer", "answer_question", "ask_user_result", "question_collision_error"]


def _at_once() -> Condition:
    return Timer.by_duration(timedelta(0))


def ask_user_result(answer: str) -> str:
    """Return the model-visible result of an answered ``ask_user`` call."""
    return json.dumps({"status": "answered", "answer": answer}, ensure_ascii=False, separators=(",", ":"))


def question_collision_error(interrupt_id: str) -> str:
    """Return the error of a call whose question's interrupt ID another call of the turn already uses."""
    return (
        f"the tool's question cannot use interrupt ID {interrupt_id}, which another tool call of this turn "
        "uses"
    )


def _collides(
    context: AsyncContext, record: AgentToolCall, interrupt_id: str, interrupt: AgentInterrupt | None
) -> bool:
    """Whether another call of the turn owns ``interrupt_id``: a pending interrupt, or a record's key."""
    if interrupt is not None and interrupt.tool_call_id != record.tool_call_id:
        return True
    if interrupt_id == record.tool_call_id:
        return False
    return read_tool_call(context, interrupt_id) is not None


class AwaitQuestionAnswer(SessionStep[str]):
    """Waits for the answer to one call's question, its deadline, or steering; raises a tool's question."""

    async def wait_for(self, context: AsyncContext, input: str) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for the answer, the deadline and steering; a question not raised yet waits on nothing."""
        record = read_tool_call(context, input)
        if record is None or record.status is not ToolCallStatus.AWAITING_ANSWER:
            return Wait.until(_at_once())
        interrupt_id = question_interrupt_id(self._deps.options, record)
        interrupt = find_interrupt(read_interrupts(context), interrupt_id)
        if _collides(context, record, interrupt_id, interrupt):
            # Waiting on the ID would take another call's answer; execute records the collision.
            return Wait.until(_at_once())
        cancellation = TOOL_CALL_CANCELLATIONS.for_one(input)
        resolution = INTERRUPT_RESOLUTIONS.for_one(interrupt_id)
        if interrupt is None:
            if is_answer_pending(context, interrupt_id):
                return Wait.any_of(cancellation, resolution)
            return Wait.until(_at_once())  # execute raises the question
        if interrupt.deadline is None:
            return Wait.any_of(cancellation, resolution)
        return Wait.any_of(deadline_timer(interrupt.deadline), cancellation, resolution)

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Apply the answer, a decline, the deadline or steering; or raise the question and wait again."""
        record = read_tool_call(context, input)
        if record is None or record.status is not ToolCallStatus.AWAITING_ANSWER:
            return dead_end()
        interrupt_id = question_interrupt_id(self._deps.options, record)
        interrupts = read_interrupts(context)
        interrupt = find_interrupt(interrupts, interrupt_id)
        if _collides(context, record, interrupt_id, interrupt):
            error = question_collision_error(interrupt_id)
            if record.task_id is not None:
                return finish_by_effect(context, self._deps, record, error)
            return finish_call(context, self._deps, record, ToolCallStatus.FAILED, error=error)
        if TOOL_CALL_CANCELLATIONS.results(context, input):
            return apply_cancellation_wake(context, self._deps, self._moves, record, interrupt_id, interrupts)
        resolutions = INTERRUPT_RESOLUTIONS.results(context, interrupt_id)
        writer = self._deps.event_writer(context, record.turn_id)
        if resolutions:
            if interrupt is not None:
                # answer_question removes the interrupt itself; this only repairs a stray publish.
                remove_interrupt(context, interrupts, interrupt)
            resolution = resolutions[0]
            if resolution.approved and resolution.answer is not None:
                write_interrupt_resolved(
                    writer,
                    interrupt_id,
                    approved=True,
                    rejection_message=None,
                    kind=InterruptKind.QUESTION,
                    answered=True,
                )
                return self._end(
                    context, record, interrupt_id, QuestionResolution.ANSWERED, resolution.answer
                )
            declined = resolution.rejection_message or QUESTION_DECLINED_TOOL_RESULT
            write_interrupt_resolved(
                writer, interrupt_id, approved=False, rejection_message=declined, kind=InterruptKind.QUESTION
            )
            return self._end(context, record, interrupt_id, QuestionResolution.DECLINED, declined)
        if interrupt is None:
            if is_answer_pending(context, interrupt_id):
                return go_to_many(self._moves.to_await_question_answer(record))
            return self._raise(context, record, interrupt_id, interrupts)
        if not has_passed(interrupt.deadline):
            # The Timer fired early: wait again.
            return go_to_many(self._moves.to_await_question_answer(record))
        remove_interrupt(context, interrupts, interrupt)
        write_interrupt_resolved(
            writer, interrupt, approved=False, rejection_message=QUESTION_DEADLINE_PASSED
        )
        return self._end(
            context, record, interrupt_id, QuestionResolution.DEADLINE_PASSED, QUESTION_DEADLINE_PASSED
        )

    def _raise(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        interrupt_id: str,
        interrupts: list[AgentInterrupt],
    ) -> StepDecision:
        """Raise a question stored on the record, unless the turn was steered or cancelled first."""
        control = read_turn_control(context)
        if record.task_id is None and control.reason is not None:
            # The tool asked before it took any effect, so the call is abandoned like an approval.
            record_call_cancelled(context, self._deps, record, control.reason)
            return dead_end()
        if record.task_id is not None and control.is_cancelled:
            return go_to_many(self._moves.to_finish_turn_cancellation(record.turn_id))
        if record.input_question is None:
            return finish_by_effect(
                context, self._deps, record, "the session lost the question of this call before it was asked"
            )
        writer = self._deps.event_writer(context, record.turn_id)
        interrupt = question_interrupt(record, interrupt_id, now(), self._deps.options.interrupt_deadline)
        raise_interrupt(writer, interrupts, interrupt)
        PENDING_INTERRUPTS.set(context, interrupts)
        return go_to_many(self._moves.to_await_question_answer(record))

    def _end(
        self,
        context: AsyncContext,
        record: AgentToolCall,
        interrupt_id: str,
        resolution: QuestionResolution,
        answer: str,
    ) -> StepDecision:
        """Apply how the question ended: the call's result, another tool run, or the task's next poll."""
        # The answer, decline or deadline is an input from outside the session: an activation of its own,
        # whose root the call's next tool or poll span joins.
        root = self._deps.tracing.begin_activation(context, record.turn_id)
        if record.task_id is not None:
            waiting = replace(
                record,
                trace_context=root,
                status=ToolCallStatus.WAITING_FOR_TASK,
                input_answers=(*record.input_answers, self._answer(record, interrupt_id, resolution, answer)),
                input_question=None,
                input_choices=(),
                input_allows_free_text=True,
                task_answer_pending=True,
            )
            AGENT_TOOL_CALLS.set(context, waiting.tool_call_id, waiting)
            return go_to_many(self._moves.to_poll_tool_task(waiting))
        if resolution is not QuestionResolution.ANSWERED:
            return finish_call(context, self._deps, record, ToolCallStatus.REJECTED, rejection_message=answer)
        if is_ask_user_call(self._deps.options, record):
            return finish_call(
                context, self._deps, record, ToolCallStatus.SUCCEEDED, output=ask_user_result(answer)
            )
        approved = replace(
            record,
            trace_context=root,
            status=ToolCallStatus.APPROVED,
            input_answers=(*record.input_answers, self._answer(record, interrupt_id, resolution, answer)),
            input_question=None,
            input_choices=(),
            input_allows_free_text=True,
        )
        AGENT_TOOL_CALLS.set(context, approved.tool_call_id, approved)
        return go_to_many(self._moves.to_tool_step(approved))

    @staticmethod
    def _answer(
        record: AgentToolCall, interrupt_id: str, resolution: QuestionResolution, answer: str
    ) -> QuestionAnswer:
        return QuestionAnswer(
            interrupt_id=interrupt_id,
            question=record.input_question or "",
            answer=answer,
            resolution=resolution,
        )


def answer_question(context: Context, request: AnswerQuestionRequest) -> RPCResult[bool]:
    """Answer a pending question; see `AgentSessionFlow.answer_question`. Holds the interrupt lock."""
    interrupts = read_interrupts(context)
    interrupt = find_interrupt(interrupts, request.interrupt_id)
    if interrupt is None or interrupt.kind is not InterruptKind.QUESTION or has_passed(interrupt.deadline):
        return RPCResult(False)
    answer = request.answer
    if (
        not isinstance(answer, str)  # pyright: ignore[reportUnnecessaryIsInstance]
        or not answer.strip()
        or utf8_size(answer) > MAX_USER_MESSAGE_BYTES
        or unencodable_index(answer) is not None
    ):
        return RPCResult(False)
    if not interrupt.allows_free_text and answer not in interrupt.choices:
        return RPCResult(False)
    PENDING_INTERRUPTS.set(context, [item for item in interrupts if item is not interrupt])
    INTERRUPT_RESOLUTIONS.publish(
        context,
        interrupt.interrupt_id,
        AgentInterruptResolution(approved=True, rejection_message=None, answer=answer),
    )
    return RPCResult(True)
