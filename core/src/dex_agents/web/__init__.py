"""Sessions in the browser: snapshot and event endpoints, the AI SDK UI message stream, AG-UI, a chat page.

`create_agent_web_app` builds an ASGI app (Starlette) for one session Flow type, to mount into the
application's own ASGI server. It needs the ``web`` extra: ``pip install "dex-agents[web]"``.

Safe by default: it refuses to build without an access rule (``access=``, told the `SessionAction`) unless
``allow_any_session=True`` is passed; it answers only the loopback host names unless ``allowed_hosts=``
says more; every response carries a Content-Security-Policy, ``frame-ancestors 'none'`` and ``nosniff``;
open streams are capped per session and per app (429); bodies are bounded in bytes and nesting depth.
`serve_agent_web_app` serves it with uvicorn, running its lifespan (``connect=``) in the serving loop.

Routes, relative to where the app is mounted (every ``{session_id}`` is checked against the app's pattern
and its access rule):

* ``GET /api/sessions/{session_id}/snapshot``: the snapshot as JSON, without the fields only the session's
  Steps use, with ``resume_token``: where its events start.
* ``GET /api/sessions/{session_id}/messages?before=<sequence>``: older messages, from the snapshot's
  ``next_before_sequence``.
* ``GET /api/sessions/{session_id}/events?after=<resume_token>``: Server-Sent Events whose ``id`` is the
  Dex resume token, so ``EventSource`` resumes through ``Last-Event-ID``; a rejected token answers 400.
* ``POST /api/sessions/{session_id}/messages`` ``{"text"}``: send a user message.
* ``POST /api/sessions/{session_id}/steer`` ``{"text"}`` or ``{"message_id"}``: steer the running turn with
  a new message or a queued one; ``POST .../queued/{message_id}/delete`` ``{}``: delete a queued message;
  ``POST .../cancel`` ``{"turn_id"}`` (optional): cancel the running turn. A refusal answers 409.
* ``POST /api/sessions/{session_id}/interrupts/{interrupt_id}/approve`` ``{}``, ``.../reject``
  ``{"rejection_message"}`` (also declines a question), ``.../answer`` ``{"answer"}``.
* ``POST /api/sessions/{session_id}/plan/execute`` ``{"revision"}``: approve the plan's revision.
* ``POST /api/sessions/{session_id}/chat``: the AI SDK UI message stream for ``useChat``.
* ``POST /api/sessions/{session_id}/ag-ui``: an AG-UI run (``RunAgentInput``) for ``HttpAgent``: it sends the
  last message if it is the user's, answers ``resume`` entries, or shows the session; pending approvals and
  questions end it as AG-UI interrupts.
* ``GET /sessions/{session_id}``: the chat page, with its files under ``/static``.
"""

try:
    import ag_ui  # noqa: F401  # pyright: ignore[reportUnusedImport]
    import sse_starlette  # noqa: F401  # pyright: ignore[reportUnusedImport]
    import starlette  # noqa: F401  # pyright: ignore[reportUnusedImport]
except ImportError as error:  # pragma: no cover - exercised by a test that hides the packages
    raise ImportError(
        f"dex_agents.web needs Starlette, sse-starlette and ag-ui-protocol ({error.name} is missing): "
        'pip install "dex-agents[web]"'
    ) from error

from dex_agents.web._access import SessionAccess, SessionAccessRule, SessionAction
from dex_agents.web._app import DEFAULT_SESSION_ID_PATTERN, create_agent_web_app
from dex_agents.web._event_stream import TURN_ENDED_FROM_STATE, EventStreamTimings
from dex_agents.web._json import snapshot_json
from dex_agents.web._protection import CONTENT_SECURITY_POLICY, DEFAULT_ALLOWED_HOSTS
from dex_agents.web._requests import DEFAULT_MAX_JSON_DEPTH, DEFAULT_MAX_REQUEST_BYTES
from dex_agents.web._serving import serve_agent_web_app
from dex_agents.web._stream_caps import DEFAULT_MAX_STREAMS, DEFAULT_MAX_STREAMS_PER_SESSION
from dex_agents.web._ui_stream import UI_MESSAGE_STREAM_HEADERS

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_MAX_STREAMS_PER_SESSION",
    "DEFAULT_SESSION_ID_PATTERN",
    "TURN_ENDED_FROM_STATE",
    "UI_MESSAGE_STREAM_HEADERS",
    "EventStreamTimings",
    "SessionAccess",
    "SessionAccessRule",
    "SessionAction",
    "create_agent_web_app",
    "serve_agent_web_app",
    "snapshot_json",
]
