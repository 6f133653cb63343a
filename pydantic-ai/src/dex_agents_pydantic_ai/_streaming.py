"""Live events of one model call: Pydantic AI's stream events onto the session's event writer."""

from __future__ import annotations

from dex_agents import AgentEventWriter
from pydantic_ai.messages import (
    AgentStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)

__all__ = ["forward_stream_event"]


def forward_stream_event(event: AgentStreamEvent, events: AgentEventWriter) -> None:
    """Write the text or reasoning a stream event carries as a `text_delta` or `reasoning_delta`.

    A part's first chunk arrives in its `PartStartEvent`, the rest in `PartDeltaEvent`s; both are
    forwarded so the live text equals the stored text. Other events (tool call argument deltas, final
    result markers) are not live text: the session reports tool calls itself.

    Args:
        event: One event from `ModelRequestNode.stream`.
        events: The turn's event writer.
    """
    if isinstance(event, PartStartEvent):
        if isinstance(event.part, TextPart):
            events.write_text_delta(event.part.content)
        elif isinstance(event.part, ThinkingPart):
            events.write_reasoning_delta(event.part.content)
    elif isinstance(event, PartDeltaEvent):
        if isinstance(event.delta, TextPartDelta):
            events.write_text_delta(event.delta.content_delta)
        elif isinstance(event.delta, ThinkingPartDelta) and event.delta.content_delta:
            events.write_reasoning_delta(event.delta.content_delta)
