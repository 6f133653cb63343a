"""Pending interrupts: finding and removing one, and the `interrupt_resolved` event that says how it ended."""

from __future__ import annotations

from collections.abc import Sequence

from dex import AsyncContext

from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.persistence import PENDING_INTERRUPTS
from dex_agents.values import AgentInterrupt, CancellationReason, InterruptKind

__all__ = ["find_interrupt", "remove_interrupt", "write_interrupt_resolved"]


def find_interrupt(interrupts: Sequence[AgentInterrupt], interrupt_id: str) -> AgentInterrupt | None:
    """Return the pending interrupt with ``interrupt_id``, or `None`."""
    return next((interrupt for interrupt in interrupts if interrupt.interrupt_id == interrupt_id), None)


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
) -> None:
    """Write the `interrupt_resolved` event of an interrupt that was not answered with text.

    Args:
        writer: The Step's event writer.
        interrupt: The interrupt, or its ID when it is no longer pending.
        approved: Whether the call may run.
        rejection_message: What the model sees for a rejection.
        cancellation_reason: Set when steering or `cancel_turn` removed the interrupt.
    """
    if isinstance(interrupt, str):
        interrupt_id, kind = interrupt, InterruptKind.TOOL_APPROVAL
    else:
        interrupt_id, kind = interrupt.interrupt_id, interrupt.kind
    writer.write_event(
        AgentEventType.INTERRUPT_RESOLVED,
        {
            "interrupt_id": interrupt_id,
            "approved": approved,
            "rejection_message": rejection_message,
            "kind": kind.value,
            "answered": False,
            "cancellation_reason": None if cancellation_reason is None else cancellation_reason.value,
        },
    )
