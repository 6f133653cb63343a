"""Waiting for a session's committed state, woken by its events: what `AgentSessionClient`'s waits share.

The snapshot (`get_agent_snapshot`) is the authority: a Step writes its events before its result commits,
and an attempt that dies in between never commits. The event Stream is the alarm clock: a background
long-poll wakes the wait when an event other than live text arrives, and the snapshot is then read again,
quickly at first (the commit follows the event within milliseconds) and less often while nothing happens.
Without events (a Stream trimmed by capacity, a change made by an RPC) the snapshot is still read at least
every ``_MAX_POLL_SECONDS``, so no wait depends on an event arriving.

One moment is invisible in the snapshot: a queued message that `AwaitUserMessage` has taken but whose
turn has not committed yet is neither queued nor running. So the client marks each session it sends a
message to with the newest event's token before the send (`SendMarkers`); until a ``turn_started`` event
follows that mark, a wait knows a turn is about to start instead of taking the session for idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import re
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, TypeVar

from dex import LongPollTimeoutError, StreamMessage

from dex_agents.events import AgentEventType
from dex_agents.values import AgentEvent, AgentInterrupt, AgentSnapshot

if TYPE_CHECKING:
    from dex_agents.client import AgentSessionClient

__all__ = [
    "SendMarkers",
    "SessionWaitTimeoutError",
    "TurnEnd",
    "TurnOutcome",
    "follow_events",
    "wait_for_interrupt",
    "wait_for_snapshot",
    "wait_for_turn_end",
]

T = TypeVar("T")

_FIRST_POLL_SECONDS = 0.05
_MAX_POLL_SECONDS = 1.0
_EVENT_LONG_POLL = timedelta(seconds=20)
_READ_RETRY_SECONDS = 1.0
# How far back `wait_for_turn_end` looks for a turn's end event that arrived before it started watching.
_END_EVENT_PAGES = 3
_END_EVENT_PAGE_SIZE = 100
_TURN_ID = re.compile(r"turn-([1-9][0-9]*)")
_MAX_SEND_MARKERS = 10_000
_TEXT_EVENTS = frozenset({AgentEventType.TEXT_DELTA.value, AgentEventType.REASONING_DELTA.value})

_logger = logging.getLogger(__name__)


class SessionWaitTimeoutError(TimeoutError):
    """A wait of `AgentSessionClient` ran out of time.

    Attributes:
        session_id: The session waited on.
        last_snapshot: The last snapshot read, or `None` when none could be read.
    """

    def __init__(self, message: str, session_id: str, last_snapshot: AgentSnapshot | None) -> None:
        """Create the error."""
        super().__init__(message)
        self.session_id = session_id
        self.last_snapshot = last_snapshot


class TurnOutcome(StrEnum):
    """How a turn ended, named after its end event."""

    COMPLETED = "completed"
    FAILED = "failed"
    STEERED = "steered"
    CANCELLED = "cancelled"


_OUTCOME_OF_EVENT = {
    AgentEventType.TURN_COMPLETED: TurnOutcome.COMPLETED,
    AgentEventType.TURN_FAILED: TurnOutcome.FAILED,
    AgentEventType.TURN_STEERED: TurnOutcome.STEERED,
    AgentEventType.TURN_CANCELLED: TurnOutcome.CANCELLED,
}


@dataclass(frozen=True)
class TurnEnd:
    """A turn that ended, as `AgentSessionClient.wait_for_turn_end` returns it.

    Attributes:
        turn_id: The turn, ``"turn-<n>"``.
        outcome: How it ended, from its end event; `None` when the event Stream no longer holds that event
            (trimmed by capacity) and the snapshot cannot tell (it can only tell a failure, while no later
            turn has ended).
        error: Why it failed (``outcome`` `FAILED`), else `None`.
        snapshot: The snapshot that showed the turn ended. A steered turn's steered messages may already
            run as the next turn in it.
    """

    turn_id: str
    outcome: TurnOutcome | None
    error: str | None
    snapshot: AgentSnapshot


def describe_snapshot(snapshot: AgentSnapshot | None) -> str:
    """A short account of a snapshot for error messages."""
    if snapshot is None:
        return "no snapshot could be read"
    state = snapshot.state
    if state is None:
        return "the session has not started yet (StartAgentSession has not committed)"
    parts = [f"status {state.status.value}", f"{state.turn_count} turn(s) ended"]
    if state.active_turn_id is not None:
        parts.append(f"active turn {state.active_turn_id}")
    if snapshot.pending_interrupts:
        parts.append(f"{len(snapshot.pending_interrupts)} pending interrupt(s)")
    if snapshot.queued_message_count:
        parts.append(f"{snapshot.queued_message_count} queued message(s)")
    if state.last_turn_error:
        parts.append(f"last turn error {state.last_turn_error[:200]!r}")
    return ", ".join(parts)


async def newest_event_token(sessions: AgentSessionClient, session_id: str) -> str:
    """The resume token after the newest retained event, or ``""`` when there is none."""
    page = await sessions.list_agent_events(session_id, page_size=1)
    return page.messages[0].resume_token if page.messages else ""


async def _wake_on_events(
    sessions: AgentSessionClient, session_id: str, token: str, woken: asyncio.Event
) -> None:
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, _EVENT_LONG_POLL)
        except LongPollTimeoutError:
            continue
        except Exception as error:
            # A token trimmed away, a session not started yet, a server restart: the snapshot polls go on
            # regardless, so start again from the newest event a little later.
            _logger.debug("event wake-ups for %s paused: %s", session_id, error)
            await asyncio.sleep(_READ_RETRY_SECONDS)
            with contextlib.suppress(Exception):
                token = await newest_event_token(sessions, session_id)
            continue
        token = message.resume_token
        # Live text changes no committed state; every other event marks a Step's progress.
        if message.value.type not in _TEXT_EVENTS:
            woken.set()


async def wait_for_snapshot(
    sessions: AgentSessionClient,
    session_id: str,
    probe: Callable[[AgentSnapshot], T | None] | Callable[[AgentSnapshot], Awaitable[T | None]],
    *,
    description: str,
    timeout: timedelta,  # noqa: ASYNC109 - a wait deadline, not an I/O timeout
) -> T:
    """Read the snapshot until ``probe`` returns something other than `None`, and return that.

    Raises:
        SessionWaitTimeoutError: When ``timeout`` passes first.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout.total_seconds()
    woken = asyncio.Event()
    start_token = ""
    with contextlib.suppress(Exception):
        start_token = await newest_event_token(sessions, session_id)
    reader = asyncio.create_task(_wake_on_events(sessions, session_id, start_token, woken))
    last: AgentSnapshot | None = None
    delay = _FIRST_POLL_SECONDS
    try:
        while True:
            last = await sessions.get_agent_snapshot(session_id)
            result = probe(last)
            if inspect.isawaitable(result):
                result = await result
            if result is not None:
                return result  # pyright: ignore[reportReturnType]
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise SessionWaitTimeoutError(
                    f"timed out after {timeout.total_seconds():g} s waiting for {description} in session "
                    f"{session_id!r}; {describe_snapshot(last)}",
                    session_id,
                    last,
                )
            try:
                await asyncio.wait_for(woken.wait(), min(delay, remaining))
            except TimeoutError:
                delay = min(delay * 2, _MAX_POLL_SECONDS)
            else:
                # A burst of events costs one snapshot, not one each.
                await asyncio.sleep(min(_FIRST_POLL_SECONDS, max(0.0, deadline - loop.time())))
                woken.clear()
                delay = _FIRST_POLL_SECONDS
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader


@dataclass(frozen=True)
class _Idle:
    pass


class SendMarkers:
    """Per session, the newest event's token before this client's last unanswered message, if any."""

    def __init__(self) -> None:
        self._markers: OrderedDict[str, str] = OrderedDict()

    def mark(self, session_id: str, token: str) -> None:
        """Remember that a message was sent to ``session_id`` when ``token`` was the newest event."""
        self._markers[session_id] = token
        self._markers.move_to_end(session_id)
        while len(self._markers) > _MAX_SEND_MARKERS:
            self._markers.popitem(last=False)

    def get(self, session_id: str) -> str | None:
        """The mark of ``session_id``, or `None`."""
        return self._markers.get(session_id)

    def clear(self, session_id: str, token: str) -> None:
        """Forget the mark of ``session_id`` if it is still ``token``."""
        if self._markers.get(session_id) == token:
            del self._markers[session_id]


async def _turn_started_after(sessions: AgentSessionClient, session_id: str, marker: str) -> int | None:
    """The number of the first turn whose ``turn_started`` follows ``marker`` (``""``: any), or `None`."""
    earliest: int | None = None
    page_token = ""
    for _ in range(_END_EVENT_PAGES):
        page = await sessions.list_agent_events(
            session_id, page_size=_END_EVENT_PAGE_SIZE, before_page_token=page_token
        )
        for message in page.messages:  # newest first
            if marker and message.resume_token == marker:
                return earliest
            event = message.value
            if event.type == AgentEventType.TURN_STARTED and event.turn_id is not None:
                with contextlib.suppress(ValueError):
                    earliest = turn_number(event.turn_id)
        page_token = page.next_page_token
        if not page_token:
            break
    return earliest


async def _awaited_turn(
    sessions: AgentSessionClient, session_id: str, snapshot: AgentSnapshot
) -> tuple[int | None, str | None]:
    """The turn a wait for "the current turn" follows, and the send mark that this resolves.

    The active turn; else the turn a waiting message starts; else the turn this client's last message
    started; else the last turn that ended (0 when none did). `None` while this client's last message is
    taken but its turn has not started yet. The mark is returned once its turn has started and is no later
    than the turn followed, so the caller can forget it.
    """
    state = snapshot.state
    assert state is not None
    marker = sessions.send_markers.get(session_id)
    started = None if marker is None else await _turn_started_after(sessions, session_id, marker)
    if state.active_turn_id is not None:
        awaited: int | None = turn_number(state.active_turn_id)
    elif snapshot.queued_message_count or snapshot.steered_messages:
        awaited = state.turn_count + 1
    elif marker is None:
        awaited = state.turn_count
    else:
        awaited = started
    resolved = marker if started is not None and awaited is not None and started <= awaited else None
    return awaited, resolved


async def wait_for_interrupt(
    sessions: AgentSessionClient,
    session_id: str,
    timeout: timedelta,  # noqa: ASYNC109 - a wait deadline, not an I/O timeout
) -> AgentInterrupt | None:
    """The oldest pending interrupt once there is one; `None` once the session is idle without one."""

    async def probe(snapshot: AgentSnapshot) -> AgentInterrupt | _Idle | None:
        if snapshot.pending_interrupts:
            return snapshot.pending_interrupts[0]
        state = snapshot.state
        if (
            state is None
            or state.active_turn_id is not None
            or snapshot.queued_message_count
            or snapshot.steered_messages
        ):
            return None
        awaited, marker = await _awaited_turn(sessions, session_id, snapshot)
        if awaited is None or state.turn_count < awaited:
            return None
        if marker is not None:
            sessions.send_markers.clear(session_id, marker)
        return _Idle()

    found = await wait_for_snapshot(
        sessions, session_id, probe, description="a pending interrupt or the end of the turn", timeout=timeout
    )
    return None if isinstance(found, _Idle) else found


def turn_number(turn_id: str) -> int:
    """The ``n`` of ``"turn-<n>"``.

    Raises:
        ValueError: For another form.
    """
    match = _TURN_ID.fullmatch(turn_id)
    if match is None:
        raise ValueError(f"a turn ID has the form 'turn-<n>' with n >= 1, got {turn_id!r}")
    return int(match.group(1))


async def wait_for_turn_end(
    sessions: AgentSessionClient,
    session_id: str,
    turn_id: str | None,
    timeout: timedelta,  # noqa: ASYNC109 - a wait deadline, not an I/O timeout
) -> TurnEnd:
    """Wait until ``turn_id`` (or the current turn) ended; see `AgentSessionClient.wait_for_turn_end`."""
    target = None if turn_id is None else turn_number(turn_id)

    async def probe(snapshot: AgentSnapshot) -> tuple[int, AgentSnapshot] | None:
        nonlocal target
        state = snapshot.state
        if state is None:
            return None
        if target is None:
            awaited, marker = await _awaited_turn(sessions, session_id, snapshot)
            if awaited is None:
                return None
            if awaited == 0:
                raise ValueError(
                    f"session {session_id!r} is idle and has run no turn, so no turn can end; "
                    "send a user message first"
                )
            target = awaited
            if marker is not None:
                sessions.send_markers.clear(session_id, marker)
        return (target, snapshot) if state.turn_count >= target else None

    number, snapshot = await wait_for_snapshot(
        sessions,
        session_id,
        probe,
        description=f"{turn_id or 'the current turn'} to end",
        timeout=timeout,
    )
    ended_turn = f"turn-{number}"
    event = await _end_event(sessions, session_id, ended_turn)
    outcome = None if event is None else _OUTCOME_OF_EVENT[AgentEventType(event.type)]
    error: str | None = None
    if event is not None and outcome is TurnOutcome.FAILED:
        error = _payload_error(event)
    state = snapshot.state
    assert state is not None
    if outcome is None and state.turn_count == number and state.last_turn_error is not None:
        # Only a failure sets last_turn_error, and every other turn end clears it.
        outcome, error = TurnOutcome.FAILED, state.last_turn_error
    return TurnEnd(turn_id=ended_turn, outcome=outcome, error=error, snapshot=snapshot)


def _payload_error(event: AgentEvent) -> str | None:
    import json  # noqa: PLC0415 - only for a failed turn's payload

    value = json.loads(event.payload).get("error")
    return value if isinstance(value, str) else None


async def _end_event(sessions: AgentSessionClient, session_id: str, turn_id: str) -> AgentEvent | None:
    """The newest end event of ``turn_id`` (a retried Step's last word), looking back a few pages."""
    page_token = ""
    for _ in range(_END_EVENT_PAGES):
        page = await sessions.list_agent_events(
            session_id, page_size=_END_EVENT_PAGE_SIZE, before_page_token=page_token
        )
        for message in page.messages:
            event = message.value
            if event.turn_id != turn_id:
                continue
            if event.type in _OUTCOME_OF_EVENT:
                return event
            if event.type == AgentEventType.TURN_STARTED:
                return None  # back at the turn's start: its end was trimmed away
        page_token = page.next_page_token
        if not page_token:
            return None
    return None


async def follow_events(
    sessions: AgentSessionClient, session_id: str, resume_token: str
) -> AsyncIterator[StreamMessage[AgentEvent]]:
    """Yield the session's events after ``resume_token`` as they arrive, for ever."""
    token = resume_token
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, _EVENT_LONG_POLL)
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        yield message
