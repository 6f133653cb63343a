"""Pending interrupts: finding and removing one, and the `interrupt_resolved` event that says how it ended."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from dex import AsyncContext, Timer
from dex.condition import Condition

from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.persistence import PENDING_INTERRUPTS
from dex_agents.session._state import format_time, now, parse_time
from dex_agents.values import AgentInterrupt, AgentToolCall, CancellationReason, InterruptKind

__all__ = [
    "deadline_after",
    "deadline_timer",
    "find_interrupt",
    "has_passed",
    "question_interrupt",
    "raise_interrupt",
    "remove_interrupt",
    "whole_seconds",
    "write_interrupt_resolved",
]


def whole_seconds(duration: timedelta) -> timedelta:
    """Round ``duration`` up to whole seconds, because Dex Timers take whole seconds."""
    whole = -(-duration // timedelta(seconds=1))
    return timedelta(seconds=whole)


def deadline_after(created_at: datetime, wait: timedelta | None) -> str | None:
    """Return the deadline of an interrupt raised at ``created_at`` that waits ``wait``, or `None`."""
    return None if wait is None else format_time(created_at + whole_seconds(wait))


def has_passed(deadline: str | None) -> bool:
    """Whether the Worker clock reached ``deadline``; `None` never passes."""
    return deadline is not None and now() >= parse_time(deadline)


def deadline_timer(deadline: str) -> Condition:
    """Return a Timer that fires at ``deadline``.

    Dex Timers take whole seconds; rounding up never fires before the deadline by design, and an early fire
    (the server floors its clock) only makes the woken Step wait again.
    """
    remaining = (parse_time(deadline) - now()).total_seconds()
    return Timer.by_duration(timedelta(seconds=max(0, math.ceil(remaining))))


def question_interrupt(
    record: AgentToolCall, interrupt_id: str, created_at: datetime, wait: timedelta | None
) -> AgentInterrupt:
    """Return the question interrupt of ``record``, which holds the question in its ``input_*`` fields."""
    return AgentInterrupt(
        interrupt_id=interrupt_id,
        kind=InterruptKind.QUESTION,
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        arguments=record.arguments,
        created_at=format_time(created_at),
        deadline=deadline_after(created_at, wait),
        question=record.input_question,
        choices=record.input_choices,
        allows_free_text=record.input_allows_free_text,
    )


def find_interrupt(interrupts: Sequence[AgentInterrupt], interrupt_id: str) -> AgentInterrupt | None:
    """Return the pending interrupt with ``interrupt_id``, or `None`."""
    return next((interrupt for interrupt in interrupts if interrupt.interrupt_id == interrupt_id), None)


def raise_interrupt(
    writer: AgentEventWriter, interrupts: list[AgentInterrupt], interrupt: AgentInterrupt
) -> None:
    """Append ``interrupt`` to ``interrupts`` and write its `interrupt_raised` event.

    The caller stores ``interrupts`` in the same commit, holding the interrupt lock unless it is
    `RunModel`, which runs while no other Step of the turn does.
    """
    interrupts.append(interrupt)
    writer.write_event(
        AgentEventType.INTERRUPT_RAISED,
        {
            "interrupt_id": interrupt.interrupt_id,
            "tool_call_id": interrupt.tool_call_id,
            "tool_name": interrupt.tool_name,
            "deadline": interrupt.deadline,
            "kind": interrupt.kind.value,
            "question": interrupt.question,
            "choices": list(interrupt.choices),
            "allows_free_text": interrupt.allows_free_text,
        },
    )


def remove_interrupt(
    context: AsyncContext, interrupts: Sequence[AgentInterrupt], interrupt: AgentInterrupt
) -> list[AgentInterrupt]:
    """Store the pending interrupts without ``interrupt`` and return them. Hold the interrupt lock."""
    remaining = [item for item in interrupts if item is not interrupt]
    PENDING_INTERRUPTS.set(context, remaining)
    return remaining


def write_interrupt_resolved(
    writer: AgentEventWriter,
    interrupt: AgentInterrupt | str,
    *,
    approved: bool,
    rejection_message: str | None,
    cancellation_reason: CancellationReason | None = None,
    kind: InterruptKind = InterruptKind.TOOL_APPROVAL,
    answered: bool = False,
) -> None:
    """Write the `interrupt_resolved` event of an interrupt.

    Args:
        writer: The Step's event writer.
        interrupt: The interrupt, or its ID when it is no longer pending.
        approved: Whether the call may run; for a question, whether it was answered.
        rejection_message: What the model sees for a rejection or a decline.
        cancellation_reason: Set when steering or `cancel_turn` removed the interrupt.
        kind: The kind of an interrupt given by its ID.
        answered: Whether the user answered a question with text.
    """
    if isinstance(interrupt, str):
        interrupt_id = interrupt
    else:
        interrupt_id, kind = interrupt.interrupt_id, interrupt.kind
    writer.write_event(
        AgentEventType.INTERRUPT_RESOLVED,
        {
            "interrupt_id": interrupt_id,
            "approved": approved,
            "rejection_message": rejection_message,
            "kind": kind.value,
            "answered": answered,
            "cancellation_reason": None if cancellation_reason is None else cancellation_reason.value,
        },
    )
