"""`ClaudeAgentRunner`: the session's runner contract around the Claude Code harness.

One `run_model_step` is one run of the Claude Code CLI (through `ClaudeSDKClient`). The CLI runs the turn:
it calls the model, runs reads inline, and stops at the one call of a response that must run in its own
Step (`_gate` holds the hook that decides). The CLI's result names the call it deferred; the run
counts only when that is the one call the hook deferred. The next `run_model_step` resumes the CLI session
without a prompt, and the deferred call gets its recorded result; a resumed run that never answers the call
fails. The CLI transcript never stays on a Worker's disk: it travels in the run state and, once the turn
ends, in the stored messages.

A cancelled `run_model_step` (`cancel_turn`) kills the run's CLI and every process it started before the
client closes, so the model call stops and nothing of the run is kept. A turn that ends without an answer
(steered, cancelled, failed) keeps the items of its last deferral with a result for every call
(`build_unfinished_turn_messages`).

The runner's MCP server also offers the session's enabled built-ins (always deferred: the session carries
them out) and the tools of its `McpToolSource`s. The tasks that tools start are polled and cancelled by the
source that owns the call, else by the user's `ToolTaskHandlers`. Session settings choose a turn's model and
add to its system prompt through two optional hooks (`_settings`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    DeferredToolUse,
    HookMatcher,
    McpSdkServerConfig,
    ResultMessage,
    SdkMcpTool,
    TextBlock,
    Transport,
)
from dex_agents import (
    AgentToolCall,
    ContextWindowExceeded,
    ToolTaskHandlers,
    ToolTaskRouter,
    build_plan_note,
    context_summary_text,
    is_context_window_refusal,
    provider_refusal,
)
from dex_agents.compaction import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    ContextSummaryRequest,
    ContextSummaryResult,
    build_summary_prompt,
)
from dex_agents.mcp import McpToolSource
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    TurnCompleted,
)
from dex_agents.values import AgentUsage, FrameworkMessage, ToolEffect

from dex_agents_claude_agent_sdk._call_metadata import RunRequest, no_call_metadata, run_request, run_usage
from dex_agents_claude_agent_sdk._cli_process import ended_when_cancelled
from dex_agents_claude_agent_sdk._compaction import (
    estimate_input_tokens,
    select_cutoff,
    summary_lines,
    with_summary_root,
)
from dex_agents_claude_agent_sdk._gate import (
    REFUSED_TOOL_CALL_MESSAGE,
    RESPONSE_WAIT_SECONDS,
    HarnessRun,
    PermissionCallback,
    ResumedCall,
)
from dex_agents_claude_agent_sdk._messages import (
    MCP_SERVER_NAME,
    TOOL_NAME_PREFIX,
    build_user_framework_message,
    project_items,
    read_stored_conversation,
    recorded_tool_result,
    unfinished_turn_messages,
)
from dex_agents_claude_agent_sdk._settings import (
    InstructionsForSettings,
    ModelForSettings,
    SessionSettingsError,
    options_for_settings,
)
from dex_agents_claude_agent_sdk._shim_server import create_shim_server, listed_tools
from dex_agents_claude_agent_sdk._state import (
    ClaudeRunState,
    PendingToolUse,
    TranscriptStore,
    deferred_permission_entries,
)
from dex_agents_claude_agent_sdk._tool_execution import (
    PERMISSION_REQUEST_REFERENCE,
    approved_permission_request,
    is_permission_request,
    run_tool,
)
from dex_agents_claude_agent_sdk._turn_tools import gather_run_tools, is_planning_turn

__all__ = [
    "ISOLATION_ENV",
    "REFUSED_TOOL_CALL_MESSAGE",
    "ClaudeAgentRunner",
    "ModelApiError",
    "OptionsFactory",
]

OptionsFactory = Callable[[AgentTurnContext], Awaitable[ClaudeAgentOptions]]
"""Builds the options of one run from the turn, for options that differ per session or per call."""

ISOLATION_ENV: Mapping[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
}
"""Environment every run starts from; `ClaudeAgentOptions.env` may override it."""

_PERMISSION_REQUEST_POLICY = ToolPolicy(ToolEffect.UNCLASSIFIED, requires_approval=True)
"""The policy of a permission request the session answers: nothing is known of the call, and it asks."""

# Besides the statuses `provider_refusal` names: a request larger than the API takes (413) is sent again
# as it is by every attempt.
_REPEATED_API_STATUSES = frozenset({413})


# The result's `terminal_reason` when the run ended on a model call the CLI gave up on.
_API_ERROR = "api_error"


class ModelApiError(RuntimeError):
    """A model call the CLI gave up on (after its own retries), with the HTTP status the CLI reports.

    It carries `status_code` (`None` when no answer came: a timeout, a refused connection) and `message`
    as the provider clients' errors do, so the core's `is_context_window_refusal` and `provider_refusal`
    read it.
    """

    def __init__(self, status_code: int | None, message: str) -> None:
        failure = "without an answer" if status_code is None else f"with status {status_code}"
        super().__init__(f"the model API failed {failure}: {message}")
        self.status_code = status_code
        self.message = message


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
            set). Claude Code's own tools are off unless `options.tools` names them; those run inline,
            at least once.
        tools: The user's tools, made with the SDK's `@tool` decorator, and `dex_agents.mcp.McpToolSource`s
            whose tools the runner lists for every run (named `<server>__<tool>`). An `@tool` tool's
            annotations are your own code's, so they give its policy unless a `ToolPolicy` says otherwise
            (`dex_agents.policy_from_mcp_annotations`: `readOnlyHint` is a `read`, `idempotentHint` an
            `idempotent_write`, and a destructive tool asks for approval). A source's tools trust their
            annotations only where its server says ``trust_annotations=True``. The session's enabled
            built-ins are offered besides them.
        inline_read_tools: Run `read` calls inline in the CLI (the default). With `False`, reads are
            deferred like any other call and run in their own `CallTool` Step.
        model_for_settings: Chooses each turn's model (`ClaudeAgentOptions.model`) from the session
            settings the turn started with (`AgentTurnContext.session_settings`); `None` keeps the
            options' model.
        instructions_for_settings: Returns instructions each turn adds after the options' system prompt,
            from the turn's session settings; `None` adds none. With this hook the CLI rebuilds the
            system prompt on every run (`snapshot: False`), so a change reaches the next turn.
        permission_requests_as_approvals: Turn the CLI's permission requests for Claude Code's own tools
            (`Bash`, `Edit`, `Write`, ...) into the session's approvals, answered with
            `resolve_interrupt`, off by default. Your `can_use_tool` (in the options) still decides first:
            an allow or a deny goes to the CLI as it is, and `None` leaves the request to the session. The
            run then ends, the call waits in `AwaitToolApproval` (a Worker may die meanwhile), and the
            turn's next run lets the CLI run an approved call, or hands the model the rejection text as
            the call's result. Such a call is `unclassified` and requires approval (Claude Code's permission
            system governs the tool, so `tool_policies` has no say).
        task_handlers: Poll and cancel the tasks that your tools start with `dex_agents.start_tool_task`,
            by tool name. The tasks of an `McpToolSource`'s tools go to their source.
        transport_factory: Builds the SDK `Transport` of one run from that run's final options, in
            place of the bundled CLI subprocess (the default, `None`). Meant for tests that script the
            CLI's stream-JSON protocol. The SDK applies no CLI flags to such a transport and does not
            hand it the resumed transcript: it reads `options.resume` and `options.session_store` itself.

    Raises:
        ValueError: If two tools share a name.
        TypeError: If a tool is neither an SDK tool nor an `McpToolSource`.
    """

    def __init__(
        self,
        options: ClaudeAgentOptions | OptionsFactory | None = None,
        tools: Sequence[SdkMcpTool[Any] | McpToolSource] = (),
        *,
        inline_read_tools: bool = True,
        model_for_settings: ModelForSettings | None = None,
        instructions_for_settings: InstructionsForSettings | None = None,
        permission_requests_as_approvals: bool = False,
        task_handlers: ToolTaskHandlers | None = None,
        transport_factory: Callable[[ClaudeAgentOptions], Transport] | None = None,
    ) -> None:
        static: list[SdkMcpTool[Any]] = []
        sources: list[McpToolSource] = []
        for tool in tools:
            if isinstance(tool, SdkMcpTool):
                static.append(tool)
            elif isinstance(tool, McpToolSource):  # pyright: ignore[reportUnnecessaryIsInstance]
                sources.append(tool)
            else:
                raise TypeError(
                    "ClaudeAgentRunner takes SDK tools (@tool) and dex_agents.mcp.McpToolSource, got "
                    f"{type(tool).__name__}"
                )
        _check_unique([tool.name for tool in static])
        self._options = options if options is not None else ClaudeAgentOptions()
        self._tools: dict[str, SdkMcpTool[Any]] = {tool.name: tool for tool in static}
        self._sources = tuple(sources)
        self._inline_read_tools = inline_read_tools
        self._model_for_settings = model_for_settings
        self._instructions_for_settings = instructions_for_settings
        self._permission_requests_as_approvals = permission_requests_as_approvals
        self._tasks = ToolTaskRouter(
            "ClaudeAgentRunner", "task_handlers", task_handlers, sources=self._sources
        )
        self._transport_factory = transport_factory

    def agent_tool_names(self) -> Collection[str] | None:
        """Return the names of the tools whose calls the session's policies govern: your `@tool` tools.

        Claude Code's own tools and the tools of `options.mcp_servers` are not among them: Claude Code's
        permission system decides about their calls, and a permission request the session answers
        (`permission_requests_as_approvals`) always asks. `None` when an `McpToolSource` is given, whose
        tools its servers list. No I/O.
        """
        return None if self._sources else frozenset(self._tools)

    @property
    def supports_plan_mode(self) -> bool:
        """`True`: a planning turn offers only ``write_todos`` and the model reads the plan note first.

        In a planning turn the run has none of Claude Code's own tools (`options.tools`) and none of the
        options' MCP servers; the runner's MCP server offers ``write_todos`` alone.
        """
        return True

    @property
    def tools(self) -> Mapping[str, SdkMcpTool[Any]]:
        """The user's `@tool` tools by name (without the MCP sources' tools)."""
        return dict(self._tools)

    @property
    def mcp_sources(self) -> tuple[McpToolSource, ...]:
        """The `McpToolSource`s whose tools the runner offers."""
        return self._sources

    def describe_tool(self, tool_name: str) -> str | None:
        """Return what tool ``tool_name`` does, for tracing (`ToolDescriber`), or `None` when unknown.

        It gives the description of the `@tool` tool by that name, else the last listing of the first
        `McpToolSource` that has it; it never contacts a server.

        Args:
            tool_name: The tool's name, as the session records it (without the CLI's ``mcp__dex__``).

        Returns:
            The tool's description, or `None`.
        """
        tool = self._tools.get(tool_name)
        if tool is not None:
            return tool.description or None
        for source in self._sources:
            description = source.describe_tool(tool_name)
            if description:
                return description
        return None

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text``."""
        return build_user_framework_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the CLI run the turn until it ends or defers a tool call.

        When the coroutine is cancelled (`cancel_turn`), the run's CLI and every process it started are
        killed at once, and the cancellation propagates: nothing of the run is returned.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` with the one deferred call, or `TurnCompleted` with the turn's messages
            (with `turn_error` for a failure that a retry would only repeat, such as a run state that
            another runner wrote, or session settings the hooks refuse).

        Raises:
            ContextWindowExceeded: When the API refused the conversation as longer than the model's
                context window (the session compacts, or ends the turn saying so).
            UnfinishedModelResponse: When a model response ended before the API said it was finished
                (a cut stream, no `stop_reason`); the run's CLI is killed at once.
            RuntimeError: For a failure that a retry may cure (an API error the CLI gave up on, which is a
                `ModelApiError`; a CLI that ended early).
        """
        state: ClaudeRunState | None = None
        try:
            if turn.framework_run_state is not None:
                state = ClaudeRunState.from_json(turn.framework_run_state)
            stored = read_stored_conversation(turn.messages)
            tools = await gather_run_tools(turn, self._tools, self._sources)
        except ValueError as error:  # RunStateFormatError included
            return TurnCompleted(
                new_messages=(), turn_error=str(error), model_call_metadata=no_call_metadata()
            )
        base = self._options if isinstance(self._options, ClaudeAgentOptions) else await self._options(turn)
        try:
            base = options_for_settings(
                base,
                turn.session_settings,
                model_for_settings=self._model_for_settings,
                instructions_for_settings=self._instructions_for_settings,
            )
        except SessionSettingsError as error:
            # The turn's items so far (after a deferral) are kept, with a result for every call.
            kept = [] if state is None else unfinished_turn_messages(state, turn.tool_calls)
            return TurnCompleted(
                new_messages=kept, turn_error=str(error), model_call_metadata=no_call_metadata()
            )
        run = HarnessRun(
            turn=turn,
            tools=tools,
            inline_read_tools=self._inline_read_tools,
            permission_callback=cast(PermissionCallback | None, base.can_use_tool),
        )
        store = TranscriptStore()
        prompt: str | None
        summary_text: str | None = None
        if state is None:
            if not stored.prompt:
                return TurnCompleted(
                    new_messages=(),
                    turn_error="the turn has no user message to answer",
                    model_call_metadata=no_call_metadata(base.model),
                )
            prompt = "\n\n".join(stored.prompt)
            note = build_plan_note(turn.plan, turn.interaction_mode)
            if note is not None:
                # User text before the turn's messages; a resumed run of the turn has it in its transcript.
                prompt = f"{note}\n\n{prompt}"
            session_id = stored.session_id
            if turn.context_summary is not None and session_id is None:
                # Every earlier turn is summarized: a new CLI conversation starts from the summary, a text
                # block of its own before the prompt's.
                summary_text = context_summary_text(turn.context_summary)
            turn_entries: list[dict[str, Any]] = []
            turn_items: list[dict[str, Any]] = []
        else:
            prompt = None
            session_id = state.session_id
            turn_entries = [dict(entry) for entry in state.turn_entries]
            turn_items = [dict(item) for item in state.turn_items]
            text, is_error = recorded_tool_result(turn.recorded_tool_call(state.pending.tool_use_id))
            run.resumed = ResumedCall(
                tool_use_id=state.pending.tool_use_id,
                text=text,
                is_error=is_error,
                is_permission_request=state.pending.is_permission_request,
            )
        if session_id is not None:
            earlier = stored.entries if stored.session_id == session_id else []
            entries = [*earlier, *turn_entries]
            if turn.context_summary is not None:
                entries = with_summary_root(turn.context_summary, entries)
            store.preload(session_id, entries)

        with tempfile.TemporaryDirectory(prefix="dex-claude-run-") as root:
            options = _run_options(
                base,
                run,
                store,
                Path(root),
                resume=session_id,
                answers_permissions=self._permission_requests_as_approvals,
            )
            request = run_request(options, await listed_tools(_shim_server_of(options)))
            transport = self._transport_factory(options) if self._transport_factory is not None else None
            async with ClaudeSDKClient(options, transport=transport) as client, ended_when_cancelled(client):
                if prompt is not None:
                    await client.query(prompt if summary_text is None else _text_blocks(summary_text, prompt))
                async for message in client.receive_response():
                    run.observe(message, turn.events)
        return _outcome(turn, run, store, turn_entries, turn_items, request=request)

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Estimate the next run's model input in tokens (`ContextCompactionRunner`).

        A token per four characters of what the model reads: the summary, the stored messages and the
        running turn's items. Claude Code's system prompt and tool definitions are not counted; leave room
        for them in the policy's window.
        """
        return estimate_input_tokens(turn)

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the last message to summarize: the end of an earlier turn, or `None` when none ended.

        It keeps about ``retained_token_budget`` tokens of the newest messages.
        """
        return select_cutoff(turn, retained_token_budget)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Summarize the earlier conversation in one CLI run with no tools: one model call.

        The run is a new CLI conversation, with the options' model and environment, the core's summary
        instructions as its system prompt, and the previous summary and the messages as its prompt. An
        options factory is called with a turn that holds no messages.

        Raises:
            RuntimeError: When the run ends with an error or without text (the `CompactContext` attempt
                fails, and the session retries it).
        """
        if isinstance(self._options, ClaudeAgentOptions):
            base = self._options
        else:
            base = await self._options(_summary_turn(request))
        prompt = build_summary_prompt(request.previous_summary, summary_lines(request.messages))
        texts: list[str] = []
        result: ResultMessage | None = None
        with tempfile.TemporaryDirectory(prefix="dex-claude-summary-") as root:
            home, config, cwd = Path(root) / "home", Path(root) / "config", Path(root) / "work"
            for folder in (home, config, cwd):
                folder.mkdir()
            options = replace(
                base,
                tools=[],
                mcp_servers={},
                hooks={},
                can_use_tool=None,
                system_prompt=DEFAULT_SUMMARY_INSTRUCTIONS,
                include_partial_messages=False,
                resume=None,
                continue_conversation=False,
                fork_session=False,
                session_id=None,
                session_store=None,
                max_turns=1,
                env={**ISOLATION_ENV, **base.env, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)},
                cwd=cwd,
            )
            transport = self._transport_factory(options) if self._transport_factory is not None else None
            async with ClaudeSDKClient(options, transport=transport) as client, ended_when_cancelled(client):
                await client.query(prompt)
                async for message in client.receive_response():
                    if isinstance(message, AssistantMessage) and message.parent_tool_use_id is None:
                        texts.extend(block.text for block in message.content if isinstance(block, TextBlock))
                    elif isinstance(message, ResultMessage):
                        result = message
        if result is None or result.is_error:
            detail = "no result" if result is None else "; ".join(result.errors or []) or result.subtype
            raise RuntimeError(f"the Claude Code CLI's summary run failed: {detail}")
        text = "\n".join(texts).strip()
        if not text:
            raise RuntimeError("the Claude Code CLI's summary run answered no text")
        return ContextSummaryResult(text=text, usage=run_usage(result, 1))

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the messages of a turn that ends without an answer (steered, cancelled or failed).

        Nothing of a turn is stored before it ends, so these are the items of its last deferral (the
        run state): the text, the tool uses and their results, the inline reads' included, and a result
        for the deferred call from its final record, with the turn's CLI transcript closed by that
        result, so the next turn's run reads every result. A run that no deferral followed (a cancelled
        or failed `RunModel`) left nothing: its model calls and inline reads are dropped with it. No model
        call and no CLI run is made.

        Args:
            turn: The turn's committed state; every record is final.

        Returns:
            The messages to store, or none when the turn made no deferral.

        Raises:
            RunStateFormatError: If the run state is not one this runner wrote (the session then stores
                its note instead).
        """
        if turn.framework_run_state is None:
            return []
        return unfinished_turn_messages(ClaudeRunState.from_json(turn.framework_run_state), turn.tool_calls)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one approved call once: the user's tool, or an `McpToolSource`'s (`call_tool`).

        The user's tool handler gets the call's arguments; `dex_agents.current_tool_execution()` gives it
        the call and its idempotency key, and it may ask the user (`ask_user_input`) or hand over a task
        (`start_tool_task`). An MCP tool's call carries the key in `_meta`.

        Args:
            call: The approved call.

        Returns:
            The tool's text result, or the task an MCP tool started (`ToolTaskStarted`).

        Raises:
            ToolExecutionError: When the tool is unknown, its arguments are not a JSON object, or its
                result has `is_error` set. Other exceptions propagate, so the session retries or records
                the call by its effect.
        """
        record = call.tool_call
        if is_permission_request(record):
            return approved_permission_request(record)
        source = self._owning_source(record)
        if source is not None:
            return await source.call_tool(call)
        return await run_tool(self._tools.get(record.tool_name), record)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll a started task: through the `McpToolSource` that owns the call, else `task_handlers`.

        Raises:
            LookupError: If no source owns the call and no task handler has its tool; the poll fails and
                the call is recorded by its effect.
        """
        return await self._tasks.poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel an abandoned task through its `McpToolSource` or task handler; others are left alone."""
        await self._tasks.cancel_tool_task(cancellation)

    def _owning_source(self, record: AgentToolCall) -> McpToolSource | None:
        return next((source for source in self._sources if source.owns_tool_call(record)), None)


def _outcome(
    turn: AgentTurnContext,
    run: HarnessRun,
    store: TranscriptStore,
    turn_entries: list[dict[str, Any]],
    turn_items: list[dict[str, Any]],
    *,
    request: RunRequest,
) -> AgentTurnOutcome:
    result = run.result
    if result is None or run.session_id is None:
        raise RuntimeError("the Claude Code CLI ended the run without a result")
    usage = run_usage(result, len(run.model_message_ids))
    metadata = run.model_call_metadata(request)
    entries = [*turn_entries, *store.new_entries(run.session_id)]
    items = [*turn_items, *run.items]
    if run.permission_request is not None:
        return _permission_request_outcome(turn, run, entries, items, usage=usage, metadata=metadata)
    if result.is_error:
        detail = "; ".join(result.errors or []) or result.result or result.subtype
        turn_error = f"the Claude Code CLI ended the turn with an error ({result.subtype}): {detail}"
        status = result.api_error_status
        # No status with an API error: the call failed without an answer (a timeout, a refused connection).
        if status is not None or result.terminal_reason == _API_ERROR:
            error = ModelApiError(status, detail)
            if is_context_window_refusal(error):
                # The session compacts where it can, or ends the turn saying why.
                raise ContextWindowExceeded(str(error)) from error
            if provider_refusal(error) is None and status not in _REPEATED_API_STATUSES:
                raise error
        return TurnCompleted(
            new_messages=project_items(items),
            usage=usage,
            turn_error=turn_error,
            model_call_metadata=metadata,
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
                model_call_metadata=metadata,
            )
        pending = _agreed_deferral(result.deferred_tool_use, run.deferrals)
        arguments = json.dumps(dict(pending.input), sort_keys=True)
        call = run.tools.deferred_call(turn, pending.tool_use_id, pending.tool_name, arguments)
        state = ClaudeRunState(
            session_id=run.session_id, turn_entries=entries, turn_items=items, pending=pending
        )
        return ToolCallsRequested(
            framework_run_state=state.to_json(), tool_calls=[call], usage=usage, model_call_metadata=metadata
        )
    cli_session = {"session_id": run.session_id, "entries": entries}
    return TurnCompleted(
        new_messages=project_items(items, cli_session), usage=usage, model_call_metadata=metadata
    )


def _permission_request_outcome(
    turn: AgentTurnContext,
    run: HarnessRun,
    entries: list[dict[str, Any]],
    items: list[dict[str, Any]],
    *,
    usage: AgentUsage,
    metadata: ModelCallMetadata,
) -> ToolCallsRequested:
    """Request the session's approval of the permission request the run stopped at.

    The refusal that stopped the run (and anything after it) leaves the items and the transcript, which
    then reads as a hook's deferral of the call, so the next run asks for its permission again.
    """
    pending = run.permission_request
    assert pending is not None and run.session_id is not None
    cut = next(
        (
            index
            for index, item in enumerate(items)
            if item.get("type") == "tool_result" and item.get("tool_use_id") == pending.tool_use_id
        ),
        len(items),
    )
    state = ClaudeRunState(
        session_id=run.session_id,
        turn_entries=deferred_permission_entries(entries, pending),
        turn_items=items[:cut],
        pending=pending,
    )
    call = DeferredToolCall(
        pending.tool_use_id,
        pending.tool_name,
        json.dumps(dict(pending.input), sort_keys=True),
        # Claude Code's permission system, not a session policy, governs the tool; the session only asks.
        _PERMISSION_REQUEST_POLICY,
        tool_source_reference=PERMISSION_REQUEST_REFERENCE,
    )
    return ToolCallsRequested(
        framework_run_state=state.to_json(), tool_calls=[call], usage=usage, model_call_metadata=metadata
    )


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


async def _text_blocks(*texts: str) -> AsyncIterator[dict[str, Any]]:
    """One user message of the CLI's input stream whose content is ``texts``, a text block each."""
    yield {
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text} for text in texts]},
        "parent_tool_use_id": None,
    }


def _summary_turn(request: ContextSummaryRequest) -> AgentTurnContext:
    """The turn an options factory gets for a summary run: the session, turn and settings, no messages."""
    return AgentTurnContext(
        flow_id=request.flow_id,
        turn_id=request.turn_id,
        attempt=request.attempt,
        messages=(),
        framework_run_state=None,
        tool_calls={},
        events=request.events,
        tool_policies={},
        default_tool_effect=ToolEffect.UNCLASSIFIED,
        heartbeat_function=request.heartbeat_function,
        session_settings=request.session_settings,
    )


def _check_unique(names: Sequence[str]) -> None:
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"tool names must be unique: {duplicates}")


def _shim_server_of(options: ClaudeAgentOptions) -> McpSdkServerConfig:
    """The runner's own MCP server in a run's options (`_run_options` puts it there)."""
    servers = cast(Mapping[str, Any], options.mcp_servers)
    return cast(McpSdkServerConfig, servers[MCP_SERVER_NAME])


def _run_options(
    base: ClaudeAgentOptions,
    run: HarnessRun,
    store: TranscriptStore,
    root: Path,
    *,
    resume: str | None,
    answers_permissions: bool,
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
    server = create_shim_server(MCP_SERVER_NAME, [run.shim(tool.tool) for tool in run.tools.by_name.values()])
    hooks = dict(base.hooks or {})
    matcher = HookMatcher(hooks=[run.pre_tool_use], timeout=RESPONSE_WAIT_SECONDS + 60)
    hooks["PreToolUse"] = [matcher, *hooks.get("PreToolUse", [])]
    env = {**ISOLATION_ENV, **base.env, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
    # A planning turn offers write_todos alone: none of Claude Code's own tools, no other MCP server.
    planning = is_planning_turn(run.turn)
    return replace(
        base,
        tools=base.tools if base.tools is not None and not planning else [],
        mcp_servers={MCP_SERVER_NAME: server} if planning else {**base.mcp_servers, MCP_SERVER_NAME: server},
        hooks=hooks,
        include_partial_messages=True,
        resume=resume,
        continue_conversation=False,
        fork_session=False,
        session_id=None,
        session_store=store,
        env=env,
        cwd=cwd,
        can_use_tool=run.can_use_tool if answers_permissions else base.can_use_tool,
    )
