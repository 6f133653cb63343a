"""The ASGI app: a session's snapshot, its events, the AI SDK UI message stream, its actions and the page."""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, TypeVar, cast

from ag_ui.core import BaseEvent
from dex import (
    AsyncClient,
    DexServiceError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    RpcLockConflictError,
)
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from dex_agents._plans import build_plan_approval_message
from dex_agents.client import AgentSessionClient
from dex_agents.session import AgentSessionFlow
from dex_agents.values import AgentSnapshot
from dex_agents.web._access import SessionAccess, SessionAccessRule, SessionAction, access_rule
from dex_agents.web._ag_ui import (
    AgUiTranslator,
    browser_tools_of_turn,
    encode_event,
    messages_snapshot,
    parse_ag_ui_request,
    resume_answers,
    run_finished_success,
    run_started,
    state_snapshot,
)
from dex_agents.web._ai_sdk import AiSdkDialect, requested_dialect
from dex_agents.web._chat_request import ChatRequest, approvals_from_outputs, parse_chat_request
from dex_agents.web._event_stream import EventStreamTimings, open_event_stream
from dex_agents.web._interactions import (
    InterruptAnswer,
    answer_refusal,
    browser_answers,
    plan_refusal,
    resolve_refusal,
)
from dex_agents.web._json import messages_page_json, snapshot_json
from dex_agents.web._protection import (
    DEFAULT_ALLOWED_HOSTS,
    SECURITY_HEADERS,
    WebProtection,
    checked_allowed_hosts,
)
from dex_agents.web._requests import (
    DEFAULT_MAX_JSON_DEPTH,
    DEFAULT_MAX_REQUEST_BYTES,
    BadRequestError,
    checked_id,
    error_response,
    fail,
    int_field,
    new_request_id,
    optional_bool_field,
    optional_text_field,
    read_json_object,
    text_field,
)
from dex_agents.web._stream_caps import (
    DEFAULT_MAX_STREAMS,
    DEFAULT_MAX_STREAMS_PER_SESSION,
    HeldStreamResponse,
    StreamCaps,
)
from dex_agents.web._stream_reads import (
    RejectedResumeTokenError,
    newest_token,
    opening_token,
    snapshot_or_none,
)
from dex_agents.web._turn_control import (
    cancel_refusal,
    not_queued,
    read_cancel_turn_id,
    read_steer_request,
    steer_refusal,
)
from dex_agents.web._ui_stream import UI_MESSAGE_STREAM_HEADERS, TurnTarget, encode_chunk, ui_message_chunks
from dex_agents.web._ui_translator import BrowserToolState

__all__ = ["DEFAULT_SESSION_ID_PATTERN", "create_agent_web_app"]

#: Session IDs the app accepts by default: 1-128 letters, digits and ``._:@-``, starting with a letter or
#: digit. An application with another ID space passes its own pattern.
DEFAULT_SESSION_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}"

_MAX_SESSION_ID_SHOWN = 512
_MAX_PAGE_MESSAGES = 200
_logger = logging.getLogger("dex_agents.web")
_SSE_PING_SECONDS = 15
_SNAPSHOT_TOKEN_TRIES = 3
_ResultT = TypeVar("_ResultT")


def create_agent_web_app(
    sessions: AgentSessionClient | None = None,
    *,
    client: AsyncClient | None = None,
    flow: AgentSessionFlow | None = None,
    connect: Callable[[], AgentSessionClient] | None = None,
    access: SessionAccessRule | None = None,
    session_access: SessionAccess | None = None,
    allow_any_session: bool = False,
    allowed_hosts: Sequence[str] = DEFAULT_ALLOWED_HOSTS,
    session_id_pattern: str = DEFAULT_SESSION_ID_PATTERN,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    max_streams_per_session: int = DEFAULT_MAX_STREAMS_PER_SESSION,
    max_streams: int = DEFAULT_MAX_STREAMS,
    include_session_settings: bool = False,
    serve_page: bool = True,
    timings: EventStreamTimings | None = None,
) -> Starlette:
    """Build the ASGI app that serves one Flow type's sessions to browsers.

    Serve it on its own (`serve_agent_web_app`, or any ASGI server) or mount it into the application's
    (``app.mount("/agent", web_app)`` in FastAPI or Starlette). Every route takes the session ID from its
    path; the Flow type and the Dex Client are the application's, and ``access`` decides what a request may
    do to a session. It refuses to build without an access rule unless ``allow_any_session=True`` says, in
    so many words, that anyone who reaches the app may see and drive every session.

    Args:
        sessions: The session client; or pass ``client`` and ``flow``, or ``connect``, instead.
        client: A Dex client whose Registry holds ``flow``.
        flow: The session Flow type.
        connect: Builds the session client in the app's lifespan, in the event loop that serves it (such as
            ``lambda: AgentSessionClient.connect("localhost:8801", flow)``); it is closed at shutdown. A
            client connected at import time belongs to another event loop and fails every call. A parent
            app that mounts this one runs its lifespan: ``FastAPI(lifespan=web_app.router.lifespan_context)``.
        access: ``access(request, session_id, action)`` says whether the request may do ``action`` (a
            `SessionAction`: view, send, steer, approve...) to the session. A refused view answers 404;
            a refused action on a session the request may view answers 403.
        session_access: The older form, ``session_access(request, session_id)``: one answer for viewing
            and every action.
        allow_any_session: Check nothing: anyone who can reach the app may view and drive any session whose
            ID they know or guess. Only behind the application's own authentication, or on loopback for
            development.
        allowed_hosts: The host names the app is served under (``Host`` header, port ignored); another
            answers 400, which stops DNS rebinding. Loopback only by default; ``"*.example.com"`` accepts
            subdomains and ``"*"`` any host.
        session_id_pattern: A regular expression every session ID must match in full.
        max_request_bytes: The largest request body read; larger ones answer 413.
        max_json_depth: The deepest nesting of a JSON body; deeper answers 400.
        max_streams_per_session: Open event and chat streams one session may have; one more answers 429.
        max_streams: Open event and chat streams the app may have; one more answers 429.
        include_session_settings: Send the snapshot's ``session_settings`` to the browser (left out by
            default: applications keep models, instructions or keys there).
        serve_page: Serve the chat page at ``/sessions/{session_id}`` and its files at ``/static``.
        timings: Long-poll and settle waits of the event streams.

    Returns:
        The Starlette app.

    Raises:
        TypeError: If not exactly one of ``sessions``, ``client`` with ``flow``, and ``connect`` is given; or
            not exactly one of ``access``, ``session_access`` and ``allow_any_session=True``.
        ValueError: If a limit is not positive, ``allowed_hosts`` is empty or names a port, or
            ``session_id_pattern`` does not compile.
    """
    given = [sessions is not None, client is not None or flow is not None, connect is not None]
    if sum(given) != 1:
        raise TypeError(
            "create_agent_web_app needs exactly one of an AgentSessionClient, both client= and flow=, "
            "or connect="
        )
    if sessions is None and connect is None:
        if client is None or flow is None:
            raise TypeError("create_agent_web_app needs an AgentSessionClient, or both client= and flow=")
        sessions = AgentSessionClient(client, flow)
    rule = access_rule(access, session_access, allow_any_session=allow_any_session)
    hosts = checked_allowed_hosts(allowed_hosts)
    for name, limit in (("max_request_bytes", max_request_bytes), ("max_json_depth", max_json_depth)):
        if limit <= 0:
            raise ValueError(f"{name} must be positive, got {limit}")
    try:
        pattern = re.compile(session_id_pattern)
    except re.error as error:
        raise ValueError(f"session_id_pattern does not compile: {error}") from error
    handlers = _Handlers(
        sessions,
        _Settings(
            pattern,
            rule,
            max_request_bytes,
            max_json_depth,
            include_session_settings,
            timings or EventStreamTimings(),
        ),
        StreamCaps(max_streams_per_session, max_streams),
    )
    api = "/api/sessions/{session_id}"
    interrupt = api + "/interrupts/{interrupt_id}"
    routes: list[BaseRoute] = [
        Route(api + "/snapshot", handlers.snapshot, methods=["GET"]),
        Route(api + "/events", handlers.events, methods=["GET"]),
        Route(api + "/messages", handlers.older_messages, methods=["GET"]),
        Route(api + "/messages", handlers.send_message, methods=["POST"]),
        Route(interrupt + "/approve", handlers.approve, methods=["POST"]),
        Route(interrupt + "/reject", handlers.reject, methods=["POST"]),
        Route(interrupt + "/answer", handlers.answer, methods=["POST"]),
        Route(api + "/steer", handlers.steer, methods=["POST"]),
        Route(api + "/queued/{message_id}/delete", handlers.delete_queued, methods=["POST"]),
        Route(api + "/cancel", handlers.cancel, methods=["POST"]),
        Route(api + "/chat", handlers.chat, methods=["POST"]),
        Route(api + "/chat/{chat_id}/stream", handlers.resume_chat, methods=["GET"]),
        Route(api + "/ag-ui", handlers.ag_ui, methods=["POST"]),
        Route(api + "/plan/execute", handlers.execute_plan, methods=["POST"]),
    ]
    if serve_page:
        page = resources.files("dex_agents.web").joinpath("static", "index.html").read_text(encoding="utf-8")
        static_dir = str(resources.files("dex_agents.web").joinpath("static"))
        routes.append(Route("/sessions/{session_id}", handlers.page_route(page), methods=["GET"]))
        routes.append(Mount("/static", StaticFiles(directory=static_dir), name="static"))
    lifespan = None if connect is None else handlers.lifespan(connect)
    return Starlette(
        routes=routes,
        middleware=[Middleware(WebProtection, allowed_hosts=hosts)],
        exception_handlers={
            BadRequestError: _bad_request,
            HTTPException: _http_error,
            Exception: _server_error,
        },
        lifespan=lifespan,
    )


async def _bad_request(request: Request, error: Exception) -> Response:
    del request
    refused = cast(BadRequestError, error)
    return error_response(refused.status_code, refused.message, refused.request_id)


async def _server_error(request: Request, error: Exception) -> Response:
    # The outermost handler: its answer does not pass the middleware, so it carries the headers itself.
    request_id = new_request_id()
    _logger.error("request %s (%s %s) failed", request_id, request.method, request.url.path, exc_info=error)
    response = error_response(500, "the app failed to answer; the log names this request_id", request_id)
    response.headers.update(dict(SECURITY_HEADERS))
    return response


async def _http_error(request: Request, error: Exception) -> Response:
    del request
    http = cast(HTTPException, error)
    return error_response(http.status_code, http.detail)


@dataclass(frozen=True)
class _Settings:
    pattern: re.Pattern[str]
    access: SessionAccessRule | None
    max_request_bytes: int
    max_json_depth: int
    include_session_settings: bool
    timings: EventStreamTimings


class _Handlers:
    def __init__(self, sessions: AgentSessionClient | None, settings: _Settings, caps: StreamCaps) -> None:
        self._connected = sessions
        self._pattern = settings.pattern
        self._access = settings.access
        self._max_request_bytes = settings.max_request_bytes
        self._max_json_depth = settings.max_json_depth
        self._include_session_settings = settings.include_session_settings
        self._timings = settings.timings
        self._caps = caps

    @property
    def _sessions(self) -> AgentSessionClient:
        if self._connected is None:
            fail(503, "the app is not connected to Dex yet (its lifespan has not started); try again")
        return self._connected

    def lifespan(
        self, connect: Callable[[], AgentSessionClient]
    ) -> Callable[[object], contextlib.AbstractAsyncContextManager[None]]:
        """The app's lifespan: connect in the serving event loop, close at shutdown."""

        @contextlib.asynccontextmanager
        async def connected(app: object) -> AsyncIterator[None]:
            del app
            sessions = connect()
            self._connected = sessions
            try:
                yield
            finally:
                self._connected = None
                await sessions.close()

        return connected

    async def _read_body(self, request: Request) -> dict[str, Any]:
        return await read_json_object(request, self._max_request_bytes, self._max_json_depth)

    async def _session_id(self, request: Request, action: SessionAction = SessionAction.VIEW) -> str:
        session_id = str(request.path_params["session_id"])
        if not self._pattern.fullmatch(session_id):
            fail(400, f"{session_id[:_MAX_SESSION_ID_SHOWN]!r} is not a valid session ID")
        await self._authorize(request, session_id, action)
        return session_id

    async def _authorize(self, request: Request, session_id: str, action: SessionAction) -> None:
        if self._access is None or await self._access(request, session_id, action):
            return
        if action is not SessionAction.VIEW and await self._access(request, session_id, SessionAction.VIEW):
            fail(403, f"this request may view the session {session_id!r} but not {action.value} in it")
        fail(404, f"there is no session {session_id!r}")

    @staticmethod
    def _interrupt_id(request: Request) -> str:
        return checked_id(str(request.path_params["interrupt_id"]), "an interrupt ID")

    async def _call(self, session_id: str, call: Awaitable[_ResultT]) -> _ResultT:
        """Run a session RPC, answering its failures with a status that says what went wrong."""
        try:
            return await call
        except (FlowNotFoundError, FlowNotActiveOrNotFoundError):
            fail(404, f"there is no running session {session_id!r}")
        except RpcLockConflictError:
            fail(409, "the session is busy: a short Step holds a lock this call needs; try again")
        except ValueError as error:
            fail(413, str(error))
        except DexServiceError as error:
            request_id = new_request_id()
            _logger.warning("request %s: session %r did not answer: %s", request_id, session_id, error)
            raise BadRequestError(
                503, "the session did not answer; try again (the log names this request_id)", request_id
            ) from error

    async def _snapshot(self, session_id: str) -> AgentSnapshot:
        return await self._call(session_id, self._sessions.get_agent_snapshot(session_id))

    @property
    def _plan_mode_enabled(self) -> bool:
        return self._sessions.flow.options.plan_mode_enabled

    def _snapshot_response(self, snapshot: AgentSnapshot, token: str) -> Response:
        data = snapshot_json(snapshot, token, include_session_settings=self._include_session_settings)
        # The Flow type's options, which the snapshot does not carry: whether the page offers plan mode.
        data["plan_mode_enabled"] = self._plan_mode_enabled
        return JSONResponse(data, headers={"cache-control": "no-store"})

    async def snapshot(self, request: Request) -> Response:
        session_id = await self._session_id(request)
        before = await self._snapshot(session_id)
        token = ""
        for _ in range(_SNAPSHOT_TOKEN_TRIES):
            active = before.state.active_turn_id if before.state is not None else None
            token = await self._call(session_id, opening_token(self._sessions, session_id, active))
            after = await self._snapshot(session_id)
            after_active = after.state.active_turn_id if after.state is not None else None
            if after_active == active or after_active is None:
                return self._snapshot_response(after, token)
            # A turn started between the two reads; its first events may precede the token. Read again.
            before = after
        return self._snapshot_response(before, token)

    async def older_messages(self, request: Request) -> Response:
        """Stored messages before ``?before=<sequence>``, from the snapshot's ``next_before_sequence``."""
        session_id = await self._session_id(request)
        before = _query_int(request, "before", required=True)
        limit = _query_int(request, "limit", required=False)
        limit = 50 if limit is None else limit
        if not 1 <= limit <= _MAX_PAGE_MESSAGES:
            fail(400, f"limit must be 1-{_MAX_PAGE_MESSAGES}, got {limit}")
        page = await self._call(
            session_id, self._sessions.list_agent_messages(session_id, before_sequence=before, limit=limit)
        )
        return JSONResponse(messages_page_json(page), headers={"cache-control": "no-store"})

    async def events(self, request: Request) -> Response:
        session_id = await self._session_id(request)
        token = request.headers.get("last-event-id") or request.query_params.get("after")
        if token is None:
            fail(
                400, "pass ?after=<resume_token> from the snapshot ('' reads from the oldest retained event)"
            )
        if token:
            checked_id(token, "a resume token")
        hold = self._caps.hold(session_id)
        try:
            stream = await self._call(
                session_id, open_event_stream(self._sessions, session_id, token, self._timings)
            )
        except RejectedResumeTokenError as error:
            hold.release()
            fail(400, f"{error}; load the snapshot again and open the events from its resume_token")
        except BaseException:
            hold.release()
            raise
        response = EventSourceResponse(
            stream, ping=_SSE_PING_SECONDS, sep="\n", headers={"x-accel-buffering": "no"}
        )
        return HeldStreamResponse(response, hold)

    async def _send_user_message(self, session_id: str, text: str, *, plan_mode: bool) -> None:
        if plan_mode and not self._plan_mode_enabled:
            fail(422, f"plan mode is not enabled for {self._sessions.flow.flow_type} sessions")
        call = self._sessions.send_user_message(session_id, text, plan_mode=plan_mode)
        if not await self._call(session_id, call):
            fail(422, "the session refused the message")

    async def send_message(self, request: Request) -> Response:
        """Send a user message (``plan_mode``: start a planning turn)."""
        session_id = await self._session_id(request, SessionAction.SEND)
        body = await self._read_body(request)
        text = text_field(body, "text")
        await self._send_user_message(session_id, text, plan_mode=optional_bool_field(body, "plan_mode"))
        return JSONResponse({"queued": True}, status_code=202)

    async def steer(self, request: Request) -> Response:
        """Steer the running turn with a new message or a queued one (queued while no turn runs)."""
        session_id = await self._session_id(request, SessionAction.STEER)
        steer = read_steer_request(await self._read_body(request))
        call = self._sessions.steer_user_message(session_id, steer.text, message_id=steer.message_id)
        if not await self._call(session_id, call):
            fail(409, steer_refusal(await self._snapshot(session_id), steer))
        return JSONResponse({"steered": True}, status_code=202)

    async def delete_queued(self, request: Request) -> Response:
        session_id = await self._session_id(request, SessionAction.DELETE_QUEUED)
        message_id = checked_id(str(request.path_params["message_id"]), "a message ID")
        await self._read_body(request)
        if not await self._call(session_id, self._sessions.delete_queued_message(session_id, message_id)):
            fail(409, not_queued(message_id))
        return JSONResponse({"deleted": True})

    async def cancel(self, request: Request) -> Response:
        """Cancel the running turn, or only the turn the body names."""
        session_id = await self._session_id(request, SessionAction.CANCEL)
        turn_id = read_cancel_turn_id(await self._read_body(request))
        if not await self._call(session_id, self._sessions.cancel_turn(session_id, turn_id)):
            fail(409, cancel_refusal(await self._snapshot(session_id), turn_id))
        return JSONResponse({"cancel_requested": True}, status_code=202)

    async def execute_plan(self, request: Request) -> Response:
        """Approve the plan revision the body names; an executing turn starts with it."""
        session_id = await self._session_id(request, SessionAction.EXECUTE_PLAN)
        revision = int_field(await self._read_body(request), "revision")
        await self._execute_plan(session_id, revision)
        return JSONResponse({"execution_requested": True}, status_code=202)

    async def _execute_plan(self, session_id: str, revision: int) -> None:
        if not await self._call(session_id, self._sessions.execute_plan(session_id, revision)):
            fail(409, plan_refusal(await self._snapshot(session_id), revision))

    async def _resolve(self, request: Request, *, approved: bool) -> Response:
        action = SessionAction.APPROVE if approved else SessionAction.REJECT
        session_id = await self._session_id(request, action)
        interrupt_id = self._interrupt_id(request)
        body = await self._read_body(request)
        rejection_message = None if approved else optional_text_field(body, "rejection_message")
        resolved = await self._call(
            session_id,
            self._sessions.resolve_interrupt(
                session_id, interrupt_id, approved=approved, rejection_message=rejection_message
            ),
        )
        if not resolved:
            fail(409, resolve_refusal(await self._snapshot(session_id), interrupt_id, approved=approved))
        return JSONResponse({"resolved": True})

    async def approve(self, request: Request) -> Response:
        return await self._resolve(request, approved=True)

    async def reject(self, request: Request) -> Response:
        """Reject an approval, or decline a question."""
        return await self._resolve(request, approved=False)

    async def answer(self, request: Request) -> Response:
        session_id = await self._session_id(request, SessionAction.ANSWER)
        interrupt_id = self._interrupt_id(request)
        body = await self._read_body(request)
        if isinstance(body.get("answer"), str) and not body["answer"].strip():
            fail(422, "the answer must not be blank")
        answer = text_field(body, "answer")
        if not await self._call(session_id, self._sessions.answer_question(session_id, interrupt_id, answer)):
            refusal = answer_refusal(await self._snapshot(session_id), interrupt_id, answer)
            fail(409, refusal or f"the session refused the answer to {interrupt_id!r}; load it again")
        return JSONResponse({"resolved": True})

    async def chat(self, request: Request) -> Response:
        """The AI SDK chat endpoint: send a message, a plan approval or answers, and stream the turn."""
        session_id = await self._session_id(request)
        return await self._held_stream(
            session_id, functools.partial(self._chat_response, request, session_id)
        )

    async def _held_stream(self, session_id: str, open_stream: Callable[[], Awaitable[Response]]) -> Response:
        """The response ``open_stream`` builds, holding one of the session's stream slots until it closes."""
        hold = self._caps.hold(session_id)
        try:
            opened = await open_stream()
        except BaseException:
            hold.release()
            raise
        return HeldStreamResponse(opened, hold)

    async def _chat_response(self, request: Request, session_id: str) -> Response:
        dialect = requested_dialect(request)
        chat = parse_chat_request(await self._read_body(request))
        if chat.plan_revision is not None:
            await self._authorize(request, session_id, SessionAction.EXECUTE_PLAN)
        elif chat.user_text is not None:
            await self._authorize(request, session_id, SessionAction.SEND)
        snapshot = await self._snapshot(session_id)
        state = snapshot.state
        active_turn_id = state.active_turn_id if state is not None else None
        if chat.user_text is not None or chat.plan_revision is not None:
            token = await self._call(session_id, newest_token(self._sessions, session_id))
            after_sequence = max((message.sequence for message in snapshot.messages), default=0)
            if chat.plan_revision is not None:
                await self._execute_plan(session_id, chat.plan_revision)
                user_text = build_plan_approval_message(chat.plan_revision)
            else:
                user_text = chat.user_text or ""
                await self._send_user_message(session_id, user_text, plan_mode=chat.plan_mode)
            target = TurnTarget(None, active_turn_id, user_text, after_sequence)
            browser_tools: dict[str, int] = {}
        else:
            turn_id = active_turn_id
            if turn_id is None or (chat.turn_id is not None and chat.turn_id != turn_id):
                fail(409, "the turn these answers belong to has ended; load the conversation again")
            token = chat.resume_token if chat.resume_token and chat.turn_id == turn_id else None
            if token is None:
                token = await self._call(session_id, newest_token(self._sessions, session_id))
            browser_tools = chat.browser_tools or {}
            if not dialect.has_approvals:
                approvals = approvals_from_outputs(snapshot, chat.tool_outputs)
                chat = replace(chat, approvals=(*chat.approvals, *approvals))
                # The output such a browser shows on a call that needed approval may be its own answer, not
                # the call's result (also when the approval was resolved elsewhere): send the outcome again.
                needed_approval = {
                    record.tool_call_id for record in snapshot.tool_calls if record.requires_approval
                }
                for output in chat.tool_outputs:
                    if output.tool_call_id in needed_approval and not output.failed:
                        browser_tools[output.tool_call_id] = BrowserToolState.APPROVAL
            await self._answer_from_chat(request, session_id, snapshot, chat)
            target = TurnTarget(turn_id)
        chunks = ui_message_chunks(
            self._sessions, session_id, token, target, browser_tools, self._timings, dialect
        )
        return EventSourceResponse(
            _ui_events(chunks), ping=_SSE_PING_SECONDS, sep="\n", headers=UI_MESSAGE_STREAM_HEADERS
        )

    async def resume_chat(self, request: Request) -> Response:
        """The AI SDK's ``resumeStream``: the active turn's stream from its start, or 204 without one."""
        session_id = await self._session_id(request)
        dialect = requested_dialect(request)
        snapshot = await self._snapshot(session_id)
        turn_id = snapshot.state.active_turn_id if snapshot.state is not None else None
        if turn_id is None:
            return Response(status_code=204)
        hold = self._caps.hold(session_id)
        try:
            token = await self._call(session_id, opening_token(self._sessions, session_id, turn_id))
        except BaseException:
            hold.release()
            raise
        chunks = ui_message_chunks(
            self._sessions, session_id, token, TurnTarget(turn_id), {}, self._timings, dialect
        )
        response = EventSourceResponse(
            _ui_events(chunks), ping=_SSE_PING_SECONDS, sep="\n", headers=UI_MESSAGE_STREAM_HEADERS
        )
        return HeldStreamResponse(response, hold)

    async def ag_ui(self, request: Request) -> Response:
        """The AG-UI endpoint: one run that sends a message, resumes interrupts, or shows the session."""
        session_id = await self._session_id(request)
        return await self._held_stream(
            session_id, functools.partial(self._ag_ui_response, request, session_id)
        )

    async def _ag_ui_response(self, request: Request, session_id: str) -> Response:
        run = parse_ag_ui_request(await self._read_body(request), session_id)
        if run.user_text is not None:
            await self._authorize(request, session_id, SessionAction.SEND)
        snapshot = await self._snapshot(session_id)
        active_turn_id = snapshot.state.active_turn_id if snapshot.state is not None else None
        opening: list[BaseEvent] = []
        browser_tools: dict[str, int] = {}
        target: TurnTarget | None = TurnTarget(active_turn_id)
        if run.user_text is not None:
            token = await self._call(session_id, newest_token(self._sessions, session_id))
            after_sequence = max((message.sequence for message in snapshot.messages), default=0)
            await self._send_user_message(session_id, run.user_text, plan_mode=False)
            target = TurnTarget(None, active_turn_id, run.user_text, after_sequence)
        elif run.resume and active_turn_id is not None:
            answers = resume_answers(run, snapshot)
            token = await self._call(session_id, newest_token(self._sessions, session_id))
            browser_tools = browser_tools_of_turn(snapshot, active_turn_id)
            await self._resolve_answers(request, session_id, answers)
        else:
            # Neither a message nor answers to a running turn: show the stored conversation, then the turn
            # that runs, if any. A client whose interrupts were answered elsewhere learns so here.
            opening.append(messages_snapshot(snapshot, active_turn_id))
            token = ""
            if active_turn_id is None:
                target = None
            else:
                token = await self._call(
                    session_id, opening_token(self._sessions, session_id, active_turn_id)
                )
        opening.append(state_snapshot(snapshot))
        events = self._ag_ui_events(session_id, run.run_id, opening, token, target, browser_tools)
        return EventSourceResponse(
            events, ping=_SSE_PING_SECONDS, sep="\n", headers={"x-accel-buffering": "no"}
        )

    async def _ag_ui_events(
        self,
        session_id: str,
        run_id: str,
        opening: Sequence[BaseEvent],
        token: str,
        target: TurnTarget | None,
        browser_tools: dict[str, int],
    ) -> AsyncIterator[ServerSentEvent]:
        for event in [run_started(session_id, run_id), *opening]:
            yield ServerSentEvent(encode_event(event), sep="\n")
        if target is None:
            yield ServerSentEvent(encode_event(run_finished_success(session_id, run_id)), sep="\n")
            return
        translator = AgUiTranslator(session_id, run_id)
        # The AI SDK 6 dialect: no reset-step, so a model call's text is sent once its attempt committed.
        chunks = ui_message_chunks(
            self._sessions, session_id, token, target, browser_tools, self._timings, AiSdkDialect.V6
        )
        async for chunk in chunks:
            for event in translator.on_chunk(chunk):
                yield ServerSentEvent(encode_event(event), sep="\n")
        waiting = translator.finish_reason == "tool-calls"
        snapshot = await snapshot_or_none(self._sessions, session_id) if waiting else None
        for event in translator.finish(snapshot):
            yield ServerSentEvent(encode_event(event), sep="\n")

    async def _answer_from_chat(
        self, request: Request, session_id: str, snapshot: AgentSnapshot, chat: ChatRequest
    ) -> None:
        """Resolve the approvals and questions the browser answered that are still pending in ``snapshot``.

        Every answer is checked, and the request's right to give it, before any is sent; a refusal that
        comes later (the question was answered elsewhere meanwhile) changes nothing, as for approvals.
        """
        pending = {interrupt.interrupt_id for interrupt in snapshot.pending_interrupts}
        answers = [
            InterruptAnswer(approval.approval_id, approval.approved, approval.reason)
            for approval in chat.approvals
            if approval.approval_id in pending
        ]
        answers += [
            InterruptAnswer(
                answer.interrupt_id, answer.answer is not None, answer.decline_message, answer.answer
            )
            for answer in browser_answers(snapshot, chat.tool_outputs)
        ]
        await self._resolve_answers(request, session_id, answers)

    async def _resolve_answers(
        self, request: Request, session_id: str, answers: Sequence[InterruptAnswer]
    ) -> None:
        """Send the answers to pending interrupts, once the request may give every one of them."""
        for action in sorted({answer.action for answer in answers}):
            await self._authorize(request, session_id, action)
        for answer in answers:
            if answer.answer is not None:
                call = self._sessions.answer_question(session_id, answer.interrupt_id, answer.answer)
            else:
                call = self._sessions.resolve_interrupt(
                    session_id, answer.interrupt_id, approved=answer.approved, rejection_message=answer.reason
                )
            await self._call(session_id, call)

    def page_route(self, page: str) -> Callable[[Request], Awaitable[Response]]:
        async def chat_page(request: Request) -> Response:
            await self._session_id(request)
            return HTMLResponse(page, headers={"cache-control": "no-store"})

        return chat_page


def _query_int(request: Request, name: str, *, required: bool) -> int | None:
    text = request.query_params.get(name)
    if text is None or text == "":
        if required:
            fail(400, f"pass ?{name}=<integer> (the snapshot's next_before_sequence)")
        return None
    if not text.isdigit() or len(text) > 18:
        fail(400, f"?{name} must be a non-negative integer, got {text[:40]!r}")
    return int(text)


async def _ui_events(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[ServerSentEvent]:
    async for chunk in chunks:
        yield ServerSentEvent(encode_chunk(chunk), sep="\n")
    yield ServerSentEvent("[DONE]", sep="\n")
