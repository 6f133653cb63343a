"""`ClaudeAgentRunner`: the session's runner contract around the Claude Code harness.

One `run_model_step` is one run of the Claude Code CLI (through `ClaudeSDKClient`). The CLI runs the turn:
it calls the model, and a `PreToolUse` hook decides about every tool call the model asks for:

- a call whose policy is `read` (and needs no approval) runs inline, in the CLI, through an in-process MCP
  shim that calls the user's tool. The CLI then makes its next model call in the same run, so a `RunModel`
  may make several model calls, and a retry of it runs those reads again (at least once);
- when a response holds a call that is not such a read, one call of the response is deferred: the CLI
  ends the run (`stop_reason` `tool_deferred`), and the runner returns it as the one `DeferredToolCall`,
  which the session runs in its own Step (approval, single attempt, outcome unknown). The CLI keeps only
  one deferred call per run and resumes correctly only when it is the response's last tool use, so the
  hook waits for the whole response and defers its last tool use (a read then runs in a `CallTool` Step);
- every other non-read call of that response is refused with a message that asks the model to call it
  again. Reads before the deferred call run inline. When the last tool use is not one of the runner's
  tools (a built-in), nothing is deferred and every non-read call of that response is refused;
- a call of a tool the runner does not own (a built-in, a tool of another MCP server) gets no decision:
  Claude Code's permission system decides about it, as it would without the runner.

The CLI's result names the call it deferred; the run counts only when that is the one call the hook
deferred. The next `run_model_step` resumes the CLI session without a prompt. The hook lets the deferred
call through, and the shim that the CLI's `tools/call` names by that call's tool use ID returns the
recorded result (or the rejection, failure or unknown outcome) instead of running the tool; a resumed run
that never answers the call fails. The CLI transcript never stays on a Worker's disk: it travels in the
run state and, once the turn ends, in the stored messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    DeferredToolUse,
    HookMatcher,
    ResultMessage,
    SdkMcpTool,
    StreamEvent,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Transport,
    UserMessage,
)
from claude_agent_sdk.types import HookContext, HookInput, HookJSONOutput, Message
from dex_agents.events import AgentEventWriter
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.values import AgentUsage, FrameworkMessage, ToolCallStatus, ToolEffect

from dex_agents_claude_agent_sdk._effects import framework_effect
from dex_agents_claude_agent_sdk._mcp import McpStdioServer
from dex_agents_claude_agent_sdk._messages import (
    MCP_SERVER_NAME,
    TOOL_NAME_PREFIX,
    build_user_framework_message,
    project_items,
    read_stored_conversation,
    tool_result_text,
)
from dex_agents_claude_agent_sdk._shim_server import create_shim_server, current_tool_use_id
from dex_agents_claude_agent_sdk._state import ClaudeRunState, PendingToolUse, TranscriptStore

__all__ = ["ISOLATION_ENV", "REFUSED_TOOL_CALL_MESSAGE", "ClaudeAgentRunner", "OptionsFactory"]

OptionsFactory = Callable[[AgentTurnContext], Awaitable[ClaudeAgentOptions]]
"""Builds the options of one run from the turn, for options that differ per session or per call."""

ISOLATION_ENV: Mapping[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
}
"""Environment every run starts from; `ClaudeAgentOptions.env` may override it."""

REFUSED_TOOL_CALL_MESSAGE = (
    "Not run: this call was not executed, because only one tool call of a response can wait for its "
    "result, and this one is not it. Call {tool} again, with the same arguments, after you have read "
    "the other results."
)
"""What the model reads for a refused call ({tool}: the tool's name); see the module docstring."""

# How long the hook waits for the rest of a response before it decides about a call; the CLI's own hook
# timeout (60 s by default) is raised above it, so a long response never fails the hook.
_RESPONSE_WAIT_SECONDS = 600.0

# An API error with one of these statuses repeats on every attempt, so it ends the turn instead.
_DETERMINISTIC_API_STATUSES = frozenset({400, 401, 403, 404, 413})

# A hook answer without a permission decision: the CLI's own permission system decides about the call.
_NO_DECISION = cast(HookJSONOutput, {})


@dataclass
class _ResumedCall:
    """The deferred call a resumed run answers with its recorded result."""

    tool_use_id: str
    text: str
    is_error: bool
    delivered: bool = False
    """Whether a shim answered the call (the CLI named its tool use ID in `tools/call`)."""


@dataclass
class _HarnessRun:
    """One CLI run: decides tool calls in the hook, runs shims, and collects what the CLI streams."""

    turn: AgentTurnContext
    tools: Mapping[str, SdkMcpTool[Any]]
    inline_read_tools: bool
    resumed: _ResumedCall | None = None
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

    def policy(self, tool_name: str) -> ToolPolicy:
        tool = self.tools.get(tool_name)
        effect = framework_effect(tool.annotations) if tool is not None else None
        return self.turn.resolve_tool_policy(tool_name, effect)

    def runs_inline(self, tool_name: str) -> bool:
        policy = self.policy(tool_name)
        return self.inline_read_tools and policy.effect is ToolEffect.READ and not policy.is_approval_required

    async def pre_tool_use(
        self, input_data: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        del context
        data = cast(Mapping[str, Any], input_data)
        cli_name = str(data.get("tool_name", ""))
        call_id = tool_use_id or str(data.get("tool_use_id", ""))
        if self.resumed is not None and call_id == self.resumed.tool_use_id:
            return _decision("allow")
        if not self.owns(cli_name):
            # A built-in the user enabled or a tool of another MCP server: not the runner's to allow. The
            # user's permission_mode, allowed and disallowed tools and can_use_tool decide, as without us.
            return _NO_DECISION
        # The CLI keeps only one deferred call per run, and resumes correctly only when that call is the
        # last tool use of its response; so the hook decides with the whole response in view.
        uses = await self.response_tool_uses(call_id) or [(call_id, cli_name)]
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

    def owns(self, cli_name: str) -> bool:
        """Whether a CLI tool name is one of the runner's tools."""
        return cli_name.startswith(TOOL_NAME_PREFIX) and cli_name.removeprefix(TOOL_NAME_PREFIX) in self.tools

    def is_deferrable(self, cli_name: str) -> bool:
        """Whether a call of this CLI tool name must run in its own Step (it is not an inline read)."""
        return self.owns(cli_name) and not self.runs_inline(cli_name.removeprefix(TOOL_NAME_PREFIX))

    async def response_tool_uses(self, call_id: str) -> list[tuple[str, str]]:
        """Wait until the model response holding ``call_id`` has streamed, and return its tool uses."""
        deadline = asyncio.get_running_loop().time() + _RESPONSE_WAIT_SECONDS
        while call_id not in self.completed_tool_uses:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                # Without the whole response, defer this call. If a later call of the response is
                # deferred too, the CLI keeps only the last one, and the run fails (see _agreed_deferral).
                return []
            changed = self.response_completed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), remaining)
        return self.completed_tool_uses[call_id]

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
                return await tool.handler(arguments)
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
        if isinstance(message, StreamEvent):
            if message.parent_tool_use_id is None:
                _forward_delta(message.event, events)
                self._track_response(message.event)
        elif isinstance(message, AssistantMessage):
            if message.parent_tool_use_id is not None or message.error is not None:
                return
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
                    self.items.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": block.tool_use_id,
                            "content": block.content,
                            "is_error": bool(block.is_error),
                        }
                    )
        elif isinstance(message, ResultMessage):
            self.result = message
            self.session_id = message.session_id

    def _track_response(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.streaming_tool_uses = []
        elif kind == "content_block_start":
            block = cast(Mapping[str, Any], event.get("content_block") or {})
            if block.get("type") == "tool_use":
                self.streaming_tool_uses.append((str(block.get("id")), str(block.get("name"))))
        elif kind == "message_stop":
            uses = list(self.streaming_tool_uses)
            for use_id, _ in uses:
                self.completed_tool_uses[use_id] = uses
            completed, self.response_completed = self.response_completed, asyncio.Event()
            completed.set()


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


class ClaudeAgentRunner:
    """Runs the Claude Code harness inside a durable Dex agent session.

    The CLI runs each turn. Reads run inline, in the CLI; every other tool call stops the CLI and runs in
    its own Step, with its approval and its effect's retry rules. Keep the runner stateless: a Worker
    builds it once and the session calls it from any Step, in any process.

    Args:
        options: The `ClaudeAgentOptions` of every run, or an async function of the turn that returns
            them. The runner sets what it owns on top: the in-process MCP server `dex` with the tools,
            its `PreToolUse` hook (before any of yours), partial messages, the session store, `resume`,
            and a fresh `HOME` and `CLAUDE_CONFIG_DIR` per run (and working directory, unless `cwd` is
            set). Built-in tools are off unless `options.tools` names them; those run inline, at least
            once.
        tools: The user's tools, made with the SDK's `@tool` decorator, and `McpStdioServer`s whose
            tools the runner lists for every run. Their `annotations` (`readOnlyHint`,
            `idempotentHint`) give their effect unless a `ToolPolicy` says otherwise.
        inline_read_tools: Run `read` calls inline in the CLI (the default). With `False`, reads are
            deferred like any other call and run in their own `CallTool` Step.
        transport_factory: Builds the SDK `Transport` of one run from that run's final options, in
            place of the bundled CLI subprocess (the default, `None`). Meant for tests that script the
            CLI's stream-JSON protocol. The SDK applies no CLI flags to such a transport and does not
            hand it the resumed transcript: it reads `options.resume` and `options.session_store` itself.

    Raises:
        ValueError: If two tools share a name.
    """

    def __init__(
        self,
        options: ClaudeAgentOptions | OptionsFactory | None = None,
        tools: Sequence[SdkMcpTool[Any] | McpStdioServer] = (),
        *,
        inline_read_tools: bool = True,
        transport_factory: Callable[[ClaudeAgentOptions], Transport] | None = None,
    ) -> None:
        static = [tool for tool in tools if isinstance(tool, SdkMcpTool)]
        _check_unique([tool.name for tool in static])
        self._options = options if options is not None else ClaudeAgentOptions()
        self._tools: dict[str, SdkMcpTool[Any]] = {tool.name: tool for tool in static}
        self._servers = [tool for tool in tools if isinstance(tool, McpStdioServer)]
        self._inline_read_tools = inline_read_tools
        self._transport_factory = transport_factory

    @property
    def tools(self) -> Mapping[str, SdkMcpTool[Any]]:
        """The user's `@tool` tools by name (without the MCP servers' tools)."""
        return dict(self._tools)

    async def list_tools(self) -> dict[str, SdkMcpTool[Any]]:
        """Return every tool by name, listing each MCP server's tools (`tools/list`).

        Raises:
            ValueError: If two tools share a name.
        """
        tools = list(self._tools.values())
        for server in self._servers:
            tools.extend(await server.list_tools())
        _check_unique([tool.name for tool in tools])
        return {tool.name: tool for tool in tools}

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text``."""
        return build_user_framework_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the CLI run the turn until it ends or defers a tool call.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` with the one deferred call, or `TurnCompleted` with the turn's messages
            (with `turn_error` for a failure that a retry would only repeat).

        Raises:
            RuntimeError: For a failure that a retry may cure (an API error, a CLI that ended early).
        """
        try:
            stored = read_stored_conversation(turn.messages)
        except ValueError as error:
            return TurnCompleted(new_messages=(), turn_error=str(error))
        try:
            tools = await self.list_tools()
        except ValueError as error:
            return TurnCompleted(new_messages=(), turn_error=str(error))
        run = _HarnessRun(turn=turn, tools=tools, inline_read_tools=self._inline_read_tools)
        store = TranscriptStore()
        prompt: str | None
        if turn.framework_run_state is None:
            if not stored.prompt:
                return TurnCompleted(new_messages=(), turn_error="the turn has no user message to answer")
            prompt = "\n\n".join(stored.prompt)
            session_id = stored.session_id
            turn_entries: list[dict[str, Any]] = []
            turn_items: list[dict[str, Any]] = []
        else:
            try:
                state = ClaudeRunState.from_json(turn.framework_run_state)
            except ValueError as error:
                return TurnCompleted(new_messages=(), turn_error=str(error))
            prompt = None
            session_id = state.session_id
            turn_entries = [dict(entry) for entry in state.turn_entries]
            turn_items = [dict(item) for item in state.turn_items]
            record = turn.recorded_tool_call(state.pending.tool_use_id)
            run.resumed = _ResumedCall(
                tool_use_id=state.pending.tool_use_id,
                text=describe_tool_call_outcome(record),
                is_error=record.status is not ToolCallStatus.SUCCEEDED,
            )
        if session_id is not None:
            earlier = stored.entries if stored.session_id == session_id else []
            store.preload(session_id, [*earlier, *turn_entries])

        base = self._options if isinstance(self._options, ClaudeAgentOptions) else await self._options(turn)
        with tempfile.TemporaryDirectory(prefix="dex-claude-run-") as root:
            options = _run_options(base, run, store, Path(root), resume=session_id)
            transport = self._transport_factory(options) if self._transport_factory is not None else None
            async with ClaudeSDKClient(options, transport=transport) as client:
                if prompt is not None:
                    await client.query(prompt)
                async for message in client.receive_response():
                    run.observe(message, turn.events)
        return self._outcome(turn, run, store, turn_entries, turn_items)

    def _outcome(
        self,
        turn: AgentTurnContext,
        run: _HarnessRun,
        store: TranscriptStore,
        turn_entries: list[dict[str, Any]],
        turn_items: list[dict[str, Any]],
    ) -> AgentTurnOutcome:
        result = run.result
        if result is None or run.session_id is None:
            raise RuntimeError("the Claude Code CLI ended the run without a result")
        usage = _run_usage(result, len(run.model_message_ids))
        entries = [*turn_entries, *store.new_entries(run.session_id)]
        items = [*turn_items, *run.items]
        if result.is_error:
            detail = "; ".join(result.errors or []) or result.result or result.subtype
            status = result.api_error_status
            if status is not None and status not in _DETERMINISTIC_API_STATUSES:
                raise RuntimeError(f"the model API failed with status {status}: {detail}")
            return TurnCompleted(
                new_messages=project_items(items),
                usage=usage,
                turn_error=f"the Claude Code CLI ended the turn with an error ({result.subtype}): {detail}",
            )
        if run.resumed is not None and not run.resumed.delivered:
            # The model never read what the deferred call did (a write may have run in its Step), and
            # would be free to call it again: this run must not count.
            raise RuntimeError(
                f"the Claude Code CLI did not resume the deferred tool call {run.resumed.tool_use_id}: no "
                "tools/call of the run named it, so the model never read its recorded result"
            )
        if result.stop_reason == "tool_deferred":
            if not run.deferrals:
                return TurnCompleted(
                    new_messages=project_items(items),
                    usage=usage,
                    turn_error="a PreToolUse hook other than the runner's deferred a tool call",
                )
            pending = _agreed_deferral(result.deferred_tool_use, run.deferrals)
            tool = run.tools[pending.tool_name]
            call = DeferredToolCall(
                tool_call_id=pending.tool_use_id,
                tool_name=pending.tool_name,
                arguments=json.dumps(dict(pending.input), sort_keys=True),
                policy=turn.resolve_tool_policy(pending.tool_name, framework_effect(tool.annotations)),
            )
            state = ClaudeRunState(
                session_id=run.session_id, turn_entries=entries, turn_items=items, pending=pending
            )
            return ToolCallsRequested(framework_run_state=state.to_json(), tool_calls=[call], usage=usage)
        cli_session = {"session_id": run.session_id, "entries": entries}
        return TurnCompleted(new_messages=project_items(items, cli_session), usage=usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run the user's tool for one approved call, once.

        The tool's handler gets the call's arguments; `dex_agents.current_tool_execution()` gives it the
        call and its idempotency key.

        Args:
            call: The approved call.

        Returns:
            The tool's text result.

        Raises:
            ToolExecutionError: When the tool is unknown, its arguments are not a JSON object, or its
                result has `is_error` set. Other exceptions propagate, so the session retries or records
                the call by its effect.
        """
        record = call.tool_call
        tool = self._tools.get(record.tool_name)
        if tool is None and self._servers:
            tool = (await self.list_tools()).get(record.tool_name)
        if tool is None:
            raise ToolExecutionError(f"unknown tool {record.tool_name!r}")
        try:
            arguments = json.loads(record.arguments or "{}")
        except json.JSONDecodeError as error:
            raise ToolExecutionError(f"arguments of {record.tool_name!r} are not JSON: {error}") from error
        if not isinstance(arguments, dict):
            raise ToolExecutionError(f"arguments of {record.tool_name!r} must be a JSON object")
        result = await tool.handler(cast(dict[str, Any], arguments))
        text = tool_result_text(result.get("content"))
        if result.get("is_error"):
            raise ToolExecutionError(text or f"{record.tool_name} failed")
        return ToolExecutionResult(text)


def _agreed_deferral(reported: DeferredToolUse | None, deferrals: Sequence[PendingToolUse]) -> PendingToolUse:
    """Return the call the run deferred, when the CLI's report and the hook's record name the same one.

    The CLI keeps one deferred call per run and resumes only the one its result reports. Had the hook
    deferred another call too (when it gave up waiting for a whole response), that call would silently
    get no result, so the attempt fails instead.

    Raises:
        RuntimeError: If the CLI reports no deferred call, or one other than the hook's only deferral.
    """
    record = ", ".join(f"{call.tool_use_id} ({call.tool_name})" for call in deferrals)
    if reported is None:
        raise RuntimeError(
            "the Claude Code CLI stopped for a deferred tool call but reported none; "
            f"the runner's PreToolUse hook deferred {record}"
        )
    [expected, *others] = deferrals
    if (
        others
        or reported.id != expected.tool_use_id
        or reported.name != f"{TOOL_NAME_PREFIX}{expected.tool_name}"
    ):
        raise RuntimeError(
            f"the Claude Code CLI reports the deferred tool call {reported.id} ({reported.name}), but the "
            f"runner's PreToolUse hook deferred {record}; the CLI would resume only the call it reports, so "
            "this run's calls are not requested"
        )
    return PendingToolUse(expected.tool_use_id, expected.tool_name, dict(reported.input))


def _check_unique(names: Sequence[str]) -> None:
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"tool names must be unique: {duplicates}")


def _run_options(
    base: ClaudeAgentOptions, run: _HarnessRun, store: TranscriptStore, root: Path, *, resume: str | None
) -> ClaudeAgentOptions:
    """Return the options of one CLI run: the user's, plus everything the runner owns."""
    home, config = root / "home", root / "config"
    home.mkdir()
    config.mkdir()
    if base.cwd is None:
        cwd = root / "work"
        cwd.mkdir()
    else:
        cwd = Path(base.cwd)
    if not isinstance(base.mcp_servers, dict):
        raise TypeError("ClaudeAgentRunner needs ClaudeAgentOptions.mcp_servers as a dict")
    server = create_shim_server(MCP_SERVER_NAME, [run.shim(tool) for tool in run.tools.values()])
    hooks = dict(base.hooks or {})
    matcher = HookMatcher(hooks=[run.pre_tool_use], timeout=_RESPONSE_WAIT_SECONDS + 60)
    hooks["PreToolUse"] = [matcher, *hooks.get("PreToolUse", [])]
    env = {**ISOLATION_ENV, **base.env, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
    return replace(
        base,
        tools=base.tools if base.tools is not None else [],
        mcp_servers={**base.mcp_servers, MCP_SERVER_NAME: server},
        hooks=hooks,
        include_partial_messages=True,
        resume=resume,
        continue_conversation=False,
        fork_session=False,
        session_id=None,
        session_store=store,
        env=env,
        cwd=cwd,
    )


def _run_usage(result: ResultMessage, model_calls: int) -> AgentUsage:
    usage = cast(Mapping[str, Any], result.usage or {})
    cached = int(usage.get("cache_read_input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    return AgentUsage(
        model_calls=model_calls,
        input_tokens=int(usage.get("input_tokens") or 0) + cached + created,
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=cached,
    )
