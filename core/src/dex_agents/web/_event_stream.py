"""The plain Server-Sent Events of a session: each event's ``id`` is its Dex resume token.

An ``EventSource`` that loses its connection sends the last ``id`` back as ``Last-Event-ID`` and resumes
right after it. Two rules keep what a browser sees in line with committed state:

* A turn-end event is sent only once the snapshot shows the turn ended. A Step writes the event before its
  result commits; an attempt that dies in between never ends the turn, and the retry writes a new end.
  When a later event of the same turn arrives while the turn still runs, the held end belonged to such an
  attempt and is dropped. (Another turn's events decide nothing: a steered turn's Step writes the next
  turn's ``turn_started`` before it commits the end.)
* When the snapshot shows that a turn the stream follows has ended but its end event never came (the
  Stream trimmed it or lost it), the stream sends ``web.turn_ended``, without an ``id`` since no Stream
  message carries it, so the browser rebuilds from the snapshot.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from dex import StreamMessage
from sse_starlette import ServerSentEvent

from dex_agents.client import AgentSessionClient
from dex_agents.values import AgentEvent
from dex_agents.web._json import event_json
from dex_agents.web._stream_reads import (
    TURN_END_EVENT_TYPES,
    committed_turn_end,
    read_next_event,
    snapshot_or_none,
    turn_has_ended,
)

__all__ = ["TURN_ENDED_FROM_STATE", "EventStreamTimings", "open_event_stream"]

#: The event the stream sends when committed state ended a turn whose end event the Stream lost.
TURN_ENDED_FROM_STATE = "web.turn_ended"


@dataclass(frozen=True)
class EventStreamTimings:
    """How long a stream waits, in whole seconds (Dex long polls take whole seconds).

    Attributes:
        long_poll_seconds: One wait for the next event; after each empty wait the stream checks the
            committed state of the turn it follows.
        settle_seconds: One wait while a held turn end waits for its commit, or before a turn that ended in
            committed state counts as having lost its end event.
    """

    long_poll_seconds: int = 20
    settle_seconds: int = 1


async def open_event_stream(
    sessions: AgentSessionClient, session_id: str, token: str, timings: EventStreamTimings
) -> AsyncIterator[ServerSentEvent]:
    """Check ``token`` with a first read, then return the stream of events after it.

    Raises:
        RejectedResumeTokenError: If the server rejects ``token``; nothing was sent yet.
    """
    first = await read_next_event(sessions, session_id, token, timings.settle_seconds)
    return _EventStream(sessions, session_id, token, timings).run(first)


def _sse(message: StreamMessage[AgentEvent]) -> ServerSentEvent:
    return ServerSentEvent(
        json.dumps(event_json(message.value), separators=(",", ":")),
        event=message.value.type,
        id=message.resume_token,
        sep="\n",
    )


class _EventStream:
    def __init__(
        self, sessions: AgentSessionClient, session_id: str, token: str, timings: EventStreamTimings
    ) -> None:
        self._sessions = sessions
        self._session_id = session_id
        self._token = token
        self._timings = timings
        # The turn whose end the stream still expects: one whose start it saw, or the active turn.
        self._followed_turn: str | None = None
        self._checked_state = False

    async def run(self, first: StreamMessage[AgentEvent] | None) -> AsyncIterator[ServerSentEvent]:
        pending = first
        while True:
            if pending is None:
                pending = await read_next_event(
                    self._sessions, self._session_id, self._token, self._timings.long_poll_seconds
                )
                if pending is None:
                    ended = await self._turn_ended_without_event()
                    if ended is None:
                        continue
                    # The end event may have landed just after the wait: prefer it to the stand-in.
                    pending = await read_next_event(
                        self._sessions, self._session_id, self._token, self._timings.settle_seconds
                    )
                    if pending is None:
                        self._followed_turn = None
                        yield ended
                        continue
            message, pending = pending, None
            event = message.value
            if event.type in TURN_END_EVENT_TYPES and event.turn_id is not None:
                committed = await committed_turn_end(
                    self._sessions,
                    self._session_id,
                    event.turn_id,
                    message.resume_token,
                    self._timings.settle_seconds,
                )
                # The events that followed the end are read again from its token.
                self._token = message.resume_token
                if committed is not None:
                    self._followed_turn = None
                    yield _sse(message)
                continue
            if event.type == "turn_started" and event.turn_id is not None:
                self._followed_turn = event.turn_id
            self._token = message.resume_token
            yield _sse(message)

    async def _turn_ended_without_event(self) -> ServerSentEvent | None:
        if self._followed_turn is None and self._checked_state:
            return None
        snapshot = await snapshot_or_none(self._sessions, self._session_id)
        if snapshot is None or snapshot.state is None:
            return None
        if self._followed_turn is None:
            # Learn once which turn runs, so a stream opened mid-turn also notices a lost end.
            self._checked_state = True
            self._followed_turn = snapshot.state.active_turn_id
            return None
        if not turn_has_ended(snapshot, self._followed_turn):
            return None
        turn_id = self._followed_turn
        payload = {
            "turn_id": turn_id,
            "turn_count": snapshot.state.turn_count,
            "last_turn_error": snapshot.state.last_turn_error,
        }
        data = {"type": TURN_ENDED_FROM_STATE, "turn_id": turn_id, "payload": payload}
        return ServerSentEvent(json.dumps(data, separators=(",", ":")), event=TURN_ENDED_FROM_STATE, sep="\n")
