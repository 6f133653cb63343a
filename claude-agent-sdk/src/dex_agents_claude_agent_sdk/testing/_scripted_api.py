"""`ScriptedClaudeApi`: the scripted Messages API in the Claude harness's model slot, in both modes."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions
from dex_agents import AgentTurnContext
from dex_agents.testing import (
    ModelCallScope,
    ProviderFault,
    ProviderRequest,
    ScriptedResponse,
    ScriptStore,
    current_model_call,
    model_call_scope,
    scripted_model_response,
)

from dex_agents_claude_agent_sdk._messages import TOOL_NAME_PREFIX
from dex_agents_claude_agent_sdk._runner import OptionsFactory
from dex_agents_claude_agent_sdk.testing._api_server import (
    SYSTEM_REMINDER,
    AnthropicApiServer,
    ApiReply,
    ApiRequest,
    ApiToolUse,
    Responder,
    content_blocks,
    result_text,
)

__all__ = ["OFFLINE_ENV", "ScriptedClaudeApi"]

_SCOPE_PREFIX = "/scope/"
# Where the kit's `read_provider_requests` reads the requests of a stack's scripted providers.
_PROVIDER_REQUEST_LOG = "provider_requests.jsonl"
# Faults answered with an API error instead of the scripted response.
_REFUSING_FAULTS = frozenset({"rate_limit", "server_error", "overloaded", "context_length"})
# Scopes of RunModel calls kept for their requests; older ones are dropped (a call's requests come soon).
_MAX_SCOPES = 10_000

OFFLINE_ENV: Mapping[str, str] = {
    "ANTHROPIC_API_KEY": "sk-ant-scripted-offline",
    # A scripted error is an HTTP error; without this the CLI retries it itself, with back-off.
    "CLAUDE_CODE_MAX_RETRIES": "0",
}
"""What `ScriptedClaudeApi.options` adds to the options' environment, unless the options set it."""


def api_reply(reply: ApiReply | ScriptedResponse, position: int) -> ApiReply:
    """Return ``reply`` as an `ApiReply`; a `ScriptedResponse` keeps its text, tool calls and usage.

    A tool call without an ID gets ``toolu_<position>_<n>``, the same every time the reply is served, so a
    rerun of its model call matches the call it made before. A scripted `turn_error` is a 400; its faults,
    gates and failing attempts count in the script-store mode only.
    """
    if isinstance(reply, ApiReply):
        return reply
    if reply.turn_error is not None:
        return ApiReply(error_status=400, error_message=reply.turn_error)
    uses = [
        ApiToolUse(
            getattr(call, "tool_call_id", None) or f"toolu_{position:03d}_{number}",
            call.tool_name,
            dict(call.arguments),
        )
        for number, call in enumerate(reply.tool_calls, start=1)
    ]
    return ApiReply(
        text=reply.text, tool_uses=uses, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens
    )


def _reply_position(request: ApiRequest, replies: Sequence[ApiReply]) -> int:
    """How many of ``replies`` the request's conversation already holds, in order.

    Counting what the request holds, rather than the calls served, gives a rerun of a model call (a
    `RunModel` retry, a replacement Worker) the same reply, and skips the answers the CLI writes itself.
    """
    position = 0
    for message in request.messages:
        is_reply = message.get("role") == "assistant" and position < len(replies)
        if is_reply and _holds(message, replies[position]):
            position += 1
    return position


def _holds(message: Mapping[str, Any], reply: ApiReply) -> bool:
    blocks = content_blocks(message)
    use_ids = [str(block.get("id")) for block in blocks if block.get("type") == "tool_use"]
    if reply.tool_uses:
        return use_ids == [use.tool_use_id for use in reply.tool_uses]
    text = "".join(str(block.get("text", "")) for block in blocks if block.get("type") == "text")
    return not use_ids and text.strip() == reply.text.strip()


def _render(request: ApiRequest) -> tuple[list[str], set[str]]:
    """The texts a request shows the model, and the IDs of the tool calls it holds results for.

    Each text is `<role>: <text>`, `assistant calls <tool> <arguments> [<id>]` or
    `tool <tool> [<id>] ok|error: <result>`, in request order, without the CLI's system reminders.
    """
    texts: list[str] = []
    answered: set[str] = set()
    names: dict[str, str] = {}
    for message in request.messages:
        for block in content_blocks(message):
            kind = block.get("type")
            if kind == "text":
                text = str(block.get("text", ""))
                if not text.lstrip().startswith(SYSTEM_REMINDER):
                    texts.append(f"{message.get('role')}: {text}")
            elif kind == "tool_use":
                name = str(block.get("name", "")).removeprefix(TOOL_NAME_PREFIX)
                names[str(block.get("id"))] = name
                arguments = json.dumps(block.get("input", {}), sort_keys=True, separators=(",", ":"))
                texts.append(f"assistant calls {name} {arguments} [{block.get('id')}]")
            elif kind == "tool_result":
                call_id = str(block.get("tool_use_id"))
                answered.add(call_id)
                outcome = "error" if block.get("is_error") else "ok"
                texts.append(f"tool {names.get(call_id, '?')} [{call_id}] {outcome}: {result_text(block)}")
    return texts, answered


class ScriptedClaudeApi:
    """A scripted Messages API for the Claude harness; see the package docstring.

    Each event loop (a Worker process, a test) gets its own server, started by the first run that needs
    it and kept until `aclose`. The standalone modes need nothing but this package; the script-store mode
    reads the scripts that `dex_agents.testing`'s stack writes.

    Args:
        replies: The replies of the model calls in order (`ApiReply`, or the core kit's `ScriptedResponse`,
            whose `ScriptedToolCall`s may leave their ID out), or a responder that returns the reply to each
            request. A list's reply for a request is the one after the last reply the request's
            conversation already holds (matched by its tool use IDs, or by its text), so a rerun of a
            model call gets the same reply and a replacement Worker goes on where the conversation is.
            An error reply is therefore answered every time the conversation reaches it. A request
            after the last reply is answered 500, naming the problem.
        on_unexpected: Called with `"<method> <target>"` for every request that is not a model call.
    """

    def __init__(
        self,
        replies: Sequence[ApiReply | ScriptedResponse] | Responder,
        *,
        on_unexpected: Callable[[str], object] | None = None,
    ) -> None:
        self._responder: Responder = replies if callable(replies) else self._next_reply
        self._replies: tuple[ApiReply, ...] = (
            () if callable(replies) else tuple(api_reply(reply, index) for index, reply in enumerate(replies))
        )
        self._on_unexpected = on_unexpected
        self._servers: dict[asyncio.AbstractEventLoop, AnthropicApiServer] = {}
        self._stopped: list[AnthropicApiServer] = []
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._store: ScriptStore | None = None
        self._uses_store = False
        self._scopes: dict[str, ModelCallScope] = {}
        self._tokens = itertools.count(1)
        self._request_counts: dict[tuple[str, str, str, int], int] = {}

    @classmethod
    def from_script_store(
        cls, store: ScriptStore | None = None, *, on_unexpected: Callable[[str], object] | None = None
    ) -> ScriptedClaudeApi:
        """Answer from `dex_agents.testing`'s script store, as every adapter's scripted model does.

        Each `RunModel` call's requests reach the API under a path of their own, so each answer comes
        from the script of that call's session and turn (`scripted_model_response`, with the request
        rendered as texts: `user: ...`, `assistant calls <tool> <arguments> [<id>]`,
        `tool <tool> [<id>] ok: <result>`), with the tools it offers under the names a script uses (the
        runner's without the `mcp__dex__` prefix). The position in the turn's script counts the tool
        calls that have records and those whose results the request holds (reads run inline). A scripted
        `turn_error` is answered 400, which ends the turn; a failing attempt is answered 500. Wrap the
        runner with `dex_agents.testing.with_model_call_scope` (the matrix harness does).

        Args:
            store: The script store; by default the one `DEX_AGENTS_TEST_STATE_DIR` names, opened when a
                call needs it.
            on_unexpected: Called with `"<method> <target>"` for every request that is not a model call.

        Returns:
            The API.
        """
        api = cls((), on_unexpected=on_unexpected)
        api._responder = api._script_store_reply
        api._store = store
        api._uses_store = True
        return api

    @property
    def requests(self) -> list[ApiRequest]:
        """Every model call request this process's servers received, server by server."""
        servers = [*self._stopped, *self._servers.values()]
        return [request for server in servers for request in server.requests]

    def options(self, base: ClaudeAgentOptions | OptionsFactory | None = None) -> OptionsFactory:
        """Return the runner's options factory: ``base`` with the CLI pointed at this API.

        Args:
            base: The agent's options (or a factory of them); by default `ClaudeAgentOptions` that load
                no settings files. They are copied, never changed.

        Returns:
            An options factory for `ClaudeAgentRunner`. It sets `ANTHROPIC_BASE_URL`, and the
            `OFFLINE_ENV` variables the options do not set.
        """

        async def factory(turn: AgentTurnContext) -> ClaudeAgentOptions:
            if base is None:
                options = ClaudeAgentOptions(setting_sources=[])
            elif isinstance(base, ClaudeAgentOptions):
                options = base
            else:
                options = await base(turn)
            server = await self._server()
            env = {**OFFLINE_ENV, **options.env, "ANTHROPIC_BASE_URL": server.base_url(self._route())}
            return dataclasses.replace(options, env=env)

        return factory

    async def aclose(self) -> None:
        """Stop this event loop's server."""
        server = self._servers.pop(asyncio.get_running_loop(), None)
        if server is not None:
            self._stopped.append(server)
            await server.close()

    async def _server(self) -> AnthropicApiServer:
        loop = asyncio.get_running_loop()
        for closed in [other for other in self._servers if other.is_closed()]:
            self._stopped.append(self._servers.pop(closed))
            self._locks.pop(closed, None)
        async with self._locks.setdefault(loop, asyncio.Lock()):
            if loop not in self._servers:
                server = AnthropicApiServer(self._responder, on_unexpected=self._on_unexpected)
                await server.start()
                self._servers[loop] = server
        return self._servers[loop]

    def _route(self) -> str:
        """The path prefix of this run's requests: the `RunModel` call's own, in script-store mode."""
        if not self._uses_store:
            return ""
        scope = current_model_call()
        if scope is None:
            raise RuntimeError(
                "ScriptedClaudeApi.from_script_store() answers RunModel calls only: wrap the runner with "
                "dex_agents.testing.with_model_call_scope()"
            )
        token = f"call-{next(self._tokens)}"
        self._scopes[token] = scope
        while len(self._scopes) > _MAX_SCOPES:
            del self._scopes[next(iter(self._scopes))]
        return f"{_SCOPE_PREFIX}{token}"

    async def _next_reply(self, request: ApiRequest) -> ApiReply:
        position = _reply_position(request, self._replies)
        if position >= len(self._replies):
            raise LookupError(
                f"the scripted API has no reply for this model call: its conversation already holds all "
                f"{len(self._replies)} scripted replies"
            )
        return self._replies[position]

    async def _script_store_reply(self, request: ApiRequest) -> ApiReply:
        scope = self._scopes.get(request.prefix.removeprefix(_SCOPE_PREFIX))
        if scope is None:
            raise LookupError(f"no RunModel call is registered under {request.prefix!r}")
        texts, answered = _render(request)
        recorded = scope.recorded_tool_call_ids | answered
        call_scope = dataclasses.replace(scope, recorded_tool_call_ids=recorded)
        store = self._store or ScriptStore.from_environment()
        fault = self._provider_fault(store, call_scope, request)
        if fault is not None and fault.kind in _REFUSING_FAULTS:
            # Refused before the model "ran": the call is not logged as a model call, as with a provider.
            return ApiReply(fault=fault)
        offered = [name.removeprefix(TOOL_NAME_PREFIX) for name in request.tool_names]
        with model_call_scope(call_scope):
            response = await scripted_model_response(texts, store, offered_tools=offered)
        if response.turn_error is not None:
            # A request the API refuses, which a retry would only repeat.
            return ApiReply(error_status=400, error_message=response.turn_error)
        return dataclasses.replace(api_reply(response, len(request.messages)), fault=fault)

    def _provider_fault(
        self, store: ScriptStore, scope: ModelCallScope, request: ApiRequest
    ) -> ProviderFault | None:
        """Return the scripted fault of this request of its `RunModel` attempt, if any.

        The request is logged as the kit's scripted provider server logs its own (`read_provider_requests`).
        """
        key = (scope.session_id, scope.turn_id, scope.step_execution_id, scope.attempt)
        number = self._request_counts[key] = self._request_counts.get(key, 0) + 1
        try:
            planned = store.response_for(scope.session_id, scope.turn_id, scope.recorded_tool_call_ids)
        except LookupError:
            planned = None  # scripted_model_response says so, in the answer's 500
        faults = () if planned is None else planned.provider_faults
        fault = next((item for item in faults if item.applies_to(scope.attempt, number)), None)
        entry = ProviderRequest(
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            attempt=scope.attempt,
            step_execution_id=scope.step_execution_id,
            api="messages",
            stream=bool(request.body.get("stream")),
            request=number,
            fault=None if fault is None else fault.kind,
            at=time.time(),
            model=str(request.body.get("model", "")),
        )
        with (store.state_dir / _PROVIDER_REQUEST_LOG).open("a", encoding="utf-8") as log:
            log.write(json.dumps(dataclasses.asdict(entry)) + "\n")
        return fault
