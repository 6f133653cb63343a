"""`PydanticAiRunner`: the session's runner contract for a Pydantic AI `Agent`.

One `run_model_step` drives the user's agent with `Agent.iter()` through exactly one model request and
stops at the boundary Pydantic AI would cross next:

- the response asks for tools: the run stops *before* `CallToolsNode`, so Pydantic AI runs no tool, and
  every call except the agent's own output tools becomes a `DeferredToolCall`. The Pydantic AI messages
  of the turn so far go into the framework run state. Should Pydantic AI reach a tool anyway, the run's
  `ModelStepToolGate` stops it before the tool's body runs, and the turn ends with `turn_error`;
- the response is the final output: `CallToolsNode` validates it (output tools, output validators) and
  the run ends; the turn's messages are stored;
- the output needs a retry: Pydantic AI would send feedback in a second model request. The runner stops
  before it and ends the turn with `turn_error`, so no model call is ever hidden inside a Step.

The next `run_model_step` of the turn resumes through Pydantic AI's own mechanism: `DeferredToolResults`
with every recorded result (a rejection as `ToolDenied` with its message, a failure or an unknown outcome
as `ToolFailed`), so Pydantic AI writes the tool returns and makes the next model request itself.

The runner is also a `ContextCompactionRunner`: its token estimate and cut live in `_compaction`, the
summary call in `_summary`. Session settings reach Pydantic AI through two optional hooks that choose a
turn's model and add instructions to it.

Beside the agent's own tools, each model call offers the session's enabled built-in tools and the tools
of an optional `McpToolSource` (`_turn_tools`); their calls are deferred like any other. Tool code can ask
the user (`dex_agents.ask_user_input`) and hand a remote task to the session (`start_tool_task`); the
runner polls and cancels such tasks through the user's `ToolTaskHandlers`, and the MCP source's own tasks
through the source. Every outcome of a model call carries its `ModelCallMetadata` for tracing.
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, cast

from dex_agents import (
    DEFAULT_SUMMARY_INSTRUCTIONS,
    UNKNOWN_TOOL_POLICY,
    AgentEventWriter,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    ModelCallMetadata,
    RunStateFormatError,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskHandlers,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskRouter,
    TurnCompleted,
    build_plan_note,
)
from dex_agents.limits import MAX_JSON_NESTING_DEPTH
from pydantic import ValidationError
from pydantic_ai import (
    Agent,
    AgentRun,
    CallToolsNode,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRequestNode,
    UserError,
)
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    UserPromptPart,
)
from pydantic_ai.models import KnownModelName, Model, infer_model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_core import PydanticSerializationError
from pydantic_graph import End

from dex_agents_pydantic_ai._call_metadata import CallRequest, model_call_metadata
from dex_agents_pydantic_ai._compaction import TokenEstimator, estimate_tokens, select_cutoff, summary_request
from dex_agents_pydantic_ai._effects import annotation_policy
from dex_agents_pydantic_ai._gate import ModelStepToolGate, ToolCallInModelStepError
from dex_agents_pydantic_ai._messages import (
    HistoryUnit,
    StoredHistoryError,
    build_user_framework_message,
    history_units,
    project_messages,
    render_output,
)
from dex_agents_pydantic_ai._provider_errors import check_finished, provider_turn_error
from dex_agents_pydantic_ai._recorded_results import close_open_tool_calls, deferred_tool_results
from dex_agents_pydantic_ai._settings import InstructionsForSettings, ModelForSettings, SettingsChoice
from dex_agents_pydantic_ai._state import PydanticAiRunState
from dex_agents_pydantic_ai._streaming import forward_stream_event
from dex_agents_pydantic_ai._summary import make_summary_call, summary_call_messages
from dex_agents_pydantic_ai._system_prompts import system_prompt_request
from dex_agents_pydantic_ai._tool_descriptions import declared_tool_description, declared_tool_names
from dex_agents_pydantic_ai._tool_execution import ToolCallRunner
from dex_agents_pydantic_ai._turn_tools import TurnTools, list_turn_tools

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["UNKNOWN_TOOL_POLICY", "PydanticAiRunner"]

_PollToolTask: TypeAlias = Callable[[ToolTaskPoll], Awaitable[ToolTaskPollOutcome]]
_CancelToolTask: TypeAlias = Callable[[ToolTaskCancellation], Awaitable[None]]


class _Boundary(enum.Enum):
    """Where `run_model_step` stopped the agent run."""

    TOOL_CALLS = "tool_calls"
    """The model response asks for tools; `CallToolsNode` has not run."""
    END = "end"
    """The run produced its output."""
    OUTPUT_RETRY = "output_retry"
    """Pydantic AI wants a second model request to retry the output."""


@dataclass
class _Stop:
    boundary: _Boundary
    response: ModelResponse | None = None
    """The response to `TOOL_CALLS`."""
    tool_defs: dict[str, ToolDefinition | None] = field(default_factory=dict[str, ToolDefinition | None])
    """At `TOOL_CALLS`, the definition the model was offered for each call's tool, by tool call ID."""
    output: object = None
    """The run's output at `END`."""
    output_from_tool: bool = False
    """At `END`, whether an output tool call (rather than the response's text) produced the output."""
    feedback: ModelRequest | None = None
    """The request Pydantic AI would send at `OUTPUT_RETRY`."""


class PydanticAiRunner(Generic[AgentDepsT]):
    """Runs a Pydantic AI `Agent` inside a durable Dex agent session, one Step per model and tool call.

    Give it the agent you already have, with its ordinary tools and toolsets; the session turns every
    tool call into its own Step. Keep the runner stateless: a Worker builds it once and the session
    calls it from any Step, in any process.

    It is a `ContextCompactionRunner`: with `AgentSessionOptions.compaction`, the session summarizes the
    earlier conversation with the turn's model once the next model input reaches the policy's trigger,
    and the model input then starts with the summary (see the package README, "Long sessions").

    Each model call also offers the built-in tools the session enables (`ask_user`, `durable_wait`,
    `write_todos`), which the session carries out, and the tools of ``mcp_tools``, each call of which runs
    in its tool Step through the source.

    Attributes:
        poll_tool_task: Polls a task a tool started (`ToolTaskPoller`): through ``mcp_tools`` for its own
            calls, else through ``tool_tasks``. `None` when the runner has neither, so the session tells
            tools that tasks are not polled (`DeferredToolExecution.supports_tool_tasks` is false) and a
            tool runs its work to the end inside the call.
        cancel_tool_task: Cancels such a task when `cancel_turn` abandons it (`ToolTaskCanceller`); `None`
            exactly when ``poll_tool_task`` is.

    Args:
        agent: The agent. Its tools are offered to the model unchanged, but never run inside a model
            Step: each call runs in its own tool Step through `execute_deferred_tool_call`.
        deps: The dependencies of every run and tool call (`RunContext.deps`).
        model: A model to use instead of the agent's own, as in `Agent.run(model=...)`.
        model_settings: Model settings for every model call, as in `Agent.run(model_settings=...)`, and for
            the summary call.
        model_for_settings: Chooses each turn's model from the session settings the turn started with
            (`AgentTurnContext.session_settings`); returning `None` keeps ``model`` (or the agent's own).
            The turn's summary call uses the same model.
        instructions_for_settings: Returns instructions that each turn adds to the agent's own, from the
            turn's session settings, as in `Agent.run(instructions=...)`; `None` adds none.
        token_estimator: Counts the tokens of the next model input for compaction, in the unit of the
            session's `CompactionPolicy`; by default `estimate_tokens` (a token per four characters).
        summary_instructions: The summary call's instructions.
        mcp_tools: An MCP tool source (``dex_agents.mcp.McpToolSource``, the ``mcp`` extra) whose tools
            each model call offers beside the agent's own, listed in the model Step. Its calls run in
            their tool Steps through the source, with the session's idempotency key in ``_meta``, and
            the tasks they start are polled and cancelled through it.
        tool_tasks: How to poll and cancel the remote tasks the agent's tools start with
            `dex_agents.start_tool_task`, by tool name.
        trust_mcp_annotations: Whether the MCP annotations of the agent's tools (Pydantic AI's MCP
            toolsets keep them in `ToolDefinition.metadata`) decide the policies of tools the session has
            no `ToolPolicy` for, as `dex_agents.policy_from_mcp_annotations` maps them: ``readOnlyHint``
            is a `read`, ``idempotentHint`` an `idempotent_write`, and a destructive tool still asks for
            approval. Off by default, since any server may claim anything: the tools then take the
            session's ``default_tool_effect``. Turn it on only when you trust every MCP server the agent
            uses. ``mcp_tools`` has its own switch per server (``trust_annotations``).
    """

    def __init__(
        self,
        agent: Agent[AgentDepsT, Any],
        *,
        deps: AgentDepsT | None = None,
        model: Model | KnownModelName | str | None = None,
        model_settings: ModelSettings | None = None,
        model_for_settings: ModelForSettings | None = None,
        instructions_for_settings: InstructionsForSettings | None = None,
        token_estimator: TokenEstimator = estimate_tokens,
        summary_instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
        mcp_tools: McpToolSource | None = None,
        tool_tasks: ToolTaskHandlers | None = None,
        trust_mcp_annotations: bool = False,
    ) -> None:
        if agent.end_strategy == "early":
            # Under 'early', Pydantic AI reports the function calls next to a valid output call as never
            # run. Here those calls already ran in their own Steps, so the model would be told a lie.
            raise ValueError(
                "PydanticAiRunner does not support end_strategy='early': tool calls run in their own Steps "
                "before Pydantic AI sees the output call next to them. Use 'graceful' or 'exhaustive'."
            )
        self._agent = agent
        # Pydantic AI types `deps` as the agent's own type; an agent without dependencies takes `None`.
        self._deps = cast(AgentDepsT, deps)
        self._model = model
        self._model_settings = model_settings
        self._settings = SettingsChoice(model_for_settings, instructions_for_settings)
        self._token_estimator = token_estimator
        self._summary_instructions = summary_instructions
        self._tool_calls = ToolCallRunner(agent, deps=self._deps)
        # The agent's tool names when its toolsets declare them; else what this process's last model
        # request offered (`agent_tool_names`).
        self._declared_tool_names = declared_tool_names(agent.toolsets)
        self._seen_tool_names: frozenset[str] | None = None
        self._mcp_tools = mcp_tools
        self._trust_mcp_annotations = trust_mcp_annotations
        tasks = ToolTaskRouter(
            "PydanticAiRunner", "tool_tasks", tool_tasks, sources=() if mcp_tools is None else (mcp_tools,)
        )
        # The session polls tasks only when the runner can (it looks for a callable `poll_tool_task`), so
        # a runner with nothing to poll them with leaves both unset and tools finish their work in the call.
        self.poll_tool_task: _PollToolTask | None = tasks.poll_tool_task if tasks.can_poll else None
        self.cancel_tool_task: _CancelToolTask | None = tasks.cancel_tool_task if tasks.can_poll else None

    @property
    def supports_plan_mode(self) -> bool:
        """`True` (`PlanModeRunner`): a planning turn offers only ``write_todos``, and the plan is shown.

        In a `planning` turn the run offers the model ``write_todos`` alone (the agent's function tools
        are filtered out with Pydantic AI's ``prepare_tools`` hook; output tools stay), and in any turn
        with a plan, or a planning turn, the model input has `build_plan_note` as a user prompt before the
        turn's first stored message. The note is never stored.
        """
        return True

    @property
    def agent(self) -> Agent[AgentDepsT, Any]:
        """The agent this runner drives."""
        return self._agent

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text`` as a Pydantic AI `ModelRequest` with one user prompt."""
        return build_user_framework_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the agent make one model request and return what the session does next.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` when the model asked for tools, else `TurnCompleted` with every message
            of the turn, or with `turn_error` when the output needs a retry or the provider refused the
            request as every attempt would see it refused (a 400, 401, 403, 404 or 422).

        Raises:
            asyncio.CancelledError: When `cancel_turn` cancels the call. It reaches the model request
                Pydantic AI is awaiting, and leaving `Agent.iter()` closes the model's stream.
            dex_agents.ContextWindowExceeded: When the provider refused the input as longer than the
                model's context window; the session compacts, or ends the turn.
            dex_agents.UnfinishedModelResponse: When the model's stream ended before the provider said the
                answer finished (no finish or stop reason); the attempt fails and `RunModel` retries it.
            pydantic_ai.exceptions.ModelAPIError: For any other provider error once the provider client's
                own retries are spent (a 429, a 5xx, a broken stream, a timeout); `RunModel` retries it.
        """
        try:
            history = _model_history(turn, history_units(turn.messages))
        except ValidationError as error:
            # Messages another runner stored cannot become Pydantic AI input on any attempt.
            return _failed_turn(turn, [], f"a stored message is not a Pydantic AI message: {error}")
        except StoredHistoryError as error:
            return _failed_turn(turn, [], f"the stored messages cannot be replayed to Pydantic AI: {error}")
        earlier_turn_messages: list[ModelMessage] = []
        results: DeferredToolResults | None = None
        if turn.framework_run_state is None:
            if not history or not isinstance(history[-1], ModelRequest):
                return TurnCompleted(new_messages=(), turn_error="the turn has no user message to answer")
        else:
            try:
                state = PydanticAiRunState.from_json(turn.framework_run_state)
            except RunStateFormatError as error:
                # Before any model call; the session leaves its note about the calls that ran.
                return _failed_turn(turn, [], str(error))
            earlier_turn_messages = list(state.turn_messages)
            history.extend(earlier_turn_messages)
            results = deferred_tool_results(
                state.pending_response.tool_calls, state.output_tool_call_ids, turn.tool_calls
            )

        try:
            model = self._turn_model(turn.session_settings)
            instructions = self._settings.instructions(turn.session_settings)
        except Exception as error:
            # The settings stay the same on every attempt of the turn, so a retry would fail alike.
            return _failed_turn(
                turn,
                earlier_turn_messages,
                "the session settings chose no usable model or instructions: "
                f"{type(error).__name__}: {error}",
            )
        turn_tools = await list_turn_tools(turn, self._mcp_tools)
        # A `UserError` is a configuration or history problem (no API key, an unknown model, a history
        # Pydantic AI refuses, a tool name two toolsets share): every attempt would repeat it, so it ends
        # the turn instead of failing the attempt.
        try:
            system_prompts = await system_prompt_request(self._agent, deps=self._deps, model=model)
            if system_prompts is not None:
                history.insert(0, system_prompts)
            async with self._agent.iter(
                message_history=history,
                deferred_tool_results=results,
                deps=self._deps,
                model=model,
                instructions=instructions,
                model_settings=self._model_settings,
                toolsets=turn_tools.toolsets,
                capabilities=[ModelStepToolGate(), *turn_tools.capabilities],
            ) as run:
                watch = _RequestWatch()
                try:
                    stop = await _run_to_boundary(run, turn.events, watch)
                except UserError as error:
                    return _failed_turn(
                        turn,
                        [*earlier_turn_messages, *run.new_messages()],
                        f"Pydantic AI refused the run: {error}",
                        call=_ModelCall.of(run, watch),
                    )
                except ToolCallInModelStepError as error:
                    # Every attempt would reach the same call. The response that asked for it stays out
                    # of the stored history: none of its calls ran.
                    return _failed_turn(
                        turn, earlier_turn_messages, str(error), call=_ModelCall.of(run, watch)
                    )
                except Exception as error:
                    # A context-length refusal raises `ContextWindowExceeded` here; any other error but
                    # a refusal every attempt would meet fails the attempt, which `RunModel` retries.
                    refusal = provider_turn_error(error)
                    if refusal is None:
                        raise
                    return _failed_turn(turn, earlier_turn_messages, refusal, call=_ModelCall.of(run, watch))
                new_messages = run.new_messages()
                call = _ModelCall.of(run, watch)
                if watch.tool_names is not None and not turn_tools.capabilities:
                    # A planning turn's request hid the agent's tools, so only a full request counts.
                    # A union: a tool the agent offered once is its tool, even when a later step hides it.
                    offered = watch.tool_names - turn_tools.built_in_names - turn_tools.mcp_names
                    self._seen_tool_names = offered | (self._seen_tool_names or frozenset())
        except UserError as error:
            return _failed_turn(turn, earlier_turn_messages, f"Pydantic AI refused the run: {error}")
        turn_messages = [*earlier_turn_messages, *new_messages]

        if stop.boundary is _Boundary.TOOL_CALLS:
            return self._tool_calls_requested(turn, stop, turn_tools, turn_messages, call)
        if stop.boundary is _Boundary.OUTPUT_RETRY:
            assert stop.feedback is not None
            # The feedback answers the response's output tool calls, so the next turn's model sees it.
            return _failed_turn(
                turn,
                [*turn_messages, stop.feedback],
                "The model's answer could not be used as the agent's output, and retrying it would take "
                f"another model call: {_feedback_text(stop.feedback)}",
                call=call,
            )
        if isinstance(stop.output, DeferredToolRequests):
            return _failed_turn(
                turn,
                turn_messages,
                "Pydantic AI deferred tool calls while it resumed the turn; the runner defers every call",
                call=call,
            )
        # Output that came through an output tool call is not in any text part, so it becomes part of the
        # final response's display text.
        output_text = render_output(stop.output) if stop.output_from_tool else None
        return TurnCompleted(
            new_messages=project_messages(turn_messages, output_text=output_text),
            usage=call.usage,
            model_call_metadata=call.metadata,
        )

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Estimate the tokens of the model input `run_model_step` would send for ``turn``.

        The input is rebuilt as `run_model_step` rebuilds it: the summary request, the stored messages after
        it, the turn's own messages from the run state, and the instructions the turn's settings add; the
        runner's ``token_estimator`` counts it. The agent's system prompts, its own instructions and the tool
        definitions are not part of it (leave room for them in the policy's window). Stored messages or a
        run state `run_model_step` cannot read count as nothing: that call ends the turn without a model
        call anyway.

        Args:
            turn: The committed state of the turn.

        Returns:
            The estimated token count.
        """
        units, unstored = self._compaction_view(turn)
        messages = _model_history(turn, units)
        messages.extend(unstored)
        try:
            instructions = self._settings.instructions(turn.session_settings)
        except Exception:
            instructions = None  # `run_model_step` ends the turn over it, without a model call
        if instructions:
            messages.append(ModelRequest(parts=[], instructions=instructions))
        return self._token_estimator(messages)

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the last stored sequence to summarize, keeping about ``retained_token_budget`` tokens.

        A cut falls only after a whole model response, or after a request of tool results, when every tool
        call up to it has its result up to it; never between the pieces of one stored response, and never
        after the newest stored message (the turn's user message). Of those cuts it takes the earliest whose
        newer messages, with the turn's own messages in the run state, fit the budget; when none fits, the
        latest.

        Args:
            turn: The committed state of the turn.
            retained_token_budget: The tokens to keep after the cut.

        Returns:
            The sequence, or `None` when no cut is allowed.
        """
        units, unstored = self._compaction_view(turn)
        return select_cutoff(
            units,
            unstored_tokens=self._token_estimator(unstored) if unstored else 0,
            retained_token_budget=retained_token_budget,
            estimator=self._token_estimator,
        )

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make the one summary call with the turn's model and return the summary and its usage.

        The model gets `summary_instructions` and one user prompt: the previous summary under
        `CONTEXT_SUMMARY_HEADER`, then the messages to fold in as a transcript (see `_summary`). The answer's
        text is the summary; no live text events are written for it.

        Args:
            request: The messages to summarize and the summary so far.

        Returns:
            The summary and the usage of its model call.

        Raises:
            pydantic.ValidationError: If a stored message is not a Pydantic AI message.
            StoredHistoryError: If the pieces of a stored response are incomplete.
            pydantic_ai.UserError: If no model is configured, or Pydantic AI refuses the request.
            dex_agents.UnfinishedModelResponse: If the summary's stream ended before the provider said it
                finished.
        """
        chosen = self._turn_model(request.session_settings) or self._agent.model
        if chosen is None:
            raise UserError(
                "PydanticAiRunner has no model for the context summary call: give the agent a model, pass "
                "model= to the runner, or choose one with model_for_settings="
            )
        model = infer_model(chosen)
        # The answer's tokens come out of the same window as the request's.
        options: dict[str, object] = dict(self._model_settings or {})
        max_tokens = options.get("max_tokens")
        reserved = max_tokens if isinstance(max_tokens, int) else 0
        messages = summary_call_messages(
            request.previous_summary,
            history_units(request.messages),
            instructions=self._summary_instructions,
            input_token_budget=request.input_token_budget - reserved if request.input_token_budget > 0 else 0,
            estimator=self._token_estimator,
        )
        response, call_request = await make_summary_call(model, messages, self._model_settings)
        # A summary cut short would stand in for the conversation from now on.
        check_finished(response, model)
        return ContextSummaryResult(
            text=response.text or "",
            usage=_response_usage(response),
            model_call_metadata=model_call_metadata(response, model, call_request),
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the agent's real tool for one approved call, once, or the MCP source's call.

        The agent's tool runs through Pydantic AI's own pipeline (argument validation, `RunContext`,
        hooks), in this Step's asyncio context, so `dex_agents.current_tool_execution()` gives it the call
        and its idempotency key, and `ask_user_input` and `start_tool_task` reach the session (also from a
        plain `def` tool, which Pydantic AI runs in a worker thread with a copy of the context). A call the
        ``mcp_tools`` source deferred goes to the source, which sends one ``tools/call``.

        Args:
            call: The approved call.

        Returns:
            The tool's result as text; from the MCP source, also a started task.

        Raises:
            ToolExecutionError: For a failure the model should see: invalid arguments, `ModelRetry`,
                `ToolFailed`, or a tool name the agent does not have.
        """
        record = call.tool_call
        if self._mcp_tools is not None and self._mcp_tools.owns_tool_call(record):
            return await self._mcp_tools.call_tool(call)
        output = await self._tool_calls.run(
            tool_name=record.tool_name, tool_call_id=record.tool_call_id, arguments=record.arguments
        )
        return ToolExecutionResult(output)

    def agent_tool_names(self) -> frozenset[str] | None:
        """Return the names of the agent's tools as the model calls them (`ToolNamesRunner`), or `None`.

        The session checks the keys of its tool policies against them. They are read from the agent's
        toolsets (function tools, `FunctionToolset`s and `ExternalToolset`s, under the names prefixing and
        renaming give them), with the tools ``mcp_tools`` listed in this process so far;
        output tools are left out, since no policy applies to them. When a toolset lists its tools only at
        run time (Pydantic AI's MCP servers, a dynamic toolset), the agent's part is what the model
        requests of this runner in this process offered so far, and `None` before the first.

        Returns:
            The names, or `None` when they are not known yet.
        """
        names = self._declared_tool_names if self._declared_tool_names is not None else self._seen_tool_names
        if names is None or self._mcp_tools is None:
            return names
        # The source names what it listed so far; the session counts its unlisted servers' keys as real.
        return names | frozenset(self._mcp_tools.agent_tool_names())

    def describe_tool(self, tool_name: str) -> str | None:
        """Return what tool ``tool_name`` does, for tracing (`ToolDescriber`), or `None` when unknown.

        It reads the description the agent's toolsets declare (its function tools, `FunctionToolset`s and
        `ExternalToolset`s, under the names prefixing and renaming give them), then the last listing of
        ``mcp_tools``. A toolset that lists its tools only when asked (such as Pydantic AI's own MCP
        servers) is not asked: describing a span never contacts a server.

        Args:
            tool_name: The tool's name, as the model called it.

        Returns:
            The tool's description, or `None`.
        """
        description = declared_tool_description(self._agent.toolsets, tool_name)
        if description is None and self._mcp_tools is not None:
            description = self._mcp_tools.describe_tool(tool_name)
        return description

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        """Return the messages of a turn that ends without an answer, with a result for every tool call.

        The session calls it when steering or `cancel_turn` ends the turn, or when it fails, so the stored
        transcript keeps the turn's own Pydantic AI messages from the run state: the responses that asked
        for tools, and one request answering their calls from the final records, as Pydantic AI would
        have on resume. An output tool call the turn never processed gets Pydantic AI's return for an
        interrupted call. No model is called and no toolset is entered.

        Args:
            turn: The turn's committed state; every record is final.

        Returns:
            The messages in stored form; none before the turn's first tool calls.

        Raises:
            dex_agents.RunStateFormatError: If the run state is not this runner's; the session then stores
                its note instead.
        """
        if turn.framework_run_state is None:
            return []
        state = PydanticAiRunState.from_json(turn.framework_run_state)
        return project_messages(close_open_tool_calls(state.turn_messages, turn.tool_calls))

    def _tool_calls_requested(
        self,
        turn: AgentTurnContext,
        stop: _Stop,
        turn_tools: TurnTools,
        turn_messages: Sequence[ModelMessage],
        call: _ModelCall,
    ) -> ToolCallsRequested:
        """Defer every call of the response except the agent's output tools, in model order."""
        assert stop.response is not None
        deferred: list[DeferredToolCall] = []
        output_tool_call_ids: list[str] = []
        for part in stop.response.tool_calls:
            tool_def = stop.tool_defs.get(part.tool_call_id)
            if tool_def is not None and tool_def.kind == "output":
                output_tool_call_ids.append(part.tool_call_id)
                continue
            arguments = part.args_as_json_str()
            extra = turn_tools.deferred_call(
                turn,
                self._mcp_tools,
                tool_call_id=part.tool_call_id,
                tool_name=part.tool_name,
                arguments=arguments,
            )
            if extra is not None:
                deferred.append(extra)
                continue
            if tool_def is None:
                policy = UNKNOWN_TOOL_POLICY
            else:
                # Any server may annotate its tools as it likes, so they count only where the Worker's
                # code says it trusts its MCP toolsets.
                declared = annotation_policy(tool_def) if self._trust_mcp_annotations else None
                policy = turn.resolve_tool_policy(part.tool_name, framework_policy=declared)
                if tool_def.kind == "unapproved" and part.tool_name not in turn.tool_policies:
                    # The agent itself requires approval for this tool (`requires_approval=True`, an
                    # `ApprovalRequiredToolset`); only an explicit session policy may waive it.
                    policy = ToolPolicy(policy.effect, requires_approval=True)
            deferred.append(DeferredToolCall(part.tool_call_id, part.tool_name, arguments, policy))
        state = PydanticAiRunState(
            turn_messages=turn_messages, output_tool_call_ids=tuple(output_tool_call_ids)
        )
        return ToolCallsRequested(
            framework_run_state=state.to_json(),
            tool_calls=deferred,
            usage=call.usage,
            model_call_metadata=call.metadata,
        )

    def _turn_model(self, settings: Mapping[str, object]) -> Model | KnownModelName | str | None:
        return self._settings.model(settings, self._model)

    def _compaction_view(self, turn: AgentTurnContext) -> tuple[list[HistoryUnit], list[ModelMessage]]:
        """The stored messages as Pydantic AI messages, and the turn's own messages from its run state."""
        try:
            units = history_units(turn.messages)
        except (ValidationError, StoredHistoryError):
            return [], []
        if turn.framework_run_state is None:
            return units, []
        try:
            return units, list(PydanticAiRunState.from_json(turn.framework_run_state).turn_messages)
        except RunStateFormatError:
            return units, []


@dataclass
class _RequestWatch:
    """The model request step a run streamed, and when its stream began and produced its first event."""

    node: ModelRequestNode[Any, Any] | None = None
    started: float | None = None
    first_event: float | None = None
    tool_names: frozenset[str] | None = None
    """The non-output tools the model request offered."""

    def request(self) -> CallRequest | None:
        if self.node is None:
            return None
        first_chunk = (
            self.first_event - self.started
            if self.first_event is not None and self.started is not None
            else None
        )
        return CallRequest.of(self.node.last_request_context, first_chunk)


@dataclass(frozen=True)
class _ModelCall:
    """The usage and metadata of the one model call a run made, or zero usage when it made none."""

    usage: AgentUsage = field(default_factory=AgentUsage)
    metadata: ModelCallMetadata | None = None

    @classmethod
    def of(cls, run: AgentRun[Any, Any], watch: _RequestWatch) -> _ModelCall:
        responses = [message for message in run.new_messages() if isinstance(message, ModelResponse)]
        if not responses:
            return cls()
        metadata = model_call_metadata(responses[-1], run.ctx.deps.model, watch.request())
        return cls(_response_usage(responses[-1]), metadata)


def _model_history(turn: AgentTurnContext, units: Sequence[HistoryUnit]) -> list[ModelMessage]:
    """The stored part of the model input: the summary, the stored messages, and the plan note.

    The plan note goes right before the turn's first stored message, as the user's words would, so the
    earlier turns read as they did and the model reads the plan next to this turn's request.
    """
    history = [unit.message for unit in units]
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is not None:
        turn_start = min(
            (message.sequence for message in turn.messages if message.turn_id == turn.turn_id), default=None
        )
        position = len(history)
        if turn_start is not None:
            position = next(
                (index for index, unit in enumerate(units) if unit.first_sequence >= turn_start), position
            )
        history.insert(position, ModelRequest(parts=[UserPromptPart(note)]))
    if turn.context_summary is not None:
        history.insert(0, summary_request(turn.context_summary))
    return history


def _failed_turn(
    turn: AgentTurnContext,
    turn_messages: Sequence[ModelMessage],
    error: str,
    *,
    call: _ModelCall | None = None,
) -> TurnCompleted:
    """End the turn with ``error``, storing what it produced with a result for every tool call in it.

    Without messages, the session stores its turn-failure note when tool calls of the turn ran.
    """
    call = call or _ModelCall()
    return TurnCompleted(
        new_messages=project_messages(close_open_tool_calls(turn_messages, turn.tool_calls)),
        usage=call.usage,
        turn_error=error,
        model_call_metadata=call.metadata,
    )


async def _run_to_boundary(run: AgentRun[Any, Any], events: AgentEventWriter, watch: _RequestWatch) -> _Stop:
    """Drive ``run`` through at most one model request and stop at the next boundary.

    ``watch`` gets the model request step and the times of its stream, for the call's tracing metadata.
    """
    node = run.next_node
    model_requests = 0
    while True:
        if isinstance(node, End):
            return _Stop(
                _Boundary.END,
                output=cast(object, node.data.output),
                output_from_tool=node.data.tool_name is not None,
            )
        if isinstance(node, ModelRequestNode):
            if model_requests:
                return _Stop(_Boundary.OUTPUT_RETRY, feedback=node.request)
            model_requests += 1
            watch.node = node
            # The clock starts where Pydantic AI starts the request step, so the time to the first chunk
            # includes the request's preparation (instructions, tool definitions), as a user waits it.
            watch.started = time.perf_counter()
            async with node.stream(run.ctx) as stream:
                async for event in stream:
                    if watch.first_event is None:
                        watch.first_event = time.perf_counter()
                    forward_stream_event(event, events)
        elif isinstance(node, CallToolsNode) and model_requests:
            response = node.model_response
            # Before Pydantic AI takes the response as an answer or as tool calls: a stream that ended
            # without the provider saying it finished may hold half of either.
            check_finished(response, run.ctx.deps.model)
            _keep_arguments_serializable(response)
            # The tool manager was prepared for this run step before the model request, so it holds the
            # definitions the model was offered, with their kinds and MCP annotations.
            tool_manager = run.ctx.deps.tool_manager
            watch.tool_names = frozenset(
                tool_def.name for tool_def in tool_manager.tool_defs if tool_def.kind != "output"
            )
            tool_defs = {
                call.tool_call_id: tool_manager.get_tool_def(call.tool_name) for call in response.tool_calls
            }
            if any(tool_def is None or tool_def.kind != "output" for tool_def in tool_defs.values()):
                # Stop before `CallToolsNode`: running it would run the tools inside this model Step.
                return _Stop(_Boundary.TOOL_CALLS, response=response, tool_defs=tool_defs)
        node = await run.next(node)


def _keep_arguments_serializable(response: ModelResponse) -> None:
    """Turn the parsed arguments of a call that Pydantic AI cannot serialize into JSON text, in place.

    A provider whose client parses arguments hands Pydantic AI a dict, which it serializes with a nesting
    limit of its own (about 250 levels): past it, deferring and storing the call would fail the model Step
    on every attempt. As text, the call is deferred and stored like any other, and its tool Step fails it
    as nested too deeply, which the model sees.
    """
    for part in response.tool_calls:
        if not isinstance(part.args, dict):
            continue
        try:
            part.args_as_json_str()
        except PydanticSerializationError:
            try:
                part.args = json.dumps(part.args, separators=(",", ":"))
            except (RecursionError, ValueError, TypeError):
                # Deeper than the standard encoder reaches: text just as deep stands in for it.
                part.args = "[" * (MAX_JSON_NESTING_DEPTH + 1) + "]" * (MAX_JSON_NESTING_DEPTH + 1)


def _response_usage(response: ModelResponse) -> AgentUsage:
    """Return the usage of the model call that produced ``response``."""
    usage = response.usage
    return AgentUsage(
        model_calls=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.cache_read_tokens,
        reasoning_tokens=usage.details.get("reasoning_tokens", 0),
    )


def _feedback_text(feedback: ModelRequest) -> str:
    texts: list[str] = []
    for part in feedback.parts:
        if isinstance(part, RetryFeedbackPart):
            texts.append(part.model_response())
        elif isinstance(part, BaseToolReturnPart):
            texts.append(part.model_response_str(wrap_if_error=False))
    return " ".join(texts) or "Pydantic AI asked for a retry"
