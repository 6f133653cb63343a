"""Reading a session's events back in tests: the whole stream, live text by model Step, usage records."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from dex import LongPollTimeoutError

from dex_agents import AgentEvent, AgentEventType, AgentSessionClient

__all__ = ["read_agent_events", "recorded_usage", "text_by_model_step"]


async def read_agent_events(
    sessions: AgentSessionClient, session_id: str, *, quiet: timedelta = timedelta(seconds=1)
) -> list[AgentEvent]:
    """Read a session's events from the start until none arrives for ``quiet``.

    Call it once what the test waits for has happened (a turn's end, say): the events written by then are
    all in the stream, so a quiet read means the end of it.

    Args:
        sessions: The session client.
        session_id: The session to read.
        quiet: How long a read waits for the next event before the stream counts as read.

    Returns:
        The events in stream order.
    """
    events: list[AgentEvent] = []
    token = ""
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, timeout=quiet)
        except LongPollTimeoutError:
            return events
        events.append(message.value)
        token = message.resume_token


def text_by_model_step(events: Iterable[AgentEvent]) -> dict[str, str]:
    """Join the text deltas of each model Step execution, as a UI that shows live text does.

    Args:
        events: Events in stream order.

    Returns:
        Each Step execution's text in the order its first delta arrived, by Step execution ID. Deltas of
        every attempt are joined; a test that retries picks attempts itself.
    """
    text: dict[str, str] = {}
    for event in events:
        if event.type == AgentEventType.TEXT_DELTA:
            text[event.step_execution_id] = (
                text.get(event.step_execution_id, "") + json.loads(event.payload)["text"]
            )
    return text


def recorded_usage(events: Iterable[AgentEvent]) -> list[dict[str, Any]]:
    """The ``recorded`` usage of every `usage_recorded` event, in stream order.

    Args:
        events: Events in stream order.

    Returns:
        One mapping per event (``model_calls``, ``input_tokens``, ``output_tokens``, ...).
    """
    return [
        json.loads(event.payload)["recorded"]
        for event in events
        if event.type == AgentEventType.USAGE_RECORDED
    ]
