"""`OpenAIAgentsRunner`: the session's runner contract for an OpenAI Agents SDK `Agent`.

One `run_model_step` drives the SDK's own agent loop (`Runner.run_streamed`) over a gated copy of the
user's agent graph, in which every function tool needs approval:

- the model asks for tools: the run stops with one interruption per call, so the SDK runs no tool. Each
  call becomes a `DeferredToolCall`, and the SDK's `RunState` JSON is the framework run state;
- the model answers: the run ends and the turn's items are stored;
- the next `run_model_step` of the turn restores the `RunState`, approves every call whose record
  succeeded, failed or has an unknown outcome (the gated tool returns the recorded text instead of
  running) and rejects every rejected call with its message, and the SDK makes the next model call.

A handoff is not a tool: the SDK runs it inside the same run and calls the next agent's model, so a
`RunModel` that hands off makes one model call per agent. Any other second model call is stopped by a
hook before it reaches the model, and the turn ends with `turn_error`.

When steering, `cancel_turn` or a failure ends a turn early, `build_unfinished_turn_messages` returns the
turn's items from the run state with a recorded result for every call; when `cancel_turn` cancels the
Step, the SDK's run task (and with it the streamed model call) is cancelled and waited for.

Besides its agents' own tools, every model Step offers the session's enabled built-ins and the tools of
an optional `McpToolSource` (`_turn_tools`); the turn's session settings may choose the run's model and
add instructions (`_settings`). Tasks that tools start are polled by user-supplied `ToolTaskHandlers`, or
by the MCP source for its own calls.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, cast

from agents import (
    Agent,
    FunctionTool,
    HostedMCPTool,
    InputGuardrailTripwireTriggered,
    ItemHelpers,
    MaxTurnsExceeded,
    ModelBehaviorError,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    RunContextWrapper,
    Runner,
    RunResultStreaming,
    RunState,
    TResponseInputItem,
    UserError,
)
from agents.run_context import TContext
from dex_agents import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    ContextSummaryRequest,
    ContextSummaryResult,
    ContextWindowExceeded,
    ToolTaskCancellation,
    ToolTaskHandlers,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskRouter,
    UnfinishedModelResponse,
    build_plan_note,
    context_summary_text,
    is_context_window_refusal,
    provider_refusal,
)
from dex_agents.runner import (
    DEFAULT_REJECTION_TOOL_RESULT,
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.values import FrameworkMessage, InteractionMode, ToolCallStatus

from dex_agents_openai_agents._compaction import (
    CHARACTERS_PER_TOKEN,
    estimate_item_tokens,
    select_turn_cutoff,
    summary_prompt,
)
from dex_agents_openai_agents._effects import CallPolicies
from dex_agents_openai_agents._gate import (
    GatedAgentGraph,
    listed_mcp_tools,
    mcp_listing_scope,
    offered_tools_scope,
    planning_scope,
    recorded_results_scope,
    turn_tools_scope,
)
from dex_agents_openai_agents._hosted_mcp import (
    HOSTED_MCP_APPROVED_RESULT,
    hosted_mcp_policy,
    hosted_mcp_source_reference,
    is_hosted_mcp_reference,
)
from dex_agents_openai_agents._messages import (
    build_user_framework_message,
    input_items_from_stored_messages,
    project_items,
    recorded_result_item,
    with_recorded_results,
)
from dex_agents_openai_agents._provider_models import finish_checked_run_config
from dex_agents_openai_agents._run_events import (
    HANDOFF_EVENT_TYPE,
    StepHooks,
    UnexpectedModelCallError,
    forward_stream_event,
)
from dex_agents_openai_agents._settings import (
    InstructionsForSettings,
    ModelForSettings,
    SessionSettingsError,
    TurnRunConfig,
)
from dex_agents_openai_agents._state import OpenAIAgentsRunState, TurnInput
from dex_agents_openai_agents._tool_execution import ToolCallRunner, tool_source_reference
from dex_agents_openai_agents._turn_tools import OfferedTurnTools, TurnTools

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from dex_agents.mcp import McpToolSource

__all__ = ["HANDOFF_EVENT_TYPE", "UNKNOWN_TOOL_POLICY", "OpenAIAgentsRunner"]

_logger = logging.getLogger(__name__)

_RUN_TASK_STOP_SECONDS = 30.0
"""How long a Step waits for the SDK's cancelled run task, whose model call closes its stream, to end."""


@dataclass(frozen=True)
class _RunStart:
    """How a Step's SDK run starts.

    Attributes:
        agent: The agent the run starts with (a `RunState` names its own).
        sdk_input: What `Runner.run_streamed` gets: input items or the restored `RunState`.
        turn_input: The run's input as the run state keeps it, with the turn's earlier items.
        given: The run's input items.
    """

    agent: Agent[Any]
    sdk_input: list[TResponseInputItem] | RunState[Any, Agent[Any]]
    turn_input: TurnInput
    given: list[TResponseInputItem]


def _raw_type(raw_item: object) -> object:
    if isinstance(raw_item, Mapping):
        return cast(Mapping[str, Any], raw_item).get("type")
    return getattr(raw_item, "type", None)


def _run_input_items(result: RunResultStreaming) -> list[TResponseInputItem]:
    """Return the run's input as it went on: a handoff input filter may have rewritten it."""
    return ItemHelpers.input_to_new_input_list(result.input)


def _run_items(result: RunResultStreaming) -> list[TResponseInputItem]:
    """Return the items the run added after its input, as the SDK hands them to the next run."""
    return result.to_input_list()[len(_run_input_items(result)) :]


async def _stop_run(result: RunResultStreaming) -> None:
    """Make sure the SDK's run task has ended before the Step does.

    A Step that ends early (cancelled by `cancel_turn`, timed out, or done after an error) cancels the
    task, whose model call then closes its response stream, and waits for it: no model call goes on, and
    nothing it produces reaches the session, once the Step has ended.
    """
    if not result.is_complete:
        result.cancel()
    task = result.run_loop_task
    if task is None or task.done():
        return
    _, pending = await asyncio.wait((task,), timeout=_RUN_TASK_STOP_SECONDS)
    if pending:
        # A model that ignores cancellation; the Step must still end.
        _logger.warning("the OpenAI Agents SDK's run task did not stop after it was cancelled")


def _is_unfinished_answer(error: ModelBehaviorError) -> bool:
    """Whether the SDK failed a streamed answer because the provider never said it was finished.

    The finish-checked OpenAI models raise `UnfinishedModelResponse` themselves; these are the SDK's own
    words for the same case with any other model, and with a finish reason missing from api.openai.com.
    """
    text = str(error)
    return "did not produce a final response" in text or "ended before receiving a finish_reason" in text


def _hosted_mcp_call(turn: AgentTurnContext, agent_name: str, raw_item: object) -> DeferredToolCall:
    """The deferred call for a hosted MCP approval request, which the session approves or rejects."""
    request = (
        cast(Mapping[str, Any], raw_item)
        if isinstance(raw_item, Mapping)
        else cast(Mapping[str, Any], cast(Any, raw_item).model_dump())
    )
    tool_name = str(request.get("name", ""))
    return DeferredToolCall(
        tool_call_id=str(request.get("id", "")),
        tool_name=tool_name,
        arguments=str(request.get("arguments") or "{}"),
        policy=hosted_mcp_policy(turn, tool_name),
        tool_source_reference=hosted_mcp_source_reference(agent_name, str(request.get("server_label", ""))),
    )


def _with_turn_notes(
    turn: AgentTurnContext, run_input: list[TResponseInputItem], turn_input: TurnInput
) -> list[TResponseInputItem]:
    """Return the run's input with the session's notes the model sees but the session does not store.

    The context summary, once the session has compacted, starts the input; the plan note
    (`build_plan_note`) comes right before the turn's own messages. Both are user items, rebuilt from the
    turn's committed state on every Step, so a plan that ``write_todos`` changed shows at the next call.
    An input a handoff input filter rewrote already holds the notes it was given.
    """
    if turn_input.input_items:
        return run_input
    first_of_turn = next(
        (index for index, message in enumerate(turn.messages) if message.turn_id == turn.turn_id),
        len(turn.messages),
    )
    items = list(run_input)
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is not None:
        items.insert(first_of_turn, cast(TResponseInputItem, {"role": "user", "content": note}))
    if turn.context_summary is not None:
        summary = {"role": "user", "content": context_summary_text(turn.context_summary)}
        items.insert(0, cast(TResponseInputItem, summary))
    return items


def _after_compaction(
    turn: AgentTurnContext, turn_input: TurnInput, history: Sequence[TResponseInputItem]
) -> TurnInput:
    """Return the turn's input counted against the stored messages as they are now.

    The stored conversation does not change while a turn runs, except when the session compacts between
    two of its model calls: then the oldest messages are in the summary and no longer among the turn's
    messages, and the input starts with what is left of them (never the turn's own, which the cut keeps).
    """
    if turn.context_summary is None or turn_input.input_items:
        return turn_input
    if len(history) < turn_input.history_message_count:
        return dataclasses.replace(turn_input, history_message_count=len(history))
    return turn_input


def _no_context(context: object) -> Mapping[str, Any]:
    # The runner supplies the context object on every Step, so the run state never needs to carry it.
    del context
    return {}


class OpenAIAgentsRunner(Generic[TContext]):
    """Runs an OpenAI Agents SDK `Agent` inside a durable Dex agent session.

    Give it the agent you already have, with its function tools, MCP servers, handoffs and guardrails:
    every model call becomes a `RunModel` Step and every tool call its own tool Step. Keep the runner
    stateless: a Worker builds it once and the session calls it from any Step, in any process.

    Every model Step also offers each agent the session's enabled built-in tools
    (`AgentSessionOptions.built_in_tools`) and the tools of ``mcp_tool_source``.

    Args:
        agent: The starting agent. It is not modified; the runner drives a gated copy of it and of every
            agent reachable through handoffs.
        context: The run context object every run, tool call and guardrail receives. It lives in the
            Worker, not in the durable run state, so it needs no serializer; changes a tool makes to it
            are not carried from one Step to the next.
        run_config: The SDK run configuration of every run (model provider, model settings, handoff
            filters, run-level guardrails). Its `tracing_disabled` is overridden by ``enable_tracing``.
        max_turns: The SDK's turn limit for one model Step (each handoff is a turn).
        enable_tracing: Record the SDK's own traces (sent to OpenAI unless you replace the SDK's trace
            processors). Off by default: a durable session should not export conversations anywhere its
            operator did not choose. When on, every run's trace has the session ID as its group ID.
        resume_last_agent: Start each turn with the agent the conversation was last handed off to, as
            `Runner.run(result.last_agent, ...)` does in the SDK's multi-turn examples; `False` starts
            every turn with ``agent``.
        mcp_tool_source: MCP servers (`dex_agents.mcp.McpToolSource`, built on the Worker) whose tools
            every agent is offered as ``<server>__<tool>``. Each call runs in its own tool Step through
            the source, with the session's idempotency key in the request's ``_meta``; the source also
            polls and cancels the tasks its servers start.
        tool_tasks: Polls and cancels the remote tasks that the agents' tools start with
            `dex_agents.start_tool_task`, by tool name. Without it (and without ``mcp_tool_source``) the
            runner polls no tasks, and `current_tool_execution().supports_tool_tasks` is false.
        model_for_settings: Chooses each turn's model from the session settings the turn started with
            (`AgentTurnContext.session_settings`): a model name, an `agents.Model`, or `None` to keep
            ``run_config.model`` (else each agent's own). It becomes the run's `RunConfig.model`, so it
            replaces the model of every agent of the run, handoff targets included.
        instructions_for_settings: Returns instructions that every model call of a turn gets after the
            agent's own, from the turn's session settings; `None` adds none.
        trust_mcp_annotations: Whether the tool annotations of the agents' MCP servers (``mcp_servers``)
            decide the policies of tools the session has no `ToolPolicy` for, as
            `dex_agents.policy_from_mcp_annotations` maps them: ``readOnlyHint`` is a `read`,
            ``idempotentHint`` an `idempotent_write`, and a destructive tool still asks for approval. Off by
            default, since any server may claim anything: the tools then take the session's
            ``default_tool_effect``. Turn it on only when you trust every MCP server the agents use; a
            server's ``require_approval`` applies either way. ``mcp_tool_source`` has its own switch per
            server (``trust_annotations``).

    Raises:
        UndeferrableToolError: If an agent has a local tool that the SDK would run in process (shell,
            computer, apply-patch or custom tools).
    """

    def __init__(
        self,
        agent: Agent[TContext],
        *,
        context: TContext | None = None,
        run_config: RunConfig | None = None,
        max_turns: int = 10,
        enable_tracing: bool = False,
        resume_last_agent: bool = True,
        mcp_tool_source: McpToolSource | None = None,
        tool_tasks: ToolTaskHandlers | None = None,
        model_for_settings: ModelForSettings | None = None,
        instructions_for_settings: InstructionsForSettings | None = None,
        trust_mcp_annotations: bool = False,
    ) -> None:
        self._agent = agent
        self._graph = GatedAgentGraph(agent)
        self._context = context
        self._run_config = dataclasses.replace(
            run_config if run_config is not None else RunConfig(), tracing_disabled=not enable_tracing
        )
        self._max_turns = max_turns
        self._resume_last_agent = resume_last_agent
        self._tool_calls = ToolCallRunner(self._graph, context, self._run_config)
        self._policies = CallPolicies(self._graph, context, trust_mcp_annotations=trust_mcp_annotations)
        self._turn_tools = TurnTools(mcp_tool_source)
        # A started task's poll and cancel go to the MCP source that owns its call, else to `tool_tasks`.
        self._tasks = ToolTaskRouter(
            "OpenAIAgentsRunner",
            "tool_tasks",
            tool_tasks,
            sources=() if mcp_tool_source is None else (mcp_tool_source,),
        )
        self._turn_configs = TurnRunConfig(self._run_config, model_for_settings, instructions_for_settings)

    @property
    def supports_plan_mode(self) -> bool:
        """`True`: a planning turn offers the model only ``write_todos``, and the plan note precedes the turn.

        In a planning turn every agent of the graph is offered ``write_todos`` alone: none of its own or
        its MCP servers' tools, no hosted tool and no handoff. Whenever the session has a plan (and in every
        planning turn), the model input holds `build_plan_note` as a user item right before the turn's
        own messages; it is not stored.
        """
        return True

    @property
    def agent(self) -> Agent[TContext]:
        """The starting agent this runner drives."""
        return self._agent

    def agent_tool_names(self) -> frozenset[str] | None:
        """Return the names of the function tools the agents offer the model, or `None` when run-time only.

        The names of every agent of the graph (the starting agent and every handoff target), as the model
        calls them; the session checks its ``tool_policies`` keys against them. `None` when an agent has
        MCP servers or a `HostedMCPTool`, whose tools are only known once they are listed (at the model
        Step, or at the provider). The session's built-ins and an ``mcp_tool_source``'s tools are not
        listed. Nothing is called.

        Returns:
            The tool names, or `None`.
        """
        names: set[str] = set()
        for agent in self._graph.original_agents():
            if agent.mcp_servers:
                return None
            for tool in agent.tools:
                if isinstance(tool, HostedMCPTool):
                    return None
                if isinstance(tool, FunctionTool):
                    names.add(tool.name)
        return frozenset(names)

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text`` as an SDK input item."""
        return build_user_framework_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the SDK make one model call (one per agent when it hands off) and return what comes next.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` when the model asked for tools, else `TurnCompleted` with every item of
            the turn, or with `turn_error` when the SDK failed in a way a retry would repeat.
        """
        try:
            run_config = self._step_run_config(turn)
        except SessionSettingsError as error:
            return TurnCompleted(
                new_messages=(),
                turn_error=f"the session settings chose no usable model or instructions: {error}",
            )
        history = input_items_from_stored_messages(turn.messages)
        hooks = StepHooks(run_config)
        recorded: dict[str, str] = {}
        try:
            start = await self._start(turn, history, recorded)
        except (ValueError, KeyError, UserError) as error:
            return TurnCompleted(
                new_messages=(), turn_error=f"the turn's run state cannot be resumed: {error}"
            )
        offered = await self._turn_tools.offered(turn)

        with (
            planning_scope(turn.interaction_mode is InteractionMode.PLANNING),
            recorded_results_scope(recorded),
            mcp_listing_scope(),
            turn_tools_scope(offered.tools),
            offered_tools_scope(),
        ):
            result = Runner.run_streamed(
                start.agent,
                start.sdk_input,
                context=self._context,
                max_turns=self._max_turns,
                hooks=hooks,
                run_config=finish_checked_run_config(run_config),
            )
            try:
                async for event in result.stream_events():
                    hooks.observe(event)
                    forward_stream_event(event, turn.events)
            except UnfinishedModelResponse:
                raise
            except ModelBehaviorError as error:
                if _is_unfinished_answer(error):
                    raise UnfinishedModelResponse(str(error)) from error
                unknown = await self._unknown_tool_outcome(error, turn, hooks, start, result, offered)
                if unknown is not None:
                    return unknown
                return self._failed(turn, hooks, f"the model's response could not be used: {error}")
            except InputGuardrailTripwireTriggered as error:
                name = error.guardrail_result.guardrail.get_name()
                return self._failed(turn, hooks, f"input guardrail {name!r} tripped")
            except OutputGuardrailTripwireTriggered as error:
                name = error.guardrail_result.guardrail.get_name()
                return self._failed(turn, hooks, f"output guardrail {name!r} tripped")
            except RecursionError:
                # The SDK parses every call's arguments while it plans the calls (to deduplicate them);
                # JSON nested deeper than Python's recursion limit fails there, on every attempt alike.
                return self._failed(
                    turn,
                    hooks,
                    "the model's tool call arguments are nested too deeply for the OpenAI Agents SDK "
                    "to parse",
                )
            except MaxTurnsExceeded as error:
                return self._failed(turn, hooks, f"the OpenAI Agents SDK stopped the run: {error}")
            except (UnexpectedModelCallError, UserError) as error:
                return self._failed(turn, hooks, str(error))
            except Exception as error:
                if is_context_window_refusal(error):
                    raise ContextWindowExceeded(str(error)) from error
                refusal = provider_refusal(error)
                if refusal is None:
                    # A rate limit, a 5xx, a timeout: the attempt fails and `RunModel` retries it.
                    raise
                return self._failed(turn, hooks, refusal)
            finally:
                await _stop_run(result)
            hooks.write_handoff_events(turn.events)
            if result.interruptions:
                unsupported = [
                    item
                    for item in result.interruptions
                    if _raw_type(item.raw_item) not in ("function_call", "mcp_approval_request")
                ]
                if unsupported:
                    # Approving such a request would let the provider run a tool with no Step and no record.
                    kinds = sorted({str(_raw_type(item.raw_item)) for item in unsupported})
                    return self._failed(
                        turn,
                        hooks,
                        f"the model asked for approvals the runner cannot defer ({', '.join(kinds)})",
                    )
                # Inside the listing scope: the effects of MCP tools come from what this Step listed.
                return await self._tool_calls_requested(turn, result, hooks, start, offered)
        # The run's own items follow its input, which a handoff input filter may have rewritten; the
        # turn's items from before this run (after an unknown tool) come first.
        new_items = [*start.turn_input.turn_items, *_run_items(result)]
        return TurnCompleted(
            new_messages=project_items(new_items),
            usage=hooks.total_usage(),
            model_call_metadata=hooks.model_call_metadata(),
        )

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Estimate the tokens of the input the next model call gets (`ContextCompactionRunner`).

        The input is rebuilt as `run_model_step` builds it: the summary, the stored messages after it, the
        plan note, and the turn's items from its run state; the starting agent's instructions (when they
        are text) and its function tools' descriptions and schemas count too. A token is four characters
        of the text the model reads. Nothing is called.

        Args:
            turn: The committed state of the turn.

        Returns:
            The estimated token count.
        """
        items = self._model_input_items(turn)
        agent = self._agent
        extra = agent.instructions if isinstance(agent.instructions, str) else ""
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                extra += tool.name + tool.description + json.dumps(tool.params_json_schema)
        return estimate_item_tokens(items) + -(-len(extra) // CHARACTERS_PER_TOKEN)

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the last stored sequence to summarize, keeping about ``retained_token_budget`` tokens.

        The cut falls at the end of an earlier turn, never inside one (every call keeps its result, every
        reasoning item the item it belongs to) and never in the current turn.

        Args:
            turn: The committed state of the turn.
            retained_token_budget: The tokens to keep after the cut.

        Returns:
            The sequence, or `None` when there is no earlier turn to cut.
        """
        stored = estimate_item_tokens(input_items_from_stored_messages(turn.messages))
        unstored = max(0, estimate_item_tokens(self._model_input_items(turn)) - stored)
        return select_turn_cutoff(
            turn.messages, turn.turn_id, unstored_tokens=unstored, retained_token_budget=retained_token_budget
        )

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make the one summary call through the SDK with the turn's model, and return its text.

        A tool-less agent with the starting agent's model (or the one the session settings choose) and
        model settings gets `DEFAULT_SUMMARY_INSTRUCTIONS` and one user item: the previous summary, then the
        messages as a transcript (`build_summary_prompt`), the oldest left out when the prompt would not fit
        ``request.input_token_budget``. Its text is not streamed as live text.

        Args:
            request: The messages to summarize and the summary so far.

        Returns:
            The summary, its usage and its model call's metadata.

        Raises:
            UnfinishedModelResponse: If the answer's stream ended before the provider said it finished.
        """
        run_config = self._turn_configs.for_settings(request.session_settings)
        root = self._graph.root
        summarizer = Agent[Any](
            name=root.name,
            instructions=DEFAULT_SUMMARY_INSTRUCTIONS,
            model=root.model,
            model_settings=root.model_settings,
        )
        prompt = summary_prompt(request.previous_summary, request.messages, request.input_token_budget)
        hooks = StepHooks(run_config)
        result = Runner.run_streamed(
            summarizer,
            [cast(TResponseInputItem, {"role": "user", "content": prompt})],
            context=self._context,
            max_turns=1,
            hooks=hooks,
            run_config=finish_checked_run_config(run_config),
        )
        try:
            async for event in result.stream_events():
                hooks.observe(event)
        except ModelBehaviorError as error:
            if _is_unfinished_answer(error):
                raise UnfinishedModelResponse(str(error)) from error
            raise
        finally:
            await _stop_run(result)
        return ContextSummaryResult(
            text=str(result.final_output or ""),
            usage=hooks.total_usage(),
            model_call_metadata=hooks.model_call_metadata(),
        )

    def _model_input_items(self, turn: AgentTurnContext) -> list[TResponseInputItem]:
        """The items the turn's next model call would get, without restoring the SDK run."""
        history = input_items_from_stored_messages(turn.messages)
        if turn.framework_run_state is None:
            return _with_turn_notes(turn, history, TurnInput(len(history)))
        try:
            saved = OpenAIAgentsRunState.from_json(turn.framework_run_state)
            turn_input = _after_compaction(turn, saved.turn_input, history)
            given = _with_turn_notes(turn, turn_input.run_input(history), turn_input)
        except ValueError:
            # A run state this release cannot read ends the turn at its model call; count what is stored.
            return history
        return [*given, *saved.run_items] if saved.kind == "run_state" else given

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the user's original tool for one approved call, once.

        `dex_agents.current_tool_execution()` gives the tool its call and idempotency key, so the tool
        can also ask the user a question (`dex_agents.ask_user_input`) or hand a remote task to the
        session (`dex_agents.start_tool_task`). A call of an ``mcp_tool_source`` tool goes to its server.

        Args:
            call: The approved call.

        Returns:
            The tool's result as text; from an MCP source, possibly `ToolTaskStarted`.

        Raises:
            ToolExecutionError: For a failure the model should see: invalid arguments, or a tool the
                agent does not have.
        """
        record = call.tool_call
        if is_hosted_mcp_reference(record.tool_source_reference):
            # The approval is the whole Step: the provider runs the tool in the next model call.
            return ToolExecutionResult(HOSTED_MCP_APPROVED_RESULT)
        source = self._turn_tools.mcp_source
        if source is not None and source.owns_tool_call(record):
            return await source.call_tool(call)
        output = await self._tool_calls.run(
            tool_name=record.tool_name,
            tool_call_id=record.tool_call_id,
            arguments=record.arguments,
            source_reference=record.tool_source_reference,
        )
        return ToolExecutionResult(output)

    def describe_tool(self, tool_name: str) -> str | None:
        """Return what tool ``tool_name`` does, for tracing (`ToolDescriber`), or `None` when unknown.

        It reads `FunctionTool.description` of the first agent of the graph (the starting agent and every
        handoff target) that has the tool, then the last listing of ``mcp_tool_source``. The agents' own
        ``mcp_servers`` are not asked: describing a span never contacts a server.

        Args:
            tool_name: The tool's name, as the model called it.

        Returns:
            The tool's description, or `None`.
        """
        for agent in self._graph.original_agents():
            for tool in agent.tools:
                if isinstance(tool, FunctionTool) and tool.name == tool_name and tool.description:
                    return tool.description
        source = self._turn_tools.mcp_source
        return source.describe_tool(tool_name) if source is not None else None

    @property
    def poll_tool_task(self) -> Callable[[ToolTaskPoll], Awaitable[ToolTaskPollOutcome]] | None:
        """Polls a started task once, or `None` when the runner was given nothing that polls tasks.

        The session offers tools `start_tool_task` only when this is not `None`
        (`DeferredToolExecution.supports_tool_tasks`): with ``tool_tasks`` or ``mcp_tool_source``.
        """
        return self._tasks.poll_tool_task if self._tasks.can_poll else None

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Ask an abandoned task to stop, through the MCP source for its calls, else ``tool_tasks``.

        A task whose tool has no cancel handler is left running; the session records the call
        ``outcome_unknown`` either way.

        Args:
            cancellation: The task `cancel_turn` abandoned.
        """
        await self._tasks.cancel_tool_task(cancellation)

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the turn's unstored items when it ends without an answer, each call with its result.

        The run state of the turn's last tool calls holds every item the turn produced; each call of the
        last response gets a `function_call_output` with its final record's result, so the next turn
        hands the SDK (and the model) no call without an output. Nothing is restored or called.

        Args:
            turn: The turn's committed state, every record final.

        Returns:
            The items as stored messages; none before the turn's first tool calls.

        Raises:
            RunStateFormatError: If the run state is not one this release wrote.
        """
        if turn.framework_run_state is None:
            return ()
        saved = OpenAIAgentsRunState.from_json(turn.framework_run_state)
        return project_items(with_recorded_results(saved.unstored_items, turn))

    def _last_agent(self, history: Sequence[TResponseInputItem]) -> Agent[Any]:
        """Return the gated agent the stored conversation last handed off to, else the starting agent."""
        current = self._graph.root
        for raw in history:
            item = cast(Mapping[str, Any], raw)
            if item.get("type") != "function_call":
                continue
            target = self._graph.handoff_targets(current.name).get(str(item.get("name", "")))
            gated = self._graph.gated_agent(target) if target is not None else None
            if gated is not None:
                current = gated
        return current

    async def _start(
        self, turn: AgentTurnContext, history: list[TResponseInputItem], recorded: dict[str, str]
    ) -> _RunStart:
        """Return how this Step's SDK run starts: afresh, from the `RunState`, or from the kept items."""
        if turn.framework_run_state is None:
            agent = self._last_agent(history) if self._resume_last_agent else self._graph.root
            turn_input = TurnInput(len(history))
            given = _with_turn_notes(turn, history, turn_input)
            return _RunStart(agent, given, turn_input, given)
        saved = OpenAIAgentsRunState.from_json(turn.framework_run_state)
        if saved.kind == "run_state":
            turn_input = _after_compaction(turn, saved.turn_input, history)
            given = _with_turn_notes(turn, turn_input.run_input(history), turn_input)
            state = await self._restore_run_state(saved, given, turn, recorded)
            # The `RunState` names the agent the run goes on with.
            return _RunStart(self._graph.root, state, turn_input, given)
        agent = self._graph.gated_agent(saved.agent_name or "")
        if agent is None:
            raise ValueError(f"the agent graph has no agent named {saved.agent_name!r}")
        turn_input = _after_compaction(turn, saved.turn_input, history).with_turn_items(
            [recorded_result_item(turn.recorded_tool_call(call_id)) for call_id in saved.pending_call_ids]
        )
        given = _with_turn_notes(turn, turn_input.run_input(history), turn_input)
        return _RunStart(agent, given, turn_input, given)

    async def _restore_run_state(
        self,
        saved: OpenAIAgentsRunState,
        run_input: list[TResponseInputItem],
        turn: AgentTurnContext,
        recorded: dict[str, str],
    ) -> RunState[Any, Agent[Any]]:
        data = cast(dict[str, Any], json.loads(saved.run_state or "{}"))
        data["original_input"] = run_input
        # The SDK keeps the first run's turn limit and counts turns across resumes; give every Step
        # its own budget, or a long turn could not be resumed at all.
        data["max_turns"] = int(data.get("current_turn", 0)) + self._max_turns
        # A plain wrapper keeps a `None` or non-mapping context as it is; the snapshot carries none.
        context = RunContextWrapper[Any](context=self._context)
        state = await RunState.from_json(self._graph.root, data, context_override=context)
        for item in state.get_interruptions():
            call_id = item.call_id or ""
            record = turn.recorded_tool_call(call_id)
            if record.status is ToolCallStatus.REJECTED:
                state.reject(
                    item, rejection_message=record.rejection_message or DEFAULT_REJECTION_TOOL_RESULT
                )
            elif _raw_type(item.raw_item) == "mcp_approval_request":
                # The provider runs an approved request in the next model call; a request whose
                # decision failed or is unknown was never approved, and the model hears why.
                if record.status is ToolCallStatus.SUCCEEDED:
                    state.approve(item)
                else:
                    state.reject(item, rejection_message=describe_tool_call_outcome(record))
            else:
                state.approve(item)
                recorded[call_id] = describe_tool_call_outcome(record)
        return state

    def _step_run_config(self, turn: AgentTurnContext) -> RunConfig:
        """The run configuration of this Step: the turn's settings applied, its SDK trace grouped.

        Raises:
            SessionSettingsError: If the turn's settings choose no usable model or instructions.
        """
        config = self._turn_configs.for_settings(turn.session_settings)
        if config.tracing_disabled:
            return config
        # Each Step is its own SDK run and trace; the session ID groups a session's traces, and the
        # metadata names the Step, as Dex's own spans do.
        metadata = {
            **(config.trace_metadata or {}),
            "dex.flow.id": turn.flow_id,
            "dex.agent.turn.id": turn.turn_id,
            "dex.step.execution_id": turn.events.step_execution_id,
            "dex.step.attempt": str(turn.attempt),
        }
        return dataclasses.replace(config, group_id=config.group_id or turn.flow_id, trace_metadata=metadata)

    async def _defer(
        self,
        turn: AgentTurnContext,
        offered: OfferedTurnTools,
        agent_name: str,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
    ) -> DeferredToolCall:
        """The deferred call for one call of the model: a built-in, an MCP source tool, or an agent's tool."""
        turn_tool = offered.defer(turn, tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments)
        if turn_tool is not None:
            return turn_tool
        return DeferredToolCall(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            arguments=arguments,
            policy=await self._policies.policy(turn, agent_name, tool_name, arguments, tool_call_id),
            tool_source_reference=tool_source_reference(agent_name),
        )

    async def _tool_calls_requested(
        self,
        turn: AgentTurnContext,
        result: RunResultStreaming,
        hooks: StepHooks,
        start: _RunStart,
        offered: OfferedTurnTools,
    ) -> ToolCallsRequested:
        deferred = [
            _hosted_mcp_call(turn, item.agent.name, item.raw_item)
            if _raw_type(item.raw_item) == "mcp_approval_request"
            else await self._defer(
                turn,
                offered,
                item.agent.name,
                tool_call_id=item.call_id or "",
                tool_name=item.name or item.tool_name or "",
                arguments=item.arguments or "{}",
            )
            for item in result.interruptions
        ]
        data = result.to_state().to_json(context_serializer=_no_context)
        # The session puts the run's input back on resume; the run state keeps only what it cannot
        # rebuild (the input itself only when a handoff input filter rewrote it).
        used = cast(list[TResponseInputItem], data.get("original_input") or [])
        data["original_input"] = []
        saved = OpenAIAgentsRunState(
            kind="run_state",
            turn_input=start.turn_input.after_run(start.given, used),
            run_state=json.dumps(data, separators=(",", ":")),
            run_items=_run_items(result),
        )
        return ToolCallsRequested(
            framework_run_state=saved.to_json(),
            tool_calls=deferred,
            usage=hooks.total_usage(),
            model_call_metadata=hooks.model_call_metadata(),
        )

    async def _unknown_tool_outcome(
        self,
        error: ModelBehaviorError,
        turn: AgentTurnContext,
        hooks: StepHooks,
        start: _RunStart,
        result: RunResultStreaming,
        turn_tools: OfferedTurnTools,
    ) -> AgentTurnOutcome | None:
        """Turn the SDK's abort on an unknown tool name into failed calls the model sees next time."""
        details = error.run_data
        response = hooks.last_response
        if details is None or "not found in agent" not in str(error) or response is None:
            return None
        agent = details.last_agent
        # A planning turn offered the model nothing but the turn tools.
        offered = turn_tools.names
        if turn.interaction_mode is not InteractionMode.PLANNING:
            offered |= {
                tool.name
                for tool in (self._graph.gated_agent(agent.name) or agent).tools
                if hasattr(tool, "name")
            } | set(listed_mcp_tools())
        handoff_names = {
            cast(Any, handoff).tool_name for handoff in agent.handoffs if hasattr(handoff, "tool_name")
        }
        output_items = [
            cast(TResponseInputItem, item.model_dump(exclude_unset=True)) for item in response.output
        ]
        calls: list[DeferredToolCall] = []
        for raw in output_items:
            item = cast(Mapping[str, Any], raw)
            if item.get("type") not in ("function_call", "mcp_approval_request"):
                continue
            if item.get("type") == "mcp_approval_request":
                calls.append(_hosted_mcp_call(turn, agent.name, item))
                continue
            name = str(item.get("name", ""))
            if name in handoff_names:
                return None
            call_id = str(item.get("call_id", ""))
            arguments = str(item.get("arguments", "{}"))
            if name in offered:
                call = await self._defer(
                    turn, turn_tools, agent.name, tool_call_id=call_id, tool_name=name, arguments=arguments
                )
            else:
                call = DeferredToolCall(
                    tool_call_id=call_id,
                    tool_name=name,
                    arguments=arguments,
                    policy=UNKNOWN_TOOL_POLICY,
                    tool_source_reference=tool_source_reference(agent.name),
                )
            calls.append(call)
        # The aborted run's items so far follow its input (the stored conversation, or what a handoff
        # input filter made of it); the response's items follow them. The model call's own input is not
        # kept: a `call_model_input_filter` may have trimmed it, and it would repeat the conversation.
        turn_input = start.turn_input.after_run(start.given, _run_input_items(result))
        saved = OpenAIAgentsRunState(
            kind="items",
            turn_input=turn_input.with_turn_items([*_run_items(result), *output_items]),
            agent_name=agent.name,
            pending_call_ids=[call.tool_call_id for call in calls],
        )
        hooks.write_handoff_events(turn.events)
        return ToolCallsRequested(
            framework_run_state=saved.to_json(),
            tool_calls=calls,
            usage=hooks.total_usage(),
            model_call_metadata=hooks.model_call_metadata(),
        )

    def _failed(self, turn: AgentTurnContext, hooks: StepHooks, error: str) -> TurnCompleted:
        hooks.write_handoff_events(turn.events)
        return TurnCompleted(
            new_messages=(),
            usage=hooks.total_usage(),
            turn_error=error,
            model_call_metadata=hooks.model_call_metadata(),
        )
