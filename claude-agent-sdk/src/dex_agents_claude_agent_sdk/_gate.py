"""The gate of one Claude Code CLI run: the `PreToolUse` hook's decisions, the tool shims, what it streams.

The CLI calls the hook for every tool call the model asks for, while the response may still be streaming.
The hook decides about the runner's own tools only (a tool the runner does not own gets no decision, so
Claude Code's permission system decides about it, as it would without the runner):

- a call whose policy is `read` (and needs no approval) runs inline, in the CLI, through an in-process MCP
  shim that calls the user's tool, when every call of the runner's in its response is such a read;
- otherwise the response's last tool use is deferred: the CLI keeps only one deferred call per run, and
  resumes correctly only when it is the response's last tool use, so the hook waits for the whole response
  before it decides about any call;
- every other non-read call of that response is refused with `REFUSED_TOOL_CALL_MESSAGE`, which asks the
  model to call it again. Reads before the deferred call run inline.

A model response counts only when the API said it finished: a streamed response whose `message_stop`
came without a `stop_reason`, one whose stream broke off (the CLI then starts another response, or asks
again without streaming) or a run that ends with its last response open is unfinished. `observe` raises
`UnfinishedModelResponse` at once, the hook decides nothing for such a response (it refuses its calls), and
the runner kills the CLI, so neither a partial answer nor a call of a partial response is taken as final;
`RunModel` retries the attempt.

A resumed run lets the deferred call through, and the shim that the CLI's `tools/call` names by that call's
tool use ID answers with the recorded result instead of running the tool.

With `permission_requests_as_approvals`, the run's `can_use_tool` is the runner's: a permission request
for one of Claude Code's own tools goes to the user's callback first, and one it leaves undecided (`None`)
becomes the run's deferred call when it is its response's last tool use (otherwise it is refused with
`REFUSED_TOOL_CALL_MESSAGE`, as the runner's own calls are). No hook can defer a call after the permission
check, so the runner refuses the request with `interrupt`, which ends the run at once, and rewrites the
transcript as a hook's deferral (`deferred_permission_entries`). The resumed run asks for the permission
again; the answer then follows the call's record: an approved call runs in the CLI, a rejected one gets the
rejection text as its result.

The session's built-ins are among the runner's tools and are always deferred: the session carries them out.
An inline read runs inside the model Step, where the user cannot be asked and no task can be handed over,
so a read that calls `ask_user_input` or `start_tool_task` gets `INLINE_TOOL_REQUEST_MESSAGE` as its error
result (and a warning is logged) instead of the core's error for a call outside a tool Step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from claude_agent_sdk import (
    AssistantMessage,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ResultMessage,
    SdkMcpTool,
    StreamEvent,
    TextBlock,
    ToolPermissionContext,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk.types import HookContext, HookInput, HookJSONOutput, Message
from dex_agents import UnfinishedModelResponse
from dex_agents.events import AgentEventWriter
from dex_agents.runner import AgentTurnContext, ModelCallMetadata, ToolPolicy
from dex_agents.values import ToolEffect

from dex_agents_claude_agent_sdk._call_metadata import RunRequest, last_call_metadata
from dex_agents_claude_agent_sdk._messages import TOOL_NAME_PREFIX
from dex_agents_claude_agent_sdk._shim_server import current_tool_use_id
from dex_agents_claude_agent_sdk._state import PendingToolUse
from dex_agents_claude_agent_sdk._turn_tools import RunTools

__all__ = [
    "INLINE_TOOL_REQUEST_MESSAGE",
    "PERMISSION_PENDING_MESSAGE",
    "REFUSED_TOOL_CALL_MESSAGE",
    "RESPONSE_WAIT_SECONDS",
    "UNFINISHED_RESPONSE_MESSAGE",
    "HarnessRun",
    "PermissionCallback",
    "ResumedCall",
]

REFUSED_TOOL_CALL_MESSAGE = (
    "Not run: this call was not executed, because only one tool call of a response can wait for its "
    "result, and this one is not it. Call {tool} again, with the same arguments, after you have read "
    "the other results."
)
"""What the model reads for a refused call ({tool}: the tool's name); see the module docstring."""

INLINE_TOOL_REQUEST_MESSAGE = (
    "{tool} could not finish: it needs the user's answer or a long-running task, which this deployment "
    "cannot give a tool that runs inline, inside the model call. Nothing after its request ran. Tell the "
    "user that {tool} is unavailable; calling it again fails the same way."
)
"""What the model reads when an inline read calls `ask_user_input` or `start_tool_task` ({tool}: its name)."""

UNFINISHED_RESPONSE_MESSAGE = (
    "Not run: the model response holding this call ended before the API said it was finished, so the "
    "call may be incomplete."
)
"""What the hook answers for a call of an unfinished response (the run fails right after; see above)."""

PERMISSION_PENDING_MESSAGE = "Waiting for the session's approval."
"""The refusal that ends a run at a permission request; the transcript never keeps it (see above)."""

PermissionCallback = Callable[
    [str, dict[str, Any], ToolPermissionContext], Awaitable[PermissionResult | None]
]
"""The user's `can_use_tool`, which may return `None` to leave a request to the session's approval."""

_logger = logging.getLogger("dex_agents_claude_agent_sdk")
# The core module whose functions refuse outside a tool Step (`ask_user_input`, `start_tool_task`).
_TOOL_REQUESTS_MODULE = "dex_agents._tools._requests"

# How long the hook waits for the rest of a response before it decides about a call; the runner raises the
# CLI's own hook timeout (60 s by default) above it, so a long response never fails the hook.
RESPONSE_WAIT_SECONDS = 600.0

# The model name of the assistant texts the CLI writes itself ("No response requested."), never streamed.
_SYNTHETIC_MODEL = "<synthetic>"

# A hook answer without a permission decision: the CLI's own permission system decides about the call.
_NO_DECISION = cast(HookJSONOutput, {})


@dataclass
class ResumedCall:
    """The deferred call a resumed run answers with its recorded result."""

    tool_use_id: str
    text: str
    is_error: bool
    delivered: bool = False
    """Whether a shim answered the call (the CLI named its tool use ID in `tools/call`), or, for a
    permission request, whether the CLI asked for its permission again or wrote its result."""
    is_permission_request: bool = False
    """A call of one of Claude Code's own tools that waited for the session's approval."""


@dataclass
class HarnessRun:
    """One CLI run: decides tool calls in the hook, runs shims, and collects what the CLI streams."""

    turn: AgentTurnContext
    tools: RunTools
    inline_read_tools: bool
    permission_callback: PermissionCallback | None = None
    """The user's `can_use_tool` when the session answers permission requests (see the module docstring)."""
    resumed: ResumedCall | None = None
    permission_request: PendingToolUse | None = None
    """The permission request this run stopped at, waiting for the session's approval."""
    deferrals: list[PendingToolUse] = field(default_factory=list[PendingToolUse])
    """Every call the hook deferred in this run, in order (more than one only if a wait gave up)."""
    items: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    model_message_ids: set[str] = field(default_factory=set[str])
    result: ResultMessage | None = None
    session_id: str | None = None
    streaming_tool_uses: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    """The tool uses (ID, CLI name) of the response that is streaming."""
    completed_tool_uses: dict[str, list[tuple[str, str]]] = field(
        default_factory=dict[str, list[tuple[str, str]]]
    )
    """For each tool use of a response that finished streaming, all of that response's tool uses."""
    response_completed: asyncio.Event = field(default_factory=asyncio.Event)
    response_model: str | None = None
    """The model that answered the run's last model call, as the API named it."""
    response_id: str | None = None
    """The API's ID of the run's last model response."""
    finish_reason: str | None = None
    """The API's stop reason of the run's last model response (`tool_use`, `end_turn`, ...)."""
    cache_creation_input_tokens: int | None = None
    """Input tokens the run's last model call wrote to the prompt cache, as its streamed usage says."""
    open_response_id: str | None = None
    """The streamed response that started (`message_start`) and has not stopped (`message_stop`)."""
    streamed_response_ids: set[str] = field(default_factory=set[str])
    """The IDs of every response the run streamed."""
    unfinished: str | None = None
    """Why a response of the run is unfinished (see the module docstring); `None` while all finished."""

    def policy(self, tool_name: str) -> ToolPolicy:
        return self.tools.policy(tool_name)

    def runs_inline(self, tool_name: str) -> bool:
        tool = self.tools.by_name.get(tool_name)
        if tool is None or tool.is_built_in or not self.inline_read_tools:
            return False
        return tool.policy.effect is ToolEffect.READ and not tool.policy.is_approval_required

    def model_call_metadata(self, request: RunRequest) -> ModelCallMetadata:
        """What the run's last model call reported, for the `chat` span (the run may have made several)."""
        return last_call_metadata(
            request,
            self.response_model,
            self.response_id,
            self.finish_reason,
            self.cache_creation_input_tokens,
        )

    async def pre_tool_use(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        del context
        data = cast(Mapping[str, Any], input_data)
        cli_name = str(data.get("tool_name", ""))
        call_id = tool_use_id or str(data.get("tool_use_id", ""))
        resumed = self.resumed
        if resumed is not None and call_id == resumed.tool_use_id:
            if resumed.is_permission_request:
                # "ask" sends the call to `can_use_tool` even where a rule would let it through, so a
                # rejected call never runs; its refusal there reaches the model without the prefix a
                # hook's reason gets.
                return _decision("ask")
            return _decision("allow")
        if not self.owns(cli_name):
            # A built-in the user enabled or a tool of another MCP server: not the runner's to allow. The
            # user's permission_mode, allowed and disallowed tools and can_use_tool decide, as without us.
            return _NO_DECISION
        # The CLI keeps only one deferred call per run, and resumes correctly only when that call is the
        # last tool use of its response; so the hook decides with the whole response in view.
        uses = await self.response_tool_uses(call_id) or [(call_id, cli_name)]
        if self.unfinished is not None:
            return _decision("deny", UNFINISHED_RESPONSE_MESSAGE)
        if not any(self.is_deferrable(name) for _, name in uses):
            return _decision("allow")
        last_id, last_name = uses[-1]
        if call_id == last_id and self.owns(last_name):
            tool_input = cast(Mapping[str, Any], data.get("tool_input") or {})
            self.deferrals.append(
                PendingToolUse(call_id, cli_name.removeprefix(TOOL_NAME_PREFIX), dict(tool_input))
            )
            return _decision("defer")
        if self.is_deferrable(cli_name):
            return _decision(
                "deny", REFUSED_TOOL_CALL_MESSAGE.format(tool=cli_name.removeprefix(TOOL_NAME_PREFIX))
            )
        return _decision("allow")

    async def can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResult:
        """Answer a permission request of the CLI: the recorded approval, the user's callback, or a stop.

        The run's `can_use_tool` when the session answers permission requests (see the module docstring).
        """
        call_id = context.tool_use_id or ""
        resumed = self.resumed
        if resumed is not None and resumed.is_permission_request and call_id == resumed.tool_use_id:
            resumed.delivered = True
            if resumed.is_error:
                return PermissionResultDeny(message=resumed.text)
            return PermissionResultAllow()
        if self.permission_callback is not None:
            decided = await self.permission_callback(tool_name, tool_input, context)
            if decided is not None:
                return decided
        uses = await self.response_tool_uses(call_id) or [(call_id, tool_name)]
        if self.unfinished is not None:
            return PermissionResultDeny(message=UNFINISHED_RESPONSE_MESSAGE)
        if uses[-1][0] != call_id or self.deferrals or self.permission_request is not None:
            # The CLI keeps one deferred call per run, and it must be its response's last tool use.
            return PermissionResultDeny(message=REFUSED_TOOL_CALL_MESSAGE.format(tool=tool_name))
        self.permission_request = PendingToolUse(
            call_id, tool_name, dict(tool_input), is_permission_request=True
        )
        return PermissionResultDeny(message=PERMISSION_PENDING_MESSAGE, interrupt=True)

    def owns(self, cli_name: str) -> bool:
        """Whether a CLI tool name is one of the runner's tools."""
        return (
            cli_name.startswith(TOOL_NAME_PREFIX)
            and cli_name.removeprefix(TOOL_NAME_PREFIX) in self.tools.by_name
        )

    def is_deferrable(self, cli_name: str) -> bool:
        """Whether a call of this CLI tool name must run in its own Step (it is not an inline read)."""
        return self.owns(cli_name) and not self.runs_inline(cli_name.removeprefix(TOOL_NAME_PREFIX))

    async def response_tool_uses(self, call_id: str) -> list[tuple[str, str]]:
        """Wait until the model response holding ``call_id`` has streamed, and return its tool uses.

        Returns none when the wait gave up, or the response turned out unfinished (`unfinished` says so).
        """
        deadline = asyncio.get_running_loop().time() + RESPONSE_WAIT_SECONDS
        while call_id not in self.completed_tool_uses and self.unfinished is None:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                # Without the whole response, defer this call. If a later call of the response is
                # deferred too, the CLI keeps only the last one, and the run fails (see _agreed_deferral).
                return []
            changed = self.response_completed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)
        return self.completed_tool_uses.get(call_id, [])

    def shim(self, tool: SdkMcpTool[Any]) -> SdkMcpTool[Any]:
        """Return the tool the CLI sees: the user's schema and hints, with a handler the runner controls."""

        async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
            resumed = self.resumed
            if resumed is not None and current_tool_use_id() == resumed.tool_use_id:
                # The deferred call itself (by its tool use ID, never by its tool's name, which another
                # call of the run may share): answer with its recorded result.
                resumed.delivered = True
                return {"content": [{"type": "text", "text": resumed.text}], "is_error": resumed.is_error}
            if self.runs_inline(tool.name):
                return await _run_inline(tool, arguments)
            return {
                "content": [{"type": "text", "text": f"{tool.name} was not run: it runs in its own step."}],
                "is_error": True,
            }

        return SdkMcpTool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            handler=handler,
            annotations=tool.annotations,
        )

    def observe(self, message: Message, events: AgentEventWriter) -> None:
        """Collect one message of the CLI's stream, and forward its text to the turn's events.

        Raises:
            UnfinishedModelResponse: When a model response of the run turns out unfinished.
        """
        if isinstance(message, StreamEvent):
            if message.parent_tool_use_id is None:
                _forward_delta(message.event, events)
                self._track_response(message.event)
        elif isinstance(message, AssistantMessage):
            if message.parent_tool_use_id is not None or message.error is not None:
                return
            streamed = message.message_id in self.streamed_response_ids
            if message.message_id and not streamed and message.model != _SYNTHETIC_MODEL:
                # The CLI asks again without streaming only after a stream failed (a cut connection);
                # the events already carry that stream's partial text, so the attempt starts over instead.
                self._fail_unfinished(
                    "a model response's stream broke off, and the Claude Code CLI asked again without "
                    f"streaming (response {message.message_id})"
                )
            if message.message_id:
                self.model_message_ids.add(message.message_id)
            for block in message.content:
                if isinstance(block, TextBlock):
                    self.items.append({"type": "text", "text": block.text})
                elif isinstance(block, ToolUseBlock):
                    self.items.append(
                        {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                    )
        elif isinstance(message, UserMessage):
            if message.parent_tool_use_id is not None or isinstance(message.content, str):
                return
            for block in message.content:
                if isinstance(block, ToolResultBlock):
                    resumed = self.resumed
                    if resumed is not None and resumed.is_permission_request:
                        # Claude Code's permission system may let the approved call through by itself.
                        resumed.delivered = resumed.delivered or block.tool_use_id == resumed.tool_use_id
                    self.items.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": block.tool_use_id,
                            "content": block.content,
                            "is_error": bool(block.is_error),
                        }
                    )
        elif isinstance(message, ResultMessage):
            if self.open_response_id is not None and not message.is_error:
                self._fail_unfinished(
                    f"the stream of model response {self.open_response_id} ended without message_stop"
                )
            self.result = message
            self.session_id = message.session_id

    def _fail_unfinished(self, reason: str) -> None:
        """Record that a response is unfinished, wake the hook (which then refuses its calls), and raise."""
        self.unfinished = reason
        completed, self.response_completed = self.response_completed, asyncio.Event()
        completed.set()
        raise UnfinishedModelResponse(
            f"{reason}: the model's answer is incomplete, so this attempt does not count"
        )

    def _track_response(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            message = cast(Mapping[str, Any], event.get("message") or {})
            if self.open_response_id is not None:
                # The CLI goes on by itself after a stream that ended without message_stop (it asks the
                # model to resume); the partial answer stays in its conversation, so this run cannot count.
                self._fail_unfinished(
                    f"the stream of model response {self.open_response_id} ended without message_stop"
                )
            self.streaming_tool_uses = []
            self.response_id = _text_or_none(message.get("id"))
            self.open_response_id = self.response_id or "(unknown)"
            if self.response_id is not None:
                self.streamed_response_ids.add(self.response_id)
            self.response_model = _text_or_none(message.get("model")) or self.response_model
            self.finish_reason = None
            self.cache_creation_input_tokens = _cache_creation(message.get("usage"))
        elif kind == "message_delta":
            delta = cast(Mapping[str, Any], event.get("delta") or {})
            self.finish_reason = _text_or_none(delta.get("stop_reason")) or self.finish_reason
            # The API may repeat the usage in the closing delta, with the final counts.
            created = _cache_creation(event.get("usage"))
            self.cache_creation_input_tokens = (
                created if created is not None else self.cache_creation_input_tokens
            )
        elif kind == "content_block_start":
            block = cast(Mapping[str, Any], event.get("content_block") or {})
            if block.get("type") == "tool_use":
                self.streaming_tool_uses.append((str(block.get("id")), str(block.get("name"))))
        elif kind == "message_stop":
            stopped, self.open_response_id = self.open_response_id, None
            if self.finish_reason is None:
                self._fail_unfinished(f"model response {stopped} stopped without a stop_reason")
            uses = list(self.streaming_tool_uses)
            for use_id, _ in uses:
                self.completed_tool_uses[use_id] = uses
            completed, self.response_completed = self.response_completed, asyncio.Event()
            completed.set()


async def _run_inline(tool: SdkMcpTool[Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """Run a read's own handler inside the model Step, refusing clearly what only a tool Step can do."""
    try:
        return await tool.handler(arguments)
    except RuntimeError as error:
        if not _raised_by_tool_requests(error):
            raise
        _logger.warning(
            "tool %r asked for the user's input or started a task while it ran inline in the CLI, which only "
            "a tool Step can do; give it a ToolPolicy that runs it in its own Step (an effect other than "
            "read, or requires_approval=True), or build the runner with inline_read_tools=False: %s",
            tool.name,
            error,
        )
        text = INLINE_TOOL_REQUEST_MESSAGE.format(tool=tool.name)
        return {"content": [{"type": "text", "text": text}], "is_error": True}


def _raised_by_tool_requests(error: RuntimeError) -> bool:
    """Whether ``error`` is `ask_user_input`'s or `start_tool_task`'s refusal outside a tool Step."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and frame.tb_frame.f_globals.get("__name__") == _TOOL_REQUESTS_MODULE


def _cache_creation(usage: object) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    created = cast(Mapping[str, object], usage).get("cache_creation_input_tokens")
    return created if isinstance(created, int) and not isinstance(created, bool) else None


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _decision(decision: str, reason: str | None = None) -> HookJSONOutput:
    output: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": decision}
    if reason is not None:
        output["permissionDecisionReason"] = reason
    return cast(HookJSONOutput, {"hookSpecificOutput": output})


def _forward_delta(event: Mapping[str, Any], events: AgentEventWriter) -> None:
    if event.get("type") != "content_block_delta":
        return
    delta = cast(Mapping[str, Any], event.get("delta") or {})
    if delta.get("type") == "text_delta":
        events.write_text_delta(str(delta.get("text", "")))
    elif delta.get("type") == "thinking_delta":
        events.write_reasoning_delta(str(delta.get("thinking", "")))
