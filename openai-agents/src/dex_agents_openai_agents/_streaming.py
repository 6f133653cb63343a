"""Forwards the SDK's streamed model output to the session's live events."""

from __future__ import annotations

from agents import RawResponsesStreamEvent, StreamEvent
from dex_agents.events import AgentEventWriter
from openai.types.responses import (
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
)

__all__ = ["forward_stream_event"]


def forward_stream_event(event: StreamEvent, events: AgentEventWriter) -> None:
    """Write a text or reasoning delta of ``event`` as a live event; ignore everything else."""
    if not isinstance(event, RawResponsesStreamEvent):
        return
    data = event.data
    if isinstance(data, ResponseTextDeltaEvent):
        events.write_text_delta(data.delta)
    elif isinstance(data, (ResponseReasoningSummaryTextDeltaEvent, ResponseReasoningTextDeltaEvent)):
        events.write_reasoning_delta(data.delta)
