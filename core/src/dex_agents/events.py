"""Live events of a session and the writer that stamps them.

Events are best effort: a UI renders them while a turn runs and rebuilds from `get_agent_snapshot`
afterwards. Every event names the turn, the Step execution and the attempt that wrote it, so a UI can drop
the partial text of an attempt that a retry replaced.

Each event is one Stream message, one frame from the Worker and one write on the server, and a model that
streams word by word makes hundreds per answer. So the session's writers write at most one delta event per
`DeltaCoalescing.max_delay`: the first delta after a quiet spell goes out at once, and the deltas that
follow within the window are joined into one event at its end (or once they hold
`DeltaCoalescing.max_bytes`). A UI that concatenates deltas sees the same text; only the number of events
changes.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from dex_agents.values import AgentEvent

__all__ = [
    "DEFAULT_DELTA_COALESCING",
    "AgentEventType",
    "AgentEventWriter",
    "DeltaCoalescing",
    "encode_event_payload",
]


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


@dataclass(frozen=True)
class DeltaCoalescing:
    """How a writer joins consecutive deltas of one kind into one event.

    A delta that follows no delta written within ``max_delay`` is written at once. Later ones wait, and
    are joined, until ``max_delay`` after the last delta written, or until they hold ``max_bytes`` of UTF-8
    text; so a delta waits at most ``max_delay``. Any other event, a delta of the other kind, and closing
    the writer (the end of the runner call) write the waiting text first, so the order of events is kept.

    Attributes:
        max_delay: The longest a delta waits before it is written.
        max_bytes: The text a joined delta holds before it is written without waiting.
    """

    max_delay: timedelta = timedelta(milliseconds=50)
    max_bytes: int = 4096

    def __post_init__(self) -> None:
        if self.max_delay <= timedelta(0) or self.max_bytes < 1:
            raise ValueError(
                f"DeltaCoalescing needs a positive max_delay and max_bytes, got {self.max_delay} and "
                f"{self.max_bytes}"
            )


DEFAULT_DELTA_COALESCING = DeltaCoalescing()
"""What the session's writers use: 50 ms or 4 KiB, whichever comes first."""


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
    order, because the SDK's Step output queue is not thread safe. With ``coalescing``, consecutive deltas
    of one kind are joined (see `DeltaCoalescing`); closing the writer writes what waits.
    """

    def __init__(
        self,
        write_agent_event: Callable[[AgentEvent], None],
        turn_id: str | None,
        attempt: int,
        step_execution_id: str = "",
        *,
        coalescing: DeltaCoalescing | None = None,
    ) -> None:
        """Create a writer.

        Args:
            write_agent_event: Writes one stamped event to the Stream.
            turn_id: The turn every event belongs to.
            attempt: The one-based attempt of the Step that writes.
            step_execution_id: The Step execution that writes, shared by all of its attempts.
            coalescing: Join consecutive deltas; `None` writes each delta as its own event. Coalescing
                needs a running event loop when the writer is created (a Step has one); without one, every
                delta is written at once.
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
        self._coalescing = coalescing if self._loop is not None else None
        self._pending_type: str | None = None
        self._pending_parts: list[str] = []
        self._pending_bytes = 0
        self._flush_timer: asyncio.TimerHandle | None = None
        self._last_delta_at = float("-inf")

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
        """Write the deltas that wait, then drop every later write.

        The session calls this, on the writer's event loop, when the runner call returns.
        """
        if not self._closed:
            self._flush()
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
        self._submit(self._stamp(str(event_type), encode_event_payload(payload)))

    def _stamp(self, event_type: str, payload: str) -> AgentEvent:
        return AgentEvent(
            type=event_type,
            turn_id=self._turn_id,
            attempt=self._attempt,
            payload=payload,
            step_execution_id=self._step_execution_id,
        )

    def _submit(self, item: AgentEvent | tuple[str, str]) -> None:
        """Hand an event, or a ``(delta type, text)``, to the writer's loop thread, in call order."""
        if self._closed:
            return
        if self._loop is None or threading.get_ident() == self._owner_thread:
            self._accept(item)
            return
        try:
            self._loop.call_soon_threadsafe(self._accept, item)
        except RuntimeError:
            # The loop closed: the attempt is over, and a late event has nowhere to go.
            return

    def _accept(self, item: AgentEvent | tuple[str, str]) -> None:
        if self._closed:
            return
        if isinstance(item, AgentEvent):
            self._flush()
            self._write_agent_event(item)
            return
        delta_type, text = item
        coalescing = self._coalescing
        if coalescing is None or self._loop is None:
            self._write_delta(delta_type, text)
            return
        if self._pending_type != delta_type:
            self._flush()
        window = coalescing.max_delay.total_seconds()
        if not self._pending_parts and self._loop.time() - self._last_delta_at >= window:
            # The first delta after a quiet spell goes out at once, so live text never starts late.
            self._write_delta(delta_type, text)
            return
        self._pending_type = delta_type
        self._pending_parts.append(text)
        self._pending_bytes += len(text.encode("utf-8", "surrogatepass"))
        if self._pending_bytes >= coalescing.max_bytes:
            self._flush()
        elif self._flush_timer is None:
            self._flush_timer = self._loop.call_at(self._last_delta_at + window, self._flush)

    def _write_delta(self, delta_type: str, text: str) -> None:
        if self._loop is not None:
            self._last_delta_at = self._loop.time()
        self._write_agent_event(self._stamp(delta_type, encode_event_payload({"text": text})))

    def _flush(self) -> None:
        """Write the joined deltas that wait, if any."""
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        if not self._pending_parts or self._pending_type is None:
            return
        text = "".join(self._pending_parts)
        delta_type = self._pending_type
        self._pending_parts = []
        self._pending_bytes = 0
        self._pending_type = None
        self._write_delta(delta_type, text)

    def write_text_delta(self, text: str) -> None:
        """Write a piece of the model's answer text; empty text writes nothing."""
        if text:
            self._submit((AgentEventType.TEXT_DELTA.value, text))

    def write_reasoning_delta(self, text: str) -> None:
        """Write a piece of the model's reasoning text; empty text writes nothing."""
        if text:
            self._submit((AgentEventType.REASONING_DELTA.value, text))

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
