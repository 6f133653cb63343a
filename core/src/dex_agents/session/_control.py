"""Steering and turn cancellation: the two flags, the calls they may abandon, and the Steps that apply them.

Two flags decide every boundary, read from committed state only. A turn is *cancelled* while
`TurnCancellationRequest.turn_id` names the active turn (turn IDs never repeat), and *steered* while
`SteeredUserMessages` holds a message. A turn that is both ends as cancelled, and the steered messages start
the next turn. A call that the flags abandon before it started records `rejected` with a structured
rejection message and a `cancellation_reason`; a call that started always runs to its end.

Each boundary reads the flags itself: `RunModel` before its model call, a tool Step before
`tool_call_started`, `ResumeTurn` when a steer wakes it, a waiting Step when `ToolCallCancellations` wakes
it, and `ApplyTurnControl` and `FinishTurnCancellation`, which end the turn.

Locks: `ApplyTurnControl`, `FinishTurnCancellation` and `AwaitUserMessage` lock `TurnCancellationRequest`,
and the approval Steps, `ResumeTurn` and `FinishTurnCancellation` lock `PendingInterrupts`; all of them are
short, and no Step that calls a model or a tool takes either lock, so `cancel_turn`, which locks both, never
waits for a model call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import cast

from dex import (
    AsyncContext,
    ChannelMessagesNotLoadedError,
    Context,
    StepDecision,
    StepMovement,
    Wait,
    dead_end,
    go_to_many,
)

from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.persistence import (
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    STEERED_USER_MESSAGES,
    TOOL_CALL_CANCELLATIONS,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.runner import build_turn_control_note, cancellation_rejection_message
from dex_agents.session._deps import SessionDeps
from dex_agents.session._errors import SessionStateError, describe_exception
from dex_agents.session._interrupts import remove_interrupt, write_interrupt_resolved
from dex_agents.session._message_reads import reply_count
from dex_agents.session._moves import Moves
from dex_agents.session._plan import decide_interaction_mode
from dex_agents.session._records import question_interrupt_id
from dex_agents.session._state import (
    finish_tool_call,
    iter_final,
    read_interrupts,
    read_state,
    read_turn_records,
)
from dex_agents.session._step import SessionStep
from dex_agents.session._storage import append_messages
from dex_agents.session._turn_lifecycle import (
    back_to_the_model,
    begin_turn,
    end_turn,
    storable_note,
    store_unfinished_turn_messages,
)
from dex_agents.values import (
    AgentInterrupt,
    AgentSessionStatus,
    AgentState,
    AgentToolCall,
    CancellationReason,
    ToolCallCancellation,
    ToolCallStatus,
    TurnCancellationRequest,
)

__all__ = [
    "MAX_CHANNEL_MESSAGES",
    "ApplyTurnControl",
    "FinishTurnCancellation",
    "TurnControlState",
    "abandon_waiting_calls_for_steer",
    "apply_cancellation_wake",
    "end_turn_by_control",
    "is_answer_pending",
    "is_turn_cancelled",
    "may_abandon_waiting_call",
    "read_turn_control",
    "record_call_cancelled",
    "remove_abandoned_interrupt",
]

_logger = logging.getLogger("dex_agents")

#: The largest count a Channel condition takes; waits that drain a Channel use it as their upper bound.
MAX_CHANNEL_MESSAGES = 2_147_483_647

# The waiting statuses of a call that has taken no effect yet, unless it started a task.
_ABANDONABLE_STATUSES = frozenset(
    {ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.AWAITING_ANSWER, ToolCallStatus.WAITING_FOR_TIMER}
)
# The statuses of a call whose task started: it waits for the task, or for the answer to the task's question.
_TASK_STATUSES = frozenset({ToolCallStatus.WAITING_FOR_TASK, ToolCallStatus.AWAITING_ANSWER})


def may_abandon_waiting_call(record: AgentToolCall) -> bool:
    """Whether steering or `cancel_turn` may abandon a waiting call: the one rule every boundary applies.

    Only a call that has taken no effect may be abandoned: one awaiting its approval, awaiting an answer
    with no remote task started, or waiting for a durable timer. A call whose remote work started (it has a
    ``task_id``) is left to finish, and an `approved` call belongs to its tool Step, which decides before it
    starts the tool.
    """
    return record.task_id is None and record.status in _ABANDONABLE_STATUSES


@dataclass(frozen=True)
class TurnControlState:
    """The flags of the active turn, from committed state.

    Attributes:
        is_cancelled: `cancel_turn` cancelled the active turn.
        steered_message_count: Steered messages waiting to start the next turn.
    """

    is_cancelled: bool
    steered_message_count: int

    @property
    def is_steered(self) -> bool:
        """Whether a steered message is waiting."""
        return self.steered_message_count > 0

    @property
    def reason(self) -> CancellationReason | None:
        """Why the turn's waiting calls are abandoned: cancellation wins over steering; `None` for neither."""
        if self.is_cancelled:
            return CancellationReason.TURN_CANCELLED
        if self.is_steered:
            return CancellationReason.STEERED
        return None


def is_turn_cancelled(context: Context, turn_id: str | None) -> bool:
    """Whether `cancel_turn` cancelled ``turn_id``."""
    request = cast(TurnCancellationRequest | None, TURN_CANCELLATION_REQUEST.get(context))
    return turn_id is not None and request is not None and request.turn_id == turn_id


def read_turn_control(context: AsyncContext) -> TurnControlState:
    """Return the active turn's flags. The Step's movement loads `SteeredUserMessages`."""
    state = read_state(context)
    active_turn_id = None if state is None else state.active_turn_id
    try:
        steered = len(STEERED_USER_MESSAGES.pending_messages(context))
    except ChannelMessagesNotLoadedError:
        # A Worker of an earlier release scheduled this Step, during a rolling upgrade, without the load.
        # Such a Step cannot see steering, so it decides as that release did; the cancellation still applies.
        steered = 0
    return TurnControlState(
        is_cancelled=is_turn_cancelled(context, active_turn_id), steered_message_count=steered
    )


def is_answer_pending(context: AsyncContext, interrupt_id: str) -> bool:
    """Whether an answer to ``interrupt_id`` waits in `InterruptResolutions`. The Step must load it."""
    return bool(INTERRUPT_RESOLUTIONS.pending_messages(context, interrupt_id))


def record_call_cancelled(
    context: AsyncContext, deps: SessionDeps, record: AgentToolCall, reason: CancellationReason
) -> None:
    """Record a call that never started `rejected` for ``reason`` and publish its result."""
    rejection_message = cancellation_rejection_message(reason)
    finish_tool_call(
        context,
        replace(
            record,
            status=ToolCallStatus.REJECTED,
            output=None,
            error=None,
            rejection_message=rejection_message,
            cancellation_reason=reason,
        ),
    )
    deps.event_writer(context, record.turn_id).write_tool_call_finished(
        record.tool_call_id, record.tool_name, ToolCallStatus.REJECTED.value
    )


def remove_abandoned_interrupt(
    context: AsyncContext,
    writer: AgentEventWriter,
    interrupts: Sequence[AgentInterrupt],
    interrupt: AgentInterrupt,
    reason: CancellationReason,
) -> list[AgentInterrupt]:
    """Remove the interrupt of a call that steering or `cancel_turn` abandons, and say why. Hold its lock.

    Returns:
        The interrupts still pending.
    """
    remaining = remove_interrupt(context, interrupts, interrupt)
    write_interrupt_resolved(
        writer,
        interrupt,
        approved=False,
        rejection_message=cancellation_rejection_message(reason),
        cancellation_reason=reason,
    )
    return remaining


def apply_cancellation_wake(
    context: AsyncContext,
    deps: SessionDeps,
    moves: Moves,
    record: AgentToolCall,
    interrupt_id: str | None,
    interrupts: Sequence[AgentInterrupt],
) -> StepDecision:
    """Apply a `ToolCallCancellations` wake to a waiting call; the woken Step holds the interrupt lock.

    The wake decides nothing by itself: a call that the flags do not abandon (a wake left from an earlier
    turn whose call had the same ID, or a started task's question) waits again, and so does one whose
    interrupt is gone while its answer is pending, because the answer committed first. Otherwise the
    pending interrupt is removed and the call recorded cancelled.

    Args:
        context: The woken Step's context.
        deps: The Flow type's dependencies.
        moves: The woken Step's movements.
        record: The call.
        interrupt_id: The interrupt the call waits on, or `None` for a durable wait.
        interrupts: The pending interrupts.

    Returns:
        The woken Step's decision.
    """
    reason = read_turn_control(context).reason
    interrupt = (
        None
        if interrupt_id is None
        else next((item for item in interrupts if item.interrupt_id == interrupt_id), None)
    )
    if reason is None or not may_abandon_waiting_call(record):
        return go_to_many(moves.to_waiting_step(record))
    if interrupt_id is not None and interrupt is None and is_answer_pending(context, interrupt_id):
        return go_to_many(moves.to_waiting_step(record))
    if interrupt is not None:
        writer = deps.event_writer(context, record.turn_id)
        remove_abandoned_interrupt(context, writer, interrupts, interrupt, reason)
    record_call_cancelled(context, deps, record, reason)
    return dead_end()


def _interrupt_of(interrupts: Sequence[AgentInterrupt], record: AgentToolCall) -> AgentInterrupt | None:
    return next((item for item in interrupts if item.tool_call_id == record.tool_call_id), None)


def abandon_waiting_calls_for_steer(
    context: AsyncContext, deps: SessionDeps, turn_id: str, records: Sequence[AgentToolCall]
) -> None:
    """Remove the interrupts of the turn's abandonable calls and wake their waiting Steps.

    `ResumeTurn` does this on a steer, holding the interrupt lock, so an answer either commits first (the
    interrupt is gone here, and its call goes on) or finds the interrupt removed and is refused. The woken
    Steps record their calls.
    """
    interrupts = read_interrupts(context)
    writer = deps.event_writer(context, turn_id)
    reason = CancellationReason.STEERED
    for record in records:
        if record.is_final or not may_abandon_waiting_call(record):
            continue
        interrupt = _interrupt_of(interrupts, record)
        if interrupt is not None:
            interrupts = remove_abandoned_interrupt(context, writer, interrupts, interrupt, reason)
        elif record.status is not ToolCallStatus.WAITING_FOR_TIMER:
            continue  # its answer committed first, so its Step applies the answer
        TOOL_CALL_CANCELLATIONS.publish(context, record.tool_call_id, ToolCallCancellation(reason))


async def end_turn_by_control(
    context: AsyncContext,
    deps: SessionDeps,
    state: AgentState,
    records: Sequence[AgentToolCall],
    reason: CancellationReason,
    steered_message_count: int,
) -> AgentState:
    """End the active turn as steered or cancelled, keeping what it did, and write its event.

    The runner's unfinished-turn messages are stored when it implements them and they can be stored;
    otherwise a turn with final records stores the steered or cancelled note. Needs the window and the
    model input's chunks loaded, and every record final.
    """
    turn_id = state.active_turn_id
    assert turn_id is not None
    advanced, kept_items = await store_unfinished_turn_messages(context, deps, state, records)
    final = iter_final(records)
    if not kept_items and final:
        try:
            note = storable_note(
                deps.runner,
                lambda budget: build_turn_control_note(final, reason, max_bytes=budget),
                advanced.next_message_sequence,
                turn_id,
            )
            advanced, _ = append_messages(context, deps.options, advanced, turn_id, [note])
        except Exception as note_error:
            # Ending the turn must not depend on the runner being able to build the note.
            _logger.warning(
                "turn %s ended (%s) after tool calls ran, but its note could not be stored: %s",
                turn_id,
                reason.value,
                describe_exception(note_error),
            )
    ended = end_turn(context, deps.options, advanced, records, None)
    message_count = reply_count(context, turn_id, ended.next_message_sequence)
    writer = deps.event_writer(context, turn_id)
    if reason is CancellationReason.TURN_CANCELLED:
        writer.write_event(AgentEventType.TURN_CANCELLED, {"message_count": message_count})
    else:
        writer.write_event(
            AgentEventType.TURN_STEERED,
            {"steered_message_count": steered_message_count, "message_count": message_count},
        )
    return ended


class ApplyTurnControl(SessionStep[None]):
    """Ends a steered or cancelled turn, then starts the turn of the steered messages, if any.

    It is the only consumer of `SteeredUserMessages`; it also drains stale `TurnControlRequests` wakes.
    """

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Take every steered message and control wake at once; neither condition blocks."""
        return Wait.all_of(
            STEERED_USER_MESSAGES.at_most(MAX_CHANNEL_MESSAGES),
            TURN_CONTROL_REQUESTS.at_most(MAX_CHANNEL_MESSAGES),
        )

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """End the active turn as cancelled or steered, then start the steered turn or wait for a message."""
        state = read_state(context)
        if state is None:
            raise SessionStateError("ApplyTurnControl ran before StartAgentSession stored the session state")
        steered = list(STEERED_USER_MESSAGES.results(context))
        turn_id = state.active_turn_id
        if turn_id is not None:
            records = read_turn_records(context, turn_id)
            waiting = [record.tool_call_id for record in records if not record.is_final]
            if waiting:
                raise SessionStateError(
                    f"ApplyTurnControl ran while tool calls {waiting} of {turn_id} are not final"
                )
            if is_turn_cancelled(context, turn_id):
                reason = CancellationReason.TURN_CANCELLED
            elif steered:
                reason = CancellationReason.STEERED
            else:
                # Nothing to apply, so the turn goes on with its next model call.
                _logger.warning("ApplyTurnControl found %s neither steered nor cancelled", turn_id)
                return go_to_many(back_to_the_model(context, self._moves, state))
            state = await end_turn_by_control(context, self._deps, state, records, reason, len(steered))
        usable = [message for message in steered if message.text.strip()]
        if usable:
            mode = decide_interaction_mode(
                context, self._deps.options, [message.plan_mode for message in usable]
            )
            return begin_turn(
                context,
                self._deps,
                self._moves,
                state,
                [message.text for message in usable],
                interaction_mode=mode,
            )
        return go_to_many(self._moves.to_await_user_message())


class FinishTurnCancellation(SessionStep[str]):
    """Scheduled by `cancel_turn`: records the calls whose waiting Steps it cancelled, or ends the turn.

    It decides from committed state, holding both locks `cancel_turn` holds. A started task is never
    recorded `rejected`: it goes to `CancelToolTask`, which records `outcome_unknown`. A `PollToolTask` or
    a task's `AwaitQuestionAnswer` that starts after the cancellation runs this Step again, so each
    abandoned task is handed over once.
    """

    async def execute(self, context: AsyncContext, input: str) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record each abandoned waiting call, or hand a turn without tool calls to `ApplyTurnControl`."""
        state = read_state(context)
        if state is None or state.active_turn_id != input or not is_turn_cancelled(context, input):
            return dead_end()  # the turn ended before the cancellation reached it
        if state.status is not AgentSessionStatus.RUNNING_TOOLS:
            # cancel_turn cancelled the model call, or the failure route that would have ended the turn.
            return go_to_many(self._moves.to_apply_turn_control(context))
        # ResumeTurn still waits for every result, and ends the turn once the last one is in.
        reason = CancellationReason.TURN_CANCELLED
        interrupts = read_interrupts(context)
        writer = self._deps.event_writer(context, input)
        movements: list[StepMovement[str]] = []
        for record in read_turn_records(context, input):
            if record.is_final:
                continue
            if record.task_id is not None and record.status in _TASK_STATUSES:
                if record.status is ToolCallStatus.WAITING_FOR_TASK and record.cancellation_reason is reason:
                    continue  # an earlier run of this Step already handed it to CancelToolTask
                interrupt = _interrupt_of(interrupts, record)
                if interrupt is not None:
                    interrupts = remove_abandoned_interrupt(context, writer, interrupts, interrupt, reason)
                movements.append(self._moves.to_cancel_tool_task(_abandon_task(context, record)))
                continue
            if not may_abandon_waiting_call(record):
                continue  # an approved call belongs to its tool Step, which checks the flags itself
            interrupt = _interrupt_of(interrupts, record)
            if interrupt is not None:
                interrupts = remove_abandoned_interrupt(context, writer, interrupts, interrupt, reason)
            elif _waits_for_answer(record) and is_answer_pending(
                context, question_interrupt_id(self._deps.options, record)
            ):
                # The answer committed before the cancellation: the waiting Step applies it.
                movements.append(self._moves.to_waiting_step(record))
                continue
            # Otherwise the call's wait was cancelled with nothing left to apply. That includes an answer
            # that committed first but was taken by the waiting Step this cancellation dropped: the call
            # never started, so recording it cancelled is true.
            record_call_cancelled(context, self._deps, record, reason)
        return go_to_many(*movements) if movements else dead_end()


def _waits_for_answer(record: AgentToolCall) -> bool:
    return record.status in (ToolCallStatus.AWAITING_APPROVAL, ToolCallStatus.AWAITING_ANSWER)


def _abandon_task(context: AsyncContext, record: AgentToolCall) -> AgentToolCall:
    """Keep a started task's call waiting, marked abandoned by `cancel_turn`, for `CancelToolTask`."""
    abandoned = replace(
        record,
        status=ToolCallStatus.WAITING_FOR_TASK,
        cancellation_reason=CancellationReason.TURN_CANCELLED,
        input_question=None,
        input_choices=(),
        input_allows_free_text=True,
    )
    AGENT_TOOL_CALLS.set(context, abandoned.tool_call_id, abandoned)
    return abandoned
