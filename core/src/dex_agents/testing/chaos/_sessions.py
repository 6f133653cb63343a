"""The user's side of one chaos session: send each message, approve each interrupt, wait for idle.

Workers and the engine die under it, so every call may fail. A read is simply repeated. A message whose
send failed is looked for in the session before it is sent again, because an engine killed after its
commit but before its answer has taken it already; sending it twice would be the driver's own duplicate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import grpc
from dex import DexServiceError, FlowAlreadyStartedError

from dex_agents import (
    AgentEventType,
    AgentMessage,
    AgentSessionClient,
    AgentSessionStatus,
    AgentSnapshot,
    MessageRole,
)
from dex_agents.testing.chaos._plan import CHECK_TURN_MESSAGE, SessionPlan

__all__ = ["SessionDriver", "SessionStalledError", "TurnEnds", "read_stored_messages", "read_turn_ends"]

_T = TypeVar("_T")

# What a dying Worker or engine makes a call raise: a service error (a Worker that died under an RPC, no
# Worker in time, the engine unreachable) or a bare transport error.
_TRANSIENT_ERRORS = (DexServiceError, grpc.RpcError, ConnectionError, TimeoutError)
_RETRY_SECONDS = 0.2


class SessionStalledError(RuntimeError):
    """A session made no progress for too long; the message says where it stood."""


async def read_stored_messages(sessions: AgentSessionClient, session_id: str) -> list[AgentMessage]:
    """Return every stored message of a session, oldest first, page by page.

    Args:
        sessions: The session client.
        session_id: The session.

    Returns:
        The messages in sequence order.
    """
    pages: list[tuple[AgentMessage, ...]] = []
    before: int | None = None
    while True:
        page = await sessions.list_agent_messages(session_id, before_sequence=before, limit=200)
        pages.append(page.messages)
        if page.next_before_sequence is None:
            break
        before = page.next_before_sequence
    return [message for page in reversed(pages) for message in page]


@dataclass
class TurnEnds:
    """How a session's turns ended, from its event Stream.

    Attributes:
        failed: The error of every failed turn, oldest first.
        failed_turn_ids: Those turns' IDs, in the same order.
        tool_statuses: How many tool calls ended with each status.
    """

    failed: list[str] = field(default_factory=list[str])
    failed_turn_ids: list[str] = field(default_factory=list[str])
    tool_statuses: dict[str, int] = field(default_factory=dict[str, int])


async def read_turn_ends(sessions: AgentSessionClient, session_id: str) -> TurnEnds:
    """Read how a session's turns and tool calls ended, without waiting for new events.

    Args:
        sessions: The session client.
        session_id: The session.

    Returns:
        The failed turns' errors and the tool calls' final statuses.
    """
    ends = TurnEnds()
    token = ""
    while True:
        page = await sessions.list_agent_events(session_id, page_size=200, before_page_token=token)
        for message in reversed(page.messages):
            event = message.value
            if event.type == AgentEventType.TURN_FAILED:
                ends.failed.insert(0, str(json.loads(event.payload).get("error")))
                ends.failed_turn_ids.insert(0, event.turn_id or "")
            elif event.type == AgentEventType.TOOL_CALL_FINISHED:
                status = str(json.loads(event.payload).get("status"))
                ends.tool_statuses[status] = ends.tool_statuses.get(status, 0) + 1
        if not page.next_page_token:
            return ends
        token = page.next_page_token


class SessionDriver:
    """Drives one planned session as a user would, through Worker and engine deaths.

    Args:
        sessions: The session client.
        plan: The session's plan (its script must already be in the script store).
        poll_seconds: How often the session's snapshot is read.
        stall_seconds: How long the session may show no progress before it counts as stuck.
    """

    def __init__(
        self, sessions: AgentSessionClient, plan: SessionPlan, *, poll_seconds: float, stall_seconds: float
    ) -> None:
        self._sessions = sessions
        self._plan = plan
        self._poll_seconds = poll_seconds
        self._stall_seconds = stall_seconds
        self.sent: list[str] = []
        """Every message the session accepted, in order."""
        self.approvals = 0
        """Interrupts this driver resolved."""
        self.retried_calls = 0
        """Calls that failed under a kill and were made again."""
        self.last_error = ""
        """The last error a call raised, for a stuck session's report."""

    @property
    def session_id(self) -> str:
        """The session ID."""
        return self._plan.session_id

    @property
    def plan(self) -> SessionPlan:
        """The session's plan."""
        return self._plan

    async def run_planned_turns(self) -> None:
        """Start the session and take every planned turn, until it is idle after the last one.

        Raises:
            SessionStalledError: If the session stops making progress.
        """
        turns = self._plan.turns
        await self._start(turns[0].message)
        await self._drive(self._send_due_message, len(turns))

    async def run_check_turn(self) -> AgentSnapshot:
        """Take one more normal turn and return the idle snapshot after it.

        Raises:
            SessionStalledError: If the session stops making progress.
        """
        await self._send(CHECK_TURN_MESSAGE)
        return await self._drive(None, len(self.sent))

    async def _drive(
        self, act: Callable[[AgentSnapshot], Awaitable[None]] | None, turn_count: int
    ) -> AgentSnapshot:
        loop = asyncio.get_running_loop()
        progress: object = None
        progress_at = loop.time()
        while True:
            snapshot = await self._call(lambda: self._sessions.get_agent_snapshot(self.session_id))
            await self._approve(snapshot)
            if act is not None:
                await act(snapshot)
            if self._is_idle_after(snapshot, turn_count):
                return snapshot
            signature = _progress_signature(snapshot, len(self.sent))
            if signature != progress:
                progress, progress_at = signature, loop.time()
            elif loop.time() - progress_at > self._stall_seconds:
                raise SessionStalledError(
                    f"no progress for {self._stall_seconds:.0f} s after {len(self.sent)} messages: "
                    f"state {snapshot.state}, pending interrupts "
                    f"{[item.interrupt_id for item in snapshot.pending_interrupts]}, tool calls "
                    f"{[(call.tool_call_id, call.status.value) for call in snapshot.tool_calls]}, "
                    f"{snapshot.queued_message_count} queued; last error: {self.last_error or 'none'}"
                )
            await asyncio.sleep(self._poll_seconds)

    def _is_idle_after(self, snapshot: AgentSnapshot, turn_count: int) -> bool:
        state = snapshot.state
        return (
            len(self.sent) == turn_count
            and state is not None
            and state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE
            and state.active_turn_id is None
            and state.turn_count == turn_count
            and snapshot.queued_message_count == 0
            and not snapshot.pending_interrupts
        )

    async def _send_due_message(self, snapshot: AgentSnapshot) -> None:
        state = snapshot.state
        due = len(self.sent)
        if state is None or due >= len(self._plan.turns):
            return
        if snapshot.queued_message_count:
            return
        idle = state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE and state.active_turn_id is None
        after_the_last_turn = state.turn_count == due and idle
        # An early message waits in the queue while the turn before it runs.
        while_the_last_turn_runs = (
            self._plan.turns[due].sent_early
            and state.turn_count == due - 1
            and state.active_turn_id is not None
        )
        if after_the_last_turn or while_the_last_turn_runs:
            await self._send(self._plan.turns[due].message)

    async def _approve(self, snapshot: AgentSnapshot) -> None:
        for interrupt in snapshot.pending_interrupts:
            try:
                if await self._sessions.resolve_interrupt(
                    self.session_id, interrupt.interrupt_id, approved=True
                ):
                    self.approvals += 1
            except _TRANSIENT_ERRORS as error:
                # The next poll sees the interrupt again if this answer did not commit.
                self._note_error(error)

    async def _start(self, message: str) -> None:
        async def start() -> None:
            # FlowAlreadyStartedError: an earlier try committed before its answer was lost.
            with contextlib.suppress(FlowAlreadyStartedError):
                await self._sessions.start_session(self.session_id, message)

        await self._call(start)
        self.sent.append(message)

    async def _send(self, message: str) -> None:
        async def send() -> None:
            try:
                accepted = await self._sessions.send_user_message(self.session_id, message)
            except _TRANSIENT_ERRORS:
                # The engine may have committed the message before its answer was lost.
                await asyncio.sleep(_RETRY_SECONDS)
                if await self._call(lambda: self._has_message(message)):
                    return
                raise
            if not accepted:
                raise RuntimeError(f"session {self.session_id} refused the message {message!r}")

        await self._call(send)
        self.sent.append(message)

    async def _has_message(self, message: str) -> bool:
        snapshot = await self._sessions.get_agent_snapshot(self.session_id)
        if any(pending.message.text == message for pending in snapshot.queued_messages):
            return True
        stored = await read_stored_messages(self._sessions, self.session_id)
        return any(item.role is MessageRole.USER and item.text == message for item in stored)

    async def _call(self, call: Callable[[], Awaitable[_T]]) -> _T:
        loop = asyncio.get_running_loop()
        failing_since = loop.time()
        while True:
            try:
                return await call()
            except _TRANSIENT_ERRORS as error:
                self._note_error(error)
                if loop.time() - failing_since > self._stall_seconds:
                    raise SessionStalledError(
                        f"calls to the session failed for {self._stall_seconds:.0f} s: {self.last_error}"
                    ) from error
                await asyncio.sleep(_RETRY_SECONDS)

    def _note_error(self, error: BaseException) -> None:
        self.retried_calls += 1
        self.last_error = f"{type(error).__name__}: {error}"[:500]


def _progress_signature(snapshot: AgentSnapshot, sent: int) -> object:
    state = snapshot.state
    return (
        sent,
        None if state is None else (state.turn_count, state.status, state.active_turn_id),
        tuple((call.tool_call_id, call.status) for call in snapshot.tool_calls),
        tuple(interrupt.interrupt_id for interrupt in snapshot.pending_interrupts),
        snapshot.queued_message_count,
        len(snapshot.messages),
    )
