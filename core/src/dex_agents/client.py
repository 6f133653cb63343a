"""`AgentSessionClient`: typed calls to the sessions of one Flow type."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from dex import (
    AsyncClient,
    ChannelMessageNotFoundError,
    RpcLockConflictError,
    StartFlowOptions,
    StreamMessage,
    StreamMessagesPage,
)

from dex_agents.limits import MAX_USER_MESSAGE_BYTES, unencodable_index, utf8_size
from dex_agents.session import AgentSessionFlow
from dex_agents.values import (
    AgentEvent,
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentUserMessage,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
)

__all__ = ["AgentSessionClient"]

_ResultT = TypeVar("_ResultT")

_FIRST_RETRY_DELAY = 0.05
_MAX_RETRY_DELAY = 0.5


def _check_message_text(text: object, what: str) -> None:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be str, got {type(text).__name__}; decode bytes before sending them")
    index = unencodable_index(text)
    if index is not None:
        raise ValueError(
            f"{what} is not valid UTF-8 text: character {index} is the lone surrogate {text[index]!r}, which "
            "no provider accepts; decode input bytes with errors='replace' instead of 'surrogateescape'"
        )
    size = utf8_size(text)
    if size > MAX_USER_MESSAGE_BYTES:
        raise ValueError(
            f"{what} is {size} bytes of UTF-8, more than the {MAX_USER_MESSAGE_BYTES}-byte limit "
            "(dex_agents.MAX_USER_MESSAGE_BYTES); send large content as a reference, such as a file ID"
        )


class AgentSessionClient:
    """Starts sessions of one Flow type and calls their RPCs."""

    def __init__(
        self,
        client: AsyncClient,
        flow: AgentSessionFlow,
        *,
        lock_conflict_retry_timeout: timedelta = timedelta(seconds=5),
    ) -> None:
        """Create a client.

        Args:
            client: A Dex client whose Registry holds ``flow``, the same instance.
            flow: The session Flow type.
            lock_conflict_retry_timeout: How long `resolve_interrupt` and `cancel_turn` retry while a Step
                holds a lock they need.

        Raises:
            TypeError: If ``flow`` is not an `AgentSessionFlow`.
        """
        if not isinstance(flow, AgentSessionFlow):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"AgentSessionClient needs an AgentSessionFlow, got {type(flow).__name__}; "
                "call the RPCs of other Flow types through the AsyncClient"
            )
        self._client = client
        self._flow = flow
        self._lock_conflict_retry_timeout = lock_conflict_retry_timeout

    @property
    def flow(self) -> AgentSessionFlow:
        """The session Flow type."""
        return self._flow

    async def start_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        options: StartFlowOptions | None = None,
    ) -> str:
        """Start a session.

        Args:
            session_id: The session ID, used as the Flow ID.
            initial_message: The first user message; `None` or blank starts the session idle.
            options: Dex start options.

        Returns:
            The run ID.

        Raises:
            TypeError: If ``initial_message`` is not a str.
            ValueError: If ``session_id`` is empty, or ``initial_message`` is larger than
                `MAX_USER_MESSAGE_BYTES` or not valid UTF-8 text; nothing is started.
            FlowAlreadyStartedError: If the session ID is in use.
        """
        if not isinstance(session_id, str) or not session_id:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
        if initial_message is not None:
            _check_message_text(initial_message, "the initial message")
        return await self._client.start_flow(
            self._flow,
            session_id,
            AgentSessionStartInput(initial_message=initial_message),
            options if options is not None else StartFlowOptions(),
        )

    async def send_user_message(self, session_id: str, text: str) -> bool:
        """Queue a user message; it starts a turn once the session is idle.

        Args:
            session_id: The session.
            text: The message.

        Returns:
            `False` for whitespace-only text, else `True`.

        Raises:
            TypeError: If ``text`` is not a str; nothing is sent.
            ValueError: If ``text`` is larger than `MAX_USER_MESSAGE_BYTES` or not valid UTF-8 text; nothing
                is sent.
        """
        _check_message_text(text, "the user message")
        if not text.strip():
            return False
        return await self._client.invoke_rpc(
            self._flow.send_user_message, session_id, AgentUserMessage(text=text)
        )

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Approve or reject a pending tool call.

        A Step that holds the interrupt lock makes the RPC fail with a lock conflict; the call is retried
        until ``lock_conflict_retry_timeout`` passes.

        Args:
            session_id: The session.
            interrupt_id: The interrupt, for an approval the tool call ID.
            approved: Whether the call may run.
            rejection_message: What the model sees on rejection; ignored on approval.

        Returns:
            `False` when the interrupt is unknown, already resolved, or past its deadline.

        Raises:
            TypeError: If ``rejection_message`` is neither a str nor `None`; nothing is sent.
            ValueError: If ``rejection_message`` is larger than `MAX_USER_MESSAGE_BYTES` or not valid UTF-8
                text; nothing is sent.
            RpcLockConflictError: If the lock stayed taken for the whole retry time.
        """
        if rejection_message is not None:
            _check_message_text(rejection_message, "the rejection message")
        request = ResolveInterruptRequest(
            interrupt_id=interrupt_id, approved=approved, rejection_message=rejection_message
        )
        return await self._retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.resolve_interrupt, session_id, request)
        )

    async def steer_user_message(
        self, session_id: str, text: str | None = None, *, message_id: str | None = None
    ) -> bool:
        """Steer the running turn with a new message (``text``) or a queued one (``message_id``).

        The message applies at the turn's next boundary: approvals still waiting are abandoned, tool calls
        that have not started do not run, and a model call or tool that started runs to its end. The turn
        then ends as steered and the steered messages start the next turn. While no turn runs, ``text`` is
        queued like `send_user_message`, and a queued ``message_id`` stays queued.

        Args:
            session_id: The session.
            text: A new message.
            message_id: A queued message's `PendingUserMessage.message_id`, from `get_agent_snapshot`.

        Returns:
            `False` for blank text, a message ID that is not queued (or was taken by a turn meanwhile), or
            a turn that a Worker without steering started; else `True`.

        Raises:
            TypeError: If ``text`` is not a str; nothing is sent.
            ValueError: If both or neither of ``text`` and ``message_id`` are given, or ``text`` is larger
                than `MAX_USER_MESSAGE_BYTES` or not valid UTF-8 text; nothing is sent.
        """
        if (text is None) == (message_id is None):
            raise ValueError("steer_user_message takes exactly one of text and message_id")
        if text is not None:
            _check_message_text(text, "the steered message")
            if not text.strip():
                return False
        request = SteerUserMessageRequest(message_id=message_id, text=text)
        return await self._false_when_message_is_gone(
            self._client.invoke_rpc(self._flow.steer_user_message, session_id, request)
        )

    async def delete_queued_message(self, session_id: str, message_id: str) -> bool:
        """Delete a queued user message before a turn takes it.

        Args:
            session_id: The session.
            message_id: The message's `PendingUserMessage.message_id`, from `get_agent_snapshot`.

        Returns:
            `False` when the message is not queued, including when a turn took it meanwhile.
        """
        request = DeleteQueuedMessageRequest(message_id=message_id)
        return await self._false_when_message_is_gone(
            self._client.invoke_rpc(self._flow.delete_queued_message, session_id, request)
        )

    async def cancel_turn(self, session_id: str, turn_id: str | None = None) -> bool:
        """Cancel the running turn.

        The model call in progress is cancelled and its result dropped, approvals still waiting are
        abandoned, and tool calls that have not started do not run; a tool that started runs to its end and
        its result is kept. The turn then ends as cancelled (`turn_cancelled`). Retries lock conflicts like
        `resolve_interrupt`.

        Args:
            session_id: The session.
            turn_id: Cancel only this turn; `None` cancels whichever turn is running.

        Returns:
            `True` once the cancellation is recorded (also when it already was; a final answer that committed
            first still completes the turn). `False` when no turn runs, ``turn_id`` names another turn, or
            a Worker without steering started the turn.

        Raises:
            RpcLockConflictError: If a lock stayed taken for the whole retry time.
        """
        request = CancelTurnRequest(turn_id=turn_id)
        return await self._retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.cancel_turn, session_id, request)
        )

    async def _retry_lock_conflicts(self, invoke: Callable[[], Awaitable[_ResultT]]) -> _ResultT:
        """Call a locking RPC again while a Step holds one of its locks, until the retry time passes."""
        deadline = time.monotonic() + self._lock_conflict_retry_timeout.total_seconds()
        delay = _FIRST_RETRY_DELAY
        while True:
            try:
                return await invoke()
            except RpcLockConflictError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise
                await asyncio.sleep(min(delay, remaining))
                delay = min(delay * 2, _MAX_RETRY_DELAY)

    @staticmethod
    async def _false_when_message_is_gone(invocation: Awaitable[bool]) -> bool:
        try:
            return await invocation
        except ChannelMessageNotFoundError:
            # The message was taken between the RPC's read and its commit, so nothing committed: the
            # same answer as for a message that was not queued.
            return False

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        """Return the session's state, recent messages, interrupts, tool calls and usage.

        Works for running sessions and for closed ones the server still retains.
        """
        return await self._client.invoke_rpc(self._flow.get_agent_snapshot, session_id)

    async def list_agent_messages(
        self,
        session_id: str,
        *,
        before_sequence: int | None = None,
        limit: int = 50,
    ) -> AgentMessagesPage:
        """Return stored messages, oldest first, that come before ``before_sequence``.

        Args:
            session_id: The session.
            before_sequence: Pass the previous page's `next_before_sequence`; `None` for the newest page.
            limit: Messages per page, clamped to 1..200.

        Returns:
            The page.
        """
        request = ListAgentMessagesRequest(before_sequence=before_sequence, limit=limit)
        return await self._client.invoke_rpc(self._flow.list_agent_messages, session_id, request)

    async def read_agent_event(
        self,
        session_id: str,
        resume_token: str = "",
        timeout: timedelta | None = None,  # noqa: ASYNC109 - a server-side long poll, not a local timeout
    ) -> StreamMessage[AgentEvent]:
        """Return the next event after ``resume_token``, or the oldest retained one for ``""``.

        Raises:
            LongPollTimeoutError: If no event arrives in time.
        """
        return await self._client.read_stream(session_id, self._flow.agent_events, resume_token, timeout)

    async def list_agent_events(
        self, session_id: str, *, page_size: int = 100, before_page_token: str = ""
    ) -> StreamMessagesPage[AgentEvent]:
        """Return one page of retained events, newest first, without waiting for new ones.

        Args:
            session_id: The session.
            page_size: The most events to return; the server caps it.
            before_page_token: The previous page's ``next_page_token``; ``""`` starts at the newest event.

        Returns:
            The page; its ``next_page_token`` is ``""`` on the oldest page.
        """
        return await self._client.list_stream_messages(
            session_id, self._flow.agent_events, page_size, before_page_token
        )
