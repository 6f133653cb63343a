"""Reading a session's events for a browser: tokens, long polls, and whether a turn has committed its end."""

from __future__ import annotations

import logging
from datetime import timedelta

import grpc
from dex import DexServiceError, LongPollTimeoutError, StreamMessage

from dex_agents.client import AgentSessionClient
from dex_agents.values import AgentEvent, AgentSnapshot

__all__ = [
    "TURN_END_EVENT_TYPES",
    "RejectedResumeTokenError",
    "committed_turn_end",
    "newest_token",
    "opening_token",
    "read_next_event",
    "snapshot_or_none",
    "turn_has_ended",
]

_logger = logging.getLogger("dex_agents.web")

#: Event types that end a turn. The steering release adds ``turn_steered`` and ``turn_cancelled``.
TURN_END_EVENT_TYPES = frozenset({"turn_completed", "turn_failed", "turn_steered", "turn_cancelled"})

# The gRPC codes a server answers a resume token it does not accept with.
_REJECTED_TOKEN_CODES = frozenset({grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OUT_OF_RANGE})
_PAGE_SIZE = 500
# How far back the opening token looks for the active turn's first event. A turn with more retained events
# than this opens at the oldest one looked at, so the browser shows the rest of its live text.
_MAX_SCANNED_EVENTS = 10_000


class RejectedResumeTokenError(Exception):
    """The server does not accept a resume token."""


async def read_next_event(
    sessions: AgentSessionClient, session_id: str, token: str, wait_seconds: int
) -> StreamMessage[AgentEvent] | None:
    """Return the event after ``token``, or ``None`` when none arrives within ``wait_seconds``.

    Raises:
        RejectedResumeTokenError: If the server rejects ``token``.
    """
    try:
        return await sessions.read_agent_event(session_id, token, timedelta(seconds=wait_seconds))
    except LongPollTimeoutError:
        return None
    except DexServiceError as error:
        if error.code in _REJECTED_TOKEN_CODES:
            raise RejectedResumeTokenError(
                f"the resume token {token!r} was rejected: {error.detail}"
            ) from error
        raise


async def snapshot_or_none(sessions: AgentSessionClient, session_id: str) -> AgentSnapshot | None:
    """Return the session's snapshot, or ``None`` while no Worker answers (a stream then tries again)."""
    try:
        return await sessions.get_agent_snapshot(session_id)
    except Exception as error:  # a stream must outlive a Worker restart, whatever the RPC raised
        _logger.info("snapshot of %s unavailable: %s", session_id, error)
        return None


def turn_has_ended(snapshot: AgentSnapshot, turn_id: str) -> bool:
    """Whether the committed state shows ``turn_id`` is no longer the active turn."""
    state = snapshot.state
    return state is not None and state.active_turn_id != turn_id


async def committed_turn_end(
    sessions: AgentSessionClient, session_id: str, turn_id: str, end_token: str, settle_seconds: int
) -> AgentSnapshot | None:
    """Wait until a turn end event's commit shows in the snapshot, or a later event shows it never will.

    A Step writes a turn's end event before its result commits. Only a later event of the same turn proves
    that the attempt which wrote the end died before its commit (its retry writes the turn's events again).
    Another turn's events prove nothing: the Step that ends a steered turn writes the next turn's
    ``turn_started`` before its commit, and a queued message starts the next turn as soon as the end
    committed. The caller reads the later events again from ``end_token``.

    Args:
        sessions: The session client.
        session_id: The session.
        turn_id: The turn the end event belongs to.
        end_token: The end event's resume token.
        settle_seconds: One wait for a later event between two snapshot reads.

    Returns:
        The snapshot that shows the turn ended, or ``None`` when the end's attempt never committed.
    """
    after = end_token
    while True:
        snapshot = await snapshot_or_none(sessions, session_id)
        if snapshot is not None and turn_has_ended(snapshot, turn_id):
            return snapshot
        later = await read_next_event(sessions, session_id, after, settle_seconds)
        if later is None:
            continue
        if later.value.turn_id == turn_id:
            return None
        after = later.resume_token


async def newest_token(sessions: AgentSessionClient, session_id: str) -> str:
    """Return the resume token of the newest retained event, or ``""`` when the Stream holds none."""
    page = await sessions.list_agent_events(session_id, page_size=1)
    return page.messages[0].resume_token if page.messages else ""


async def opening_token(sessions: AgentSessionClient, session_id: str, active_turn_id: str | None) -> str:
    """Return the token a browser opens events from, read before the snapshot it goes with.

    Without an active turn it is the newest event's token, so the browser sees only what follows. With one,
    it is the token just before the turn's first retained event, so the browser replays the turn's live
    text, which the stored messages do not hold until the turn ends.

    Args:
        sessions: The session client.
        session_id: The session.
        active_turn_id: The turn a snapshot read before this call showed active, if any.

    Returns:
        A resume token; ``""`` means the oldest retained event.
    """
    before_page = ""
    scanned = 0
    newest = ""
    oldest_of_turn = ""
    while True:
        page = await sessions.list_agent_events(
            session_id, page_size=_PAGE_SIZE, before_page_token=before_page
        )
        for message in page.messages:
            if not newest:
                newest = message.resume_token
            if active_turn_id is None:
                return newest
            if message.value.turn_id is not None and message.value.turn_id != active_turn_id:
                return message.resume_token
            oldest_of_turn = message.resume_token
            scanned += 1
        if not page.next_page_token:
            # Every retained event belongs to the turn: start from the oldest retained one.
            return ""
        if scanned >= _MAX_SCANNED_EVENTS:
            return oldest_of_turn
        before_page = page.next_page_token
