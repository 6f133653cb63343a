"""`AgentSessionClient`: typed calls to the sessions of one Flow type."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from dex import (
    AsyncClient,
    ChannelMessageNotFoundError,
    Credential,
    RPCInvokeOptions,
    RpcLockConflictError,
    StartFlowOptions,
    StreamMessage,
    StreamMessagesPage,
    WorkerInvocationError,
)

from dex_agents import _session_waits
from dex_agents._connection import ClientConnection
from dex_agents._session_waits import SendMarkers, TurnEnd
from dex_agents.limits import MAX_SESSION_SETTINGS_BYTES, MAX_USER_MESSAGE_BYTES, unencodable_index, utf8_size
from dex_agents.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_TOOL_OUTPUTS,
    message_sequence_key,
    tool_output_key,
)
from dex_agents.session import AgentSessionFlow
from dex_agents.session._settings import session_settings_problem
from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentMessagesPage,
    AgentSessionStartInput,
    AgentSnapshot,
    AgentUserMessage,
    AnswerQuestionRequest,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    ExecutePlanRequest,
    GetToolOutputRequest,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
)

__all__ = ["AgentSessionClient"]

_ResultT = TypeVar("_ResultT")
_PageT = TypeVar("_PageT", AgentSnapshot, AgentMessagesPage)

_FIRST_RETRY_DELAY = 0.05
_MAX_RETRY_DELAY = 0.5
# How often an RPC is sent again when the Worker running it went away before answering (a drained or
# killed Worker during a rolling deploy): another Worker answers it, and nothing of the first was committed.
_WORKER_DISCONNECT_TRIES = 4
_WORKER_DISCONNECTED = "WORKER_DISCONNECTED"
_DEFAULT_WAIT = timedelta(minutes=10)
_CLIENT_BLOB_CACHE_BYTES = 64 * 1024 * 1024
# Each call that names missing chunks is followed by one that loads them; the index can change in between
# (a rollover), so a few rounds, and then the reader gets the partial answer, which says what it lacks.
_CHUNK_ROUNDS = 4
# Sessions whose snapshot chunks the client remembers, so a UI's repeated snapshot takes one call.
_REMEMBERED_SNAPSHOT_LOADS = 1024


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


def _checked_settings(settings: Mapping[str, object]) -> dict[str, object]:
    problem = session_settings_problem(
        dict(settings) if isinstance(settings, Mapping) else settings,  # pyright: ignore[reportUnnecessaryIsInstance]
        MAX_SESSION_SETTINGS_BYTES,
    )
    if problem is not None:
        raise ValueError(f"{problem} (dex_agents.MAX_SESSION_SETTINGS_BYTES is {MAX_SESSION_SETTINGS_BYTES})")
    return dict(settings)


def _chunks_read(loaded: tuple[int, ...], snapshot: AgentSnapshot) -> tuple[int, ...]:
    """The loaded chunks a snapshot's messages come from: the one holding its oldest message, and newer.

    A chunk is keyed by its first sequence, so the chunk holding a message is the loaded one with the
    greatest first sequence at or before it. Older ones, loaded before the session grew, are not kept.
    """
    if not snapshot.messages:
        return ()
    oldest = snapshot.messages[0].sequence
    floor = max((first for first in loaded if first <= oldest), default=oldest)
    return tuple(first for first in loaded if first >= floor)


async def _past_worker_disconnects(invoke: Callable[[], Awaitable[_ResultT]]) -> _ResultT:
    """Call an RPC again when the Worker that ran it disconnected, a few times with a short pause.

    The server commits an RPC's writes from the Worker's answer, so an RPC whose Worker went away before
    answering changed nothing, and sending it again cannot apply it twice.
    """
    delay = _FIRST_RETRY_DELAY
    for tries_left in range(_WORKER_DISCONNECT_TRIES - 1, -1, -1):
        try:
            return await invoke()
        except WorkerInvocationError as error:
            if error.worker_error_type != _WORKER_DISCONNECTED or tries_left == 0:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 4, _MAX_RETRY_DELAY)
    raise AssertionError("unreachable: the last try returns or raises")


class AgentSessionClient:
    """Starts sessions of one Flow type, calls their RPCs, reads their events and waits on them.

    Built on an application's own `AsyncClient`, it owns nothing and needs no closing (close the
    `AsyncClient`). Built by `connect`, it owns its connection and blob cache: use it as
    ``async with AgentSessionClient.connect(...) as sessions:`` or call `close` at shutdown.
    """

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
            lock_conflict_retry_timeout: How long `resolve_interrupt`, `answer_question`, `execute_plan`
                and `cancel_turn` retry while a Step holds a lock they need.

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
        self._owned: ClientConnection | None = None
        self._send_markers = SendMarkers()
        self._snapshot_chunks: OrderedDict[str, tuple[int, ...]] = OrderedDict()

    @property
    def flow(self) -> AgentSessionFlow:
        """The session Flow type."""
        return self._flow

    async def start_session(
        self,
        session_id: str,
        initial_message: str | None = None,
        options: StartFlowOptions | None = None,
        *,
        session_settings: Mapping[str, object] | None = None,
    ) -> str:
        """Start a session.

        Args:
            session_id: The session ID, used as the Flow ID.
            initial_message: The first user message; `None` or blank starts the session idle.
            options: Dex start options.
            session_settings: Settings every turn starts with until `update_session_settings` replaces
                them: a JSON object of at most `MAX_SESSION_SETTINGS_BYTES` of compact JSON, such as the
                model or instructions the runner chooses. Keep references, not secrets, in them.

        Returns:
            The run ID.

        Raises:
            TypeError: If ``initial_message`` is not a str.
            ValueError: If ``session_id`` is empty, ``initial_message`` is larger than
                `MAX_USER_MESSAGE_BYTES` or not valid UTF-8 text, or the settings are not a JSON object or
                are too large; nothing is started.
            FlowAlreadyStartedError: If the session ID is in use.
        """
        if not isinstance(session_id, str) or not session_id:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"session_id must be a non-empty str, got {session_id!r}")
        if initial_message is not None:
            _check_message_text(initial_message, "the initial message")
        settings = None if session_settings is None else _checked_settings(session_settings)
        run_id = await self._client.start_flow(
            self._flow,
            session_id,
            AgentSessionStartInput(initial_message=initial_message, session_settings=settings),
            options if options is not None else StartFlowOptions(),
        )
        if initial_message is not None and initial_message.strip():
            # A new session's first turn is the first that starts: every event counts.
            self._send_markers.mark(session_id, "")
        return run_id

    async def update_session_settings(self, session_id: str, session_settings: Mapping[str, object]) -> bool:
        """Replace the settings that the session's next turn starts with.

        The running turn, its retries included, keeps the settings it started with. ``{}`` clears them.

        Args:
            session_id: The session.
            session_settings: The new settings: a JSON object of at most `MAX_SESSION_SETTINGS_BYTES` of
                compact JSON.

        Returns:
            `False` when the session has not started yet, or the session refused the settings.

        Raises:
            ValueError: If the settings are not a JSON object or are too large; nothing is sent.
        """
        request = UpdateSessionSettingsRequest(session_settings=_checked_settings(session_settings))
        return await _past_worker_disconnects(
            lambda: self._client.invoke_rpc(self._flow.update_session_settings, session_id, request)
        )

    async def send_user_message(self, session_id: str, text: str, *, plan_mode: bool = False) -> bool:
        """Queue a user message; it starts a turn once the session is idle.

        Args:
            session_id: The session.
            text: The message.
            plan_mode: Start a planning turn, which may only write the plan with ``write_todos``; the
                user then approves the plan with `execute_plan`.

        Returns:
            `False` for whitespace-only text, or for ``plan_mode`` when the Flow type has plan mode off;
            else `True`.

        Raises:
            TypeError: If ``text`` is not a str; nothing is sent.
            ValueError: If ``text`` is larger than `MAX_USER_MESSAGE_BYTES` or not valid UTF-8 text; nothing
                is sent.
        """
        _check_message_text(text, "the user message")
        if not text.strip():
            return False
        return await self._marked_send(
            session_id,
            lambda: self._client.invoke_rpc(
                self._flow.send_user_message, session_id, AgentUserMessage(text=text, plan_mode=plan_mode)
            ),
        )

    async def answer_question(self, session_id: str, interrupt_id: str, answer: str) -> bool:
        """Answer a pending question: an ``ask_user`` call's, a tool's, or a started task's.

        Decline a question with `resolve_interrupt` and ``approved=False``. Retries lock conflicts like
        `resolve_interrupt`.

        Args:
            session_id: The session.
            interrupt_id: The question's `AgentInterrupt.interrupt_id`.
            answer: The answer; one of the question's choices when it allows no free text.

        Returns:
            `False` when the question is not pending (unknown, already answered or declined, or its turn
            ended), its deadline passed, or the answer is blank or not one of the choices it requires.

        Raises:
            TypeError: If ``answer`` is not a str; nothing is sent.
            ValueError: If ``answer`` is larger than `MAX_USER_MESSAGE_BYTES` or not valid UTF-8 text;
                nothing is sent.
            RpcLockConflictError: If the lock stayed taken for the whole retry time.
        """
        _check_message_text(answer, "the answer")
        if not answer.strip():
            return False
        request = AnswerQuestionRequest(interrupt_id=interrupt_id, answer=answer)
        return await self._retry_lock_conflicts(
            lambda: self._client.invoke_rpc(self._flow.answer_question, session_id, request)
        )

    async def execute_plan(self, session_id: str, revision: int) -> bool:
        """Approve the session's plan at ``revision``; an executing turn starts with it.

        Retries lock conflicts like `resolve_interrupt`; of two approvals of one revision only the first
        returns `True`.

        Args:
            session_id: The session.
            revision: The `AgentPlan.revision` the user reviewed.

        Returns:
            `False` when the revision is not the plan's current one, the plan is not a draft or active, an
            approval is already pending, or the session is busy: a turn runs, or a message or interrupt
            waits.

        Raises:
            RpcLockConflictError: If the lock stayed taken for the whole retry time.
        """
        request = ExecutePlanRequest(revision=revision)
        # The executing turn starts from a channel message the snapshot does not show, as a sent message.
        return await self._marked_send(
            session_id,
            lambda: self._retry_lock_conflicts(
                lambda: self._client.invoke_rpc(self._flow.execute_plan, session_id, request)
            ),
        )

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
    ) -> bool:
        """Approve or reject a pending tool call, or decline a pending question (``approved=False``).

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

        The message applies at the turn's next boundary: approvals, questions and durable waits still
        waiting are abandoned (a started task and its questions go on), tool calls
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
        return await self._marked_send(
            session_id,
            lambda: self._false_when_message_is_gone(
                self._client.invoke_rpc(self._flow.steer_user_message, session_id, request)
            ),
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
            _past_worker_disconnects(
                lambda: self._client.invoke_rpc(self._flow.delete_queued_message, session_id, request)
            )
        )

    async def cancel_turn(self, session_id: str, turn_id: str | None = None) -> bool:
        """Cancel the running turn.

        The model call in progress is cancelled and its result dropped, approvals, questions and durable
        waits still waiting are abandoned, and tool calls that have not started do not run; a tool that
        started runs to its end and its result is kept, and a started remote task is cancelled best-effort
        and recorded `outcome_unknown`. The turn then ends as cancelled (`turn_cancelled`). Retries lock
        conflicts like `resolve_interrupt`.

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
                return await _past_worker_disconnects(invoke)
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
        """Return the session's state, newest messages, interrupts, tool calls and usage.

        Works for running sessions and for closed ones the server still retains. The snapshot is one
        stored value, so it holds the newest messages that fit (see `AgentSnapshot`); read older ones with
        `list_agent_messages` from its ``next_before_sequence``. The client loads the message chunks the
        snapshot names and remembers them for the session's next snapshot.
        """
        remembered = self._snapshot_chunks.get(session_id, ())

        async def invoke(loads: RPCInvokeOptions) -> AgentSnapshot:
            return await self._client.invoke_rpc(self._flow.get_agent_snapshot, session_id, options=loads)

        snapshot, loaded = await self._with_missing_chunks(invoke, remembered)
        self._snapshot_chunks[session_id] = _chunks_read(loaded, snapshot)
        self._snapshot_chunks.move_to_end(session_id)
        while len(self._snapshot_chunks) > _REMEMBERED_SNAPSHOT_LOADS:
            self._snapshot_chunks.popitem(last=False)
        return snapshot

    async def list_agent_messages(
        self,
        session_id: str,
        *,
        before_sequence: int | None = None,
        limit: int = 50,
        include_framework_items: bool = False,
    ) -> AgentMessagesPage:
        """Return stored messages, oldest first, that come before ``before_sequence``.

        A page is one stored value, so it may hold fewer than ``limit`` messages; page on with its
        ``next_before_sequence`` until that is `None`.

        Args:
            session_id: The session.
            before_sequence: Pass the previous page's `next_before_sequence`; `None` for the newest page.
            limit: Messages per page, clamped to 1..200.
            include_framework_items: Return each message's ``framework_item`` too (the runner's copy of
                the message, about as large again); otherwise it is an empty string.

        Returns:
            The page.
        """
        request = ListAgentMessagesRequest(
            before_sequence=before_sequence, limit=limit, include_framework_items=include_framework_items
        )

        async def invoke(loads: RPCInvokeOptions) -> AgentMessagesPage:
            return await self._client.invoke_rpc(
                self._flow.list_agent_messages, session_id, request, options=loads
            )

        page, _ = await self._with_missing_chunks(invoke, ())
        return page

    @staticmethod
    async def _with_missing_chunks(
        invoke: Callable[[RPCInvokeOptions], Awaitable[_PageT]], first_loads: tuple[int, ...]
    ) -> tuple[_PageT, tuple[int, ...]]:
        """Call a reading RPC, then again with the message chunks it named as missing, until it has them.

        Returns:
            The last answer, and the chunks that call loaded.
        """
        loads = first_loads
        rounds = 1
        while True:
            options = RPCInvokeOptions(
                load_attribute_map_instances=tuple(
                    AGENT_MESSAGE_CHUNKS.load(message_sequence_key(sequence)) for sequence in loads
                )
            )
            answer = await _past_worker_disconnects(functools.partial(invoke, options))
            if not answer.missing_chunks or rounds == _CHUNK_ROUNDS:
                return answer, loads
            loads = tuple(sorted({*loads, *answer.missing_chunks}))
            rounds += 1

    async def get_tool_output(self, session_id: str, turn_id: str, tool_call_id: str) -> str | None:
        """Return the whole output of a call whose output the session stored apart.

        A tool output larger than ``AgentSessionOptions.max_inline_tool_output_bytes`` is kept apart: the
        call's record (``stored_output_bytes`` set) and its stored tool message hold only the part the model
        saw. Retention deletes it with its turn's messages.

        Args:
            session_id: The session.
            turn_id: The call's turn (`AgentMessage.turn_id` of its tool message).
            tool_call_id: The call.

        Returns:
            The whole output, or `None` when the call's output was not stored apart (its record or tool
            message holds all of it) or retention deleted it.
        """
        key = tool_output_key(turn_id, tool_call_id)
        output = await _past_worker_disconnects(
            lambda: self._client.invoke_rpc(
                self._flow.get_tool_output,
                session_id,
                GetToolOutputRequest(turn_id=turn_id, tool_call_id=tool_call_id),
                options=RPCInvokeOptions(load_attribute_map_instances=(AGENT_TOOL_OUTPUTS.load(key),)),
            )
        )
        return output or None

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

    # Waiting for sessions, following their events, and the client's own connection.

    @property
    def send_markers(self) -> SendMarkers:
        """Where this client's waits find the turn its last message to a session starts."""
        return self._send_markers

    async def _marked_send(self, session_id: str, send: Callable[[], Awaitable[bool]]) -> bool:
        """Send a message that starts a turn, marking the session for this client's waits first.

        The mark costs one read of the newest event, which the server answers without a Worker. A send
        that fails or is refused starts no turn, so its mark is dropped again.
        """
        token = await _session_waits.newest_event_token(self, session_id)
        self._send_markers.mark(session_id, token)
        sent = False
        try:
            sent = await _past_worker_disconnects(send)
        finally:
            if not sent:
                self._send_markers.clear(session_id, token)
        return sent

    async def wait_for_interrupt(
        self,
        session_id: str,
        *,
        timeout: timedelta = _DEFAULT_WAIT,  # noqa: ASYNC109 - a wait deadline, not an I/O timeout
    ) -> AgentInterrupt | None:
        """Wait until the session has a pending interrupt (an approval or a question), and return the oldest.

        Call it right after `start_session`, `send_user_message` or `execute_plan`: it waits while the turn
        runs, and returns `None` once the session is idle (no turn runs, no message waits) with nothing
        pending, such as when the turn ended without asking. So ``while (interrupt := await
        sessions.wait_for_interrupt(id)) is not None:`` answers every approval and question of a turn.

        Args:
            session_id: The session.
            timeout: How long to wait.

        Returns:
            The oldest pending interrupt, or `None` when the session went idle without one.

        Raises:
            SessionWaitTimeoutError: A `TimeoutError` naming what the session was doing, when ``timeout``
                passes first.
        """
        return await _session_waits.wait_for_interrupt(self, session_id, timeout)

    async def wait_for_turn_end(
        self,
        session_id: str,
        *,
        turn_id: str | None = None,
        timeout: timedelta = _DEFAULT_WAIT,  # noqa: ASYNC109 - a wait deadline, not an I/O timeout
    ) -> TurnEnd:
        """Wait until a turn ended (completed, failed, steered or cancelled), and say how.

        Without ``turn_id`` it waits for the current turn: the active one, else the one a queued message
        will start, else the last one, which has already ended. So call it after `start_session`,
        `send_user_message` or `resolve_interrupt` without worrying that the turn may have ended first. A
        turn waiting for an approval does not end until the approval is answered, or its deadline passes.

        Args:
            session_id: The session.
            turn_id: A turn, ``"turn-<n>"``; `None` for the current one.
            timeout: How long to wait.

        Returns:
            The `TurnEnd`: the turn's ID, its `TurnOutcome`, the error of a failed turn, and the snapshot.

        Raises:
            SessionWaitTimeoutError: A `TimeoutError` naming what the session was doing, when ``timeout``
                passes first.
            ValueError: If ``turn_id`` is not ``"turn-<n>"``, or the session is idle and never ran a turn.
        """
        return await _session_waits.wait_for_turn_end(self, session_id, turn_id, timeout)

    async def wait_for_snapshot(
        self,
        session_id: str,
        probe: Callable[[AgentSnapshot], _ResultT | None],
        *,
        description: str = "the snapshot to match",
        timeout: timedelta = _DEFAULT_WAIT,  # noqa: ASYNC109 - a wait deadline, not an I/O timeout
    ) -> _ResultT:
        """Wait until ``probe(snapshot)`` returns something other than `None`, and return it.

        The snapshot is read again soon after each event of the session and at least once a second, so a
        probe may test anything the snapshot holds.

        Args:
            session_id: The session.
            probe: Receives each snapshot; returns `None` for "not yet".
            description: What is awaited, for the timeout error.
            timeout: How long to wait.

        Returns:
            The first result of ``probe`` that is not `None`.

        Raises:
            SessionWaitTimeoutError: When ``timeout`` passes first.
        """
        return await _session_waits.wait_for_snapshot(
            self, session_id, probe, description=description, timeout=timeout
        )

    def follow_agent_events(
        self, session_id: str, resume_token: str = ""
    ) -> AsyncIterator[StreamMessage[AgentEvent]]:
        """Iterate over the session's events as they arrive, for ever (``break`` when done).

        Each item is a `StreamMessage`: ``item.value`` is the `AgentEvent` (``type``, ``turn_id``,
        ``attempt``, ``step_execution_id``, and ``payload`` as JSON text), and ``item.resume_token`` is the
        position just after it. Store the token of the last event handled and pass it as ``resume_token``
        to continue exactly after it, in this process or another; ``""`` starts at the oldest retained
        event. A token the server no longer holds (trimmed by the Stream's capacity) fails the read with
        the SDK's error: rebuild from `get_agent_snapshot`. Events are best effort; the snapshot is the
        committed state.

        Args:
            session_id: The session.
            resume_token: Where to start: a token from an earlier item, or ``""``.

        Returns:
            The async iterator.
        """
        return _session_waits.follow_events(self, session_id, resume_token)

    @classmethod
    def connect(
        cls,
        server_address: str,
        flow: AgentSessionFlow,
        *,
        blob_cache_directory: str | Path | None = None,
        credential: Credential | None = None,
        lock_conflict_retry_timeout: timedelta = timedelta(seconds=5),
    ) -> AgentSessionClient:
        """Connect to a Dex server for sessions of ``flow``, owning the connection.

        It builds the `AsyncClient` every application needs: a Registry of ``flow`` with
        `agent_codec_registry()`, a blob cache, and pull-mode dispatch for the sessions it starts. In a
        client process, ``flow`` is `AgentSessionFlow.for_client(flow_type=...)`, so the process imports no
        agent or framework. Close the result with `close`, or use it in ``async with``.

        Args:
            server_address: The Dex server, ``host:port``.
            flow: The session Flow type.
            blob_cache_directory: Where large values are cached; `None` for a temporary directory removed
                on close.
            credential: The bearer credential for a server that requires one.
            lock_conflict_retry_timeout: As for the constructor.

        Returns:
            The session client.
        """
        owned = ClientConnection.open(server_address, [flow], blob_cache_directory, credential)
        sessions = cls(owned.client, flow, lock_conflict_retry_timeout=lock_conflict_retry_timeout)
        sessions._owned = owned
        return sessions

    @property
    def client(self) -> AsyncClient:
        """The Dex client underneath."""
        return self._client

    async def close(self) -> None:
        """Close the connection and blob cache that `connect` opened; nothing otherwise. Safe to repeat."""
        owned, self._owned = self._owned, None
        if owned is not None:
            await owned.close()

    async def __aenter__(self) -> AgentSessionClient:
        return self

    async def __aexit__(
        self,
        exception_type: type[BaseException] | None,
        exception: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
