"""`scripted_provider_server`: a loopback model provider that answers from the session's script.

The framework's own provider client (OpenAI's, Anthropic's, LiteLLM's) talks HTTP to it exactly as it would
to the provider: only its base URL and a dummy key change. The server runs in the Worker process, on a
thread of its own (uvicorn serving a Starlette app), and answers each request through
`scripted_model_response`, so gates, failing attempts and the invocation log work as for the scripted
models; a response's `ProviderFault`s make chosen requests fail the way providers do.

Which ``RunModel`` call a request belongs to travels with the request: while a call's scope is set
(`with_model_call_scope`), a hook on ``httpx``'s and ``httpx2``'s clients adds the ``x-dex-scripted-call``
header to requests for this server, and a client in another process (the Claude Code CLI) gets a base URL
with the call's path prefix (`ScriptedProviderServer.base_url_for_current_call`).
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

from dex_agents.testing._provider_wire import (
    ProviderApi,
    ProviderReply,
    ReadRequest,
    ReplyToolCall,
    error_answer,
    read_request,
    reply_body,
    reply_events,
)
from dex_agents.testing._script import (
    DEFAULT_SCRIPTED_SUMMARY,
    ModelCallScope,
    ProviderFault,
    ScriptedResponse,
    ScriptStore,
    current_model_call,
    model_call_scope,
    scripted_model_response,
)

__all__ = [
    "CALL_HEADER",
    "PROVIDER_REQUEST_LOG",
    "ProviderRequest",
    "ScriptedProviderServer",
    "read_provider_requests",
    "scripted_provider_server",
]

CALL_HEADER = "x-dex-scripted-call"
"""The header that names a request's ``RunModel`` call (added by the kit's hook on httpx clients)."""
PROVIDER_REQUEST_LOG = "provider_requests.jsonl"
"""The file, in the stack's state directory, that logs every request the server got."""

_SCOPE_PREFIX = "/scope/{token}"
_MAX_SCOPES = 10_000
_STATUS_FAULTS: dict[str, tuple[dict[ProviderApi, int], str, str | None]] = {
    "rate_limit": (
        {"chat_completions": 429, "responses": 429, "messages": 429},
        "Rate limit reached for requests (scripted). Please try again later.",
        "rate_limit_exceeded",
    ),
    "server_error": (
        {"chat_completions": 500, "responses": 500, "messages": 500},
        "The server had an error while processing your request (scripted).",
        None,
    ),
    "overloaded": (
        {"chat_completions": 503, "responses": 503, "messages": 529},
        "Overloaded (scripted).",
        None,
    ),
}
_CONTEXT_LENGTH_MESSAGES: dict[ProviderApi, tuple[str, str | None]] = {
    "chat_completions": (
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 "
        "tokens. Please reduce the length of the messages.",
        "context_length_exceeded",
    ),
    "responses": (
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "context_length_exceeded",
    ),
    "messages": ("prompt is too long: 210000 tokens > 200000 maximum", None),
}


@dataclass(frozen=True)
class ProviderRequest:
    """One HTTP request the scripted provider server got.

    Attributes:
        session_id: The session of its ``RunModel`` call.
        turn_id: The turn.
        attempt: The ``RunModel`` attempt.
        step_execution_id: The ``RunModel`` execution.
        api: ``"chat_completions"``, ``"responses"`` or ``"messages"``.
        stream: Whether the client asked for a stream.
        request: Its number among its attempt's requests, from 1.
        fault: The `ProviderFault` kind it was answered with, or ``None``.
        at: When it arrived (seconds since the epoch).
        model: The model name the client sent.
    """

    session_id: str
    turn_id: str
    attempt: int
    step_execution_id: str
    api: str
    stream: bool
    request: int
    fault: str | None
    at: float
    model: str


def read_provider_requests(state_dir: Path | str, session_id: str | None = None) -> list[ProviderRequest]:
    """Return the requests the scripted provider servers of a stack's Workers got, in arrival order.

    Args:
        state_dir: The stack's state directory (``DEX_AGENTS_TEST_STATE_DIR``).
        session_id: Only this session's requests, when given.
    """
    path = Path(state_dir) / PROVIDER_REQUEST_LOG
    if not path.exists():
        return []
    requests = [
        ProviderRequest(**json.loads(line))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return [request for request in requests if session_id is None or request.session_id == session_id]


class _CutConnection(Exception):
    """Raised mid-body so uvicorn closes the connection without finishing the response."""


class _QuietCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _CutConnection))


class ScriptedProviderServer:
    """A scripted model provider on loopback: see the module docstring and `scripted_provider_server`.

    With ``replies``, it also answers requests that carry no ``RunModel`` call (a demo's Worker, an
    application run as users run it): each gets the first reply its conversation does not hold yet (a reply
    with tool calls is held when the conversation has calls with all its IDs, one without when it has its
    text), so a rerun of a model call gets the same reply. There a fault's ``attempts`` are ignored and
    ``requests`` counts every request for the reply; gates, failing attempts and the invocation log apply
    only to ``RunModel`` calls.

    Args:
        store: The script store; by default the one ``DEX_AGENTS_TEST_STATE_DIR`` names, opened per request.
        replies: The replies of requests without a ``RunModel`` call, in conversation order.
    """

    def __init__(
        self, store: ScriptStore | None = None, *, replies: Sequence[ScriptedResponse] | None = None
    ) -> None:
        self._store = store
        self._replies = None if replies is None else tuple(replies)
        self._uvicorn: Any = None
        self.requests: list[ProviderRequest] = []
        """Every request this server got, in arrival order."""
        self._scopes: dict[str, ModelCallScope] = {}
        self._tokens = itertools.count(1)
        self._counts: dict[tuple[str, str, str, int], int] = {}
        self._lock = threading.Lock()
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Small server-sent events go out at once, not after a delayed ACK (40 ms a call otherwise).
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._port: int = self._socket.getsockname()[1]
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The loopback port it listens on."""
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def openai_base_url(self) -> str:
        """The base URL of OpenAI clients (``.../v1``)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The base URL of Anthropic clients (they add ``/v1/messages``)."""
        return self.url

    def start(self) -> ScriptedProviderServer:
        """Start serving on a daemon thread (once); returns the server."""
        with self._lock:
            if self._thread is not None:
                return self
            import uvicorn  # noqa: PLC0415 - the web stack only where a provider is scripted

            logging.getLogger("uvicorn.error").addFilter(_QuietCuts())
            config = uvicorn.Config(
                self._app(), log_config=None, access_log=False, lifespan="off", timeout_keep_alive=60
            )
            server = uvicorn.Server(config)
            self._uvicorn = server
            self._thread = threading.Thread(
                target=server.run, kwargs={"sockets": [self._socket]}, name="scripted-provider", daemon=True
            )
            self._thread.start()
            deadline = time.monotonic() + 30
            while not server.started:
                if time.monotonic() > deadline or not self._thread.is_alive():
                    raise RuntimeError("the scripted provider server did not start within 30 s")
                time.sleep(0.01)
        return self

    def close(self) -> None:
        """Stop serving and wait for the server's thread (a no-op before `start`)."""
        if self._uvicorn is not None and self._thread is not None:
            self._uvicorn.should_exit = True
            self._thread.join(timeout=10)

    def __enter__(self) -> ScriptedProviderServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def register(self, scope: ModelCallScope) -> str:
        """Register a ``RunModel`` call and return the token its requests carry."""
        token = f"call-{next(self._tokens)}"
        with self._lock:
            self._scopes[token] = scope
            while len(self._scopes) > _MAX_SCOPES:
                del self._scopes[next(iter(self._scopes))]
        return token

    def base_url_for_current_call(self, api: Literal["openai", "anthropic"] = "anthropic") -> str:
        """A base URL that routes to the current ``RunModel`` call, for a client in another process.

        Args:
            api: Which clients' base URL: ``"openai"`` ends in ``/v1``, ``"anthropic"`` does not.

        Raises:
            RuntimeError: Outside a ``RunModel`` call scope (`with_model_call_scope`).
        """
        scope = current_model_call()
        if scope is None:
            raise RuntimeError("base_url_for_current_call() runs inside a RunModel call scope only")
        prefix = f"{self.url}{_SCOPE_PREFIX.format(token=self.register(scope))}"
        return f"{prefix}/v1" if api == "openai" else prefix

    def tag(self, host: str | None, port: int | None, set_header: Callable[[str, str], object]) -> None:
        """Add the call header to a request for this server made inside a ``RunModel`` call scope."""
        scope = current_model_call()
        if scope is not None and host in ("127.0.0.1", "localhost") and port == self._port:
            set_header(CALL_HEADER, self.register(scope))

    def _app(self) -> Any:
        from starlette.applications import Starlette  # noqa: PLC0415
        from starlette.routing import Route  # noqa: PLC0415

        paths: Sequence[tuple[str, ProviderApi]] = (
            ("/v1/chat/completions", "chat_completions"),
            ("/v1/responses", "responses"),
            ("/v1/messages", "messages"),
        )
        routes = [
            Route(f"{prefix}{path}", self._endpoint(api), methods=["POST"])
            for path, api in paths
            for prefix in ("", _SCOPE_PREFIX)
        ]
        return Starlette(routes=routes)

    def _endpoint(self, api: ProviderApi) -> Callable[[Any], Any]:
        async def endpoint(request: Any) -> Any:
            return await self._answer(api, request)

        return endpoint

    async def _answer(self, api: ProviderApi, request: Any) -> Any:
        from starlette.responses import JSONResponse  # noqa: PLC0415

        token = request.path_params.get("token") or request.headers.get(CALL_HEADER)
        with self._lock:
            scope = self._scopes.get(token or "")
        body = await request.body()
        read = read_request(api, cast(dict[str, Any], json.loads(body)))
        if scope is None and self._replies is not None:
            return await self._answer_without_call(api, read, len(body))
        if scope is None:
            message = (
                f"no RunModel call is registered for this request ({CALL_HEADER}: {token!r}); make model "
                "calls inside with_model_call_scope() with an httpx or httpx2 client"
            )
            return JSONResponse(error_answer(api, 400, message), status_code=400)
        scope = replace(
            scope, recorded_tool_call_ids=scope.recorded_tool_call_ids | read.answered_tool_call_ids
        )
        store = self._store or ScriptStore.from_environment()
        try:
            planned = self._planned(store, scope)
        except LookupError as error:
            return JSONResponse(error_answer(api, 500, str(error)), status_code=500)
        number = self._count(scope)
        fault = next(
            (item for item in planned.provider_faults if item.applies_to(scope.attempt, number, len(body))),
            None,
        )
        self._log(store, scope, api, read, number, fault)
        refused = _refusal(api, fault)
        if refused is not None:
            return refused
        if fault is not None and fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.delay_seconds)
        with model_call_scope(scope):
            try:
                response = await scripted_model_response(read.texts, store, offered_tools=read.offered_tools)
            except (RuntimeError, ValueError, TypeError, ConnectionError) as error:
                return JSONResponse(error_answer(api, 500, str(error)), status_code=500)
        if response.turn_error is not None:
            return JSONResponse(error_answer(api, 400, response.turn_error), status_code=400)
        if scope.is_summary and not response.text:
            response = replace(response, text=DEFAULT_SCRIPTED_SUMMARY)  # a provider never sums up in nothing
        return _reply(api, read, _provider_reply(response, fault), fault)

    async def _answer_without_call(self, api: ProviderApi, read: ReadRequest, request_bytes: int) -> Any:
        from starlette.responses import JSONResponse  # noqa: PLC0415

        replies = self._replies or ()
        position = _reply_position(read, replies)
        if position >= len(replies):
            message = f"the scripted provider has no reply left: the conversation holds all {len(replies)}"
            return JSONResponse(error_answer(api, 500, message), status_code=500)
        planned = replies[position]
        number = self._count(ModelCallScope("", "", 1, f"reply-{position}"))
        fault = next(
            (item for item in planned.provider_faults if item.applies_to(1, number, request_bytes)), None
        )
        self._remember(
            ProviderRequest("", "", 1, "", api, read.stream, number, _kind(fault), time.time(), read.model)
        )
        refused = _refusal(api, fault)
        if refused is not None:
            return refused
        if fault is not None and fault.kind == "slow_first_byte":
            await asyncio.sleep(fault.delay_seconds)
        if planned.turn_error is not None:
            return JSONResponse(error_answer(api, 400, planned.turn_error), status_code=400)
        return _reply(api, read, _provider_reply(planned, fault), fault)

    def _remember(self, entry: ProviderRequest) -> None:
        with self._lock:
            self.requests.append(entry)

    @staticmethod
    def _planned(store: ScriptStore, scope: ModelCallScope) -> ScriptedResponse:
        if scope.is_summary:
            return store.summary_response(scope.session_id, scope.turn_id)
        return store.response_for(scope.session_id, scope.turn_id, scope.recorded_tool_call_ids)

    def _count(self, scope: ModelCallScope) -> int:
        key = (scope.session_id, scope.turn_id, scope.step_execution_id, scope.attempt)
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            return self._counts[key]

    def _log(
        self,
        store: ScriptStore,
        scope: ModelCallScope,
        api: ProviderApi,
        read: ReadRequest,
        number: int,
        fault: ProviderFault | None,
    ) -> None:
        entry = ProviderRequest(
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            attempt=scope.attempt,
            step_execution_id=scope.step_execution_id,
            api=api,
            stream=read.stream,
            request=number,
            fault=_kind(fault),
            at=time.time(),
            model=read.model,
        )
        self._remember(entry)
        line = json.dumps(asdict(entry)) + "\n"
        with self._lock, (store.state_dir / PROVIDER_REQUEST_LOG).open("a", encoding="utf-8") as log:
            log.write(line)


def _kind(fault: ProviderFault | None) -> str | None:
    return None if fault is None else fault.kind


def _reply_position(read: ReadRequest, replies: Sequence[ScriptedResponse]) -> int:
    """How many of ``replies`` the request's conversation holds, in order."""
    called = {
        text.rsplit("[", 1)[-1].rstrip("]") for text in read.texts if text.startswith("assistant calls ")
    }
    said = {text.removeprefix("assistant: ").strip() for text in read.texts if text.startswith("assistant: ")}
    position = 0
    for reply in replies:
        if reply.tool_calls:
            held = all(call.tool_call_id in called for call in reply.tool_calls)
        else:
            held = reply.text.strip() in said
        if not held:
            break
        position += 1
    return position


def _refusal(api: ProviderApi, fault: ProviderFault | None) -> Any:
    from starlette.responses import JSONResponse  # noqa: PLC0415

    if fault is None:
        return None
    if fault.kind == "context_length":
        message, code = _CONTEXT_LENGTH_MESSAGES[api]
        return JSONResponse(error_answer(api, 400, message, code), status_code=400)
    if fault.kind not in _STATUS_FAULTS:
        return None
    statuses, message, code = _STATUS_FAULTS[fault.kind]
    status = statuses[api]
    headers = {}
    if fault.kind != "server_error":
        seconds = fault.retry_after_seconds
        headers = {"retry-after": f"{seconds:g}", "retry-after-ms": str(int(seconds * 1000))}
    return JSONResponse(error_answer(api, status, message, code), status_code=status, headers=headers)


def _malformed(arguments: str) -> str:
    """The arguments cut before their last character: JSON a model stopped writing halfway."""
    return arguments[:-1] if len(arguments) > 1 else "{"


def _provider_reply(response: ScriptedResponse, fault: ProviderFault | None) -> ProviderReply:
    malformed = fault is not None and fault.kind == "malformed_arguments"
    return ProviderReply(
        text=response.text,
        tool_calls=[
            ReplyToolCall(
                call.tool_call_id,
                call.tool_name,
                _malformed(call.arguments_json) if malformed else call.arguments_json,
            )
            for call in response.tool_calls
        ],
        input_tokens=response.input_tokens,
        output_tokens=response.output_tokens,
        finished=fault is None or fault.kind != "unfinished_stream",
    )


def _reply(api: ProviderApi, read: ReadRequest, reply: ProviderReply, fault: ProviderFault | None) -> Any:
    from starlette.responses import JSONResponse, StreamingResponse  # noqa: PLC0415

    cut = fault is not None and fault.kind == "cut_stream"
    if not read.stream:
        body = reply_body(api, reply, read.model)
        if not cut:
            return JSONResponse(body)
        data = json.dumps(body).encode()
        headers = {"content-length": str(len(data))}
        return StreamingResponse(
            _cut_body([data[: len(data) // 2]]), media_type="application/json", headers=headers
        )
    events = [
        event.encode() for event in reply_events(api, reply, read.model, include_usage=read.include_usage)
    ]
    if cut:
        return StreamingResponse(
            _cut_body(events[: max(1, len(events) // 2)]), media_type="text/event-stream"
        )
    return StreamingResponse(_body(events), media_type="text/event-stream")


async def _body(chunks: Sequence[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def _cut_body(chunks: Sequence[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    # Let the part reach the client before the connection drops, as a provider's cut stream does.
    await asyncio.sleep(0.05)
    raise _CutConnection("the scripted provider cut the connection mid-answer")


_server: ScriptedProviderServer | None = None
_server_lock = threading.Lock()
_hooked = False


def scripted_provider_server(store: ScriptStore | None = None) -> ScriptedProviderServer:
    """Return this process's scripted provider server, started on first use.

    The first call also hooks ``httpx`` and ``httpx2`` clients (``send`` of ``Client`` and ``AsyncClient``)
    so that a request to the server inside a ``RunModel`` call scope names its call. Build the framework's
    provider client with the server's ``openai_base_url`` or ``anthropic_base_url`` and any key.

    Args:
        store: The script store of the first call's server; by default ``DEX_AGENTS_TEST_STATE_DIR``'s.

    Returns:
        The running server.
    """
    global _server  # noqa: PLW0603 - one server per process, as one provider
    with _server_lock:
        if _server is None:
            _server = ScriptedProviderServer(store)
            _hook_http_clients()
    return _server.start()


def _hook_http_clients() -> None:
    global _hooked  # noqa: PLW0603 - patched once per process
    if _hooked:
        return
    _hooked = True
    for name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        _hook_async_client(module.AsyncClient)
        _hook_client(module.Client)


def _tag(request: Any) -> None:
    server = _server
    if server is not None:
        server.tag(request.url.host, request.url.port, request.headers.__setitem__)


def _hook_async_client(client_type: Any) -> None:
    original = client_type.send

    async def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        _tag(request)
        return await original(self, request, *args, **kwargs)

    client_type.send = send


def _hook_client(client_type: Any) -> None:
    original = client_type.send

    def send(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        _tag(request)
        return original(self, request, *args, **kwargs)

    client_type.send = send
