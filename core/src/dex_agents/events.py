"""Live events of a session and the writer that stamps them.

Events are best effort: a UI renders them while a turn runs and rebuilds from `get_agent_snapshot`
afterwards. Every event names the turn, the Step execution and the attempt that wrote it, so a UI can drop
the partial text of an attempt that a retry replaced.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from enum import StrEnum

from dex_agents.values import AgentEvent

__all__ = ["AgentEventType", "AgentEventWriter", "encode_event_payload"]


class AgentEventType(StrEnum):
    """The event types the session writes. Adapters add their own types with a prefix."""

    TURN_STARTED = "turn_started"
    TURN_COMPLETED = "turn_completed"
    TURN_FAILED = "turn_failed"
    TURN_STEERED = "turn_steered"
    TURN_CANCELLED = "turn_cancelled"
    TEXT_DELTA = "text_delta"
    REASONING_DELTA = "reasoning_delta"
    TOOL_CALL_STARTED = "tool_call_started"
    TOOL_CALL_FINISHED = "tool_call_finished"
    TOOL_CALL_DEFERRED = "tool_call_deferred"
    INTERRUPT_RAISED = "interrupt_raised"
    INTERRUPT_RESOLVED = "interrupt_resolved"
    TIMER_STARTED = "timer_started"
    PLAN_UPDATED = "plan_updated"
    PLAN_EXECUTION_STARTED = "plan_execution_started"
    TOOL_TASK_STARTED = "tool_task_started"
    USAGE_RECORDED = "usage_recorded"
    COMPACTION_STARTED = "compaction_started"
    COMPACTION_FINISHED = "compaction_finished"


def encode_event_payload(payload: Mapping[str, object]) -> str:
    """Return an event payload as compact JSON text with sorted keys.

    Args:
        payload: A JSON object.

    Returns:
        The JSON text.

    Raises:
        TypeError: If ``payload`` is not a mapping or holds a value JSON cannot represent.
        ValueError: If it holds NaN or an infinity.
    """
    if not isinstance(payload, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"an event payload must be a JSON object, got {type(payload).__name__}")
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


class AgentEventWriter:
    """Writes events of one turn from one Step attempt.

    The session creates one writer per runner call and closes it when the call returns; later writes are
    dropped, so a background task the runner left behind cannot add events to a finished attempt. A write
    from a thread other than the one that created the writer is handed to the writer's event loop, in call
    order, because the SDK's Step output queue is not thread safe.
    """

    def __init__(
        self,
        write_agent_event: Callable[[AgentEvent], None],
        turn_id: str | None,
        attempt: int,
        step_execution_id: str = "",
    ) -> None:
        """Create a writer.

        Args:
            write_agent_event: Writes one stamped event to the Stream.
            turn_id: The turn every event belongs to.
            attempt: The one-based attempt of the Step that writes.
            step_execution_id: The Step execution that writes, shared by all of its attempts.
        """
        self._write_agent_event = write_agent_event
        self._turn_id = turn_id
        self._attempt = attempt
        self._step_execution_id = step_execution_id
        self._closed = False
        self._owner_thread = threading.get_ident()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    @property
    def turn_id(self) -> str | None:
        """The turn every event belongs to."""
        return self._turn_id

    @property
    def attempt(self) -> int:
        """The one-based attempt of the Step that writes."""
        return self._attempt

    @property
    def step_execution_id(self) -> str:
        """The Step execution that writes."""
        return self._step_execution_id

    @property
    def is_closed(self) -> bool:
        """Whether the runner call returned, so writes are dropped."""
        return self._closed

    def close(self) -> None:
        """Drop every later write. The session calls this when the runner call returns."""
        self._closed = True

    def write_event(self, event_type: str, payload: Mapping[str, object]) -> None:
        """Write one event.

        Args:
            event_type: An `AgentEventType` value, or an adapter type with a prefix such as
                ``openai_agents.handoff``.
            payload: A JSON object.

        Raises:
            TypeError: If the payload is not JSON.
            ValueError: If the event type is empty or the payload holds NaN.
        """
        if not event_type:
            raise ValueError("an event type must not be empty")
        event = AgentEvent(
            type=str(event_type),
            turn_id=self._turn_id,
            attempt=self._attempt,
            payload=encode_event_payload(payload),
            step_execution_id=self._step_execution_id,
        )
        if self._closed:
            return
        if self._loop is None or threading.get_ident() == self._owner_thread:
            self._write_agent_event(event)
            return
        try:
            self._loop.call_soon_threadsafe(self._deliver, event)
        except RuntimeError:
            # The loop closed: the attempt is over, and a late event has nowhere to go.
            return

    def _deliver(self, event: AgentEvent) -> None:
        if not self._closed:
            self._write_agent_event(event)

    def write_text_delta(self, text: str) -> None:
        """Write a piece of the model's answer text; empty text writes nothing."""
        if text:
            self.write_event(AgentEventType.TEXT_DELTA, {"text": text})

    def write_reasoning_delta(self, text: str) -> None:
        """Write a piece of the model's reasoning text; empty text writes nothing."""
        if text:
            self.write_event(AgentEventType.REASONING_DELTA, {"text": text})

    def write_tool_call_started(self, tool_call_id: str, tool_name: str) -> None:
        """Write that a tool call started."""
        self.write_event(
            AgentEventType.TOOL_CALL_STARTED,
            {"tool_call_id": tool_call_id, "tool_name": tool_name},
        )

    def write_tool_call_finished(self, tool_call_id: str, tool_name: str, status: str) -> None:
        """Write that a tool call finished with ``status``."""
        self.write_event(
            AgentEventType.TOOL_CALL_FINISHED,
            {"tool_call_id": tool_call_id, "tool_name": tool_name, "status": str(status)},
        )
