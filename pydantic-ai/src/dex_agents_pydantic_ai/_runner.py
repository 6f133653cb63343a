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
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, cast

from dex_agents import (
    UNKNOWN_TOOL_POLICY,
    AgentEventWriter,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    RunStateFormatError,
    ToolCallsRequested,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
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
)
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_graph import End

from dex_agents_pydantic_ai._effects import framework_effect
from dex_agents_pydantic_ai._gate import ModelStepToolGate, ToolCallInModelStepError
from dex_agents_pydantic_ai._messages import (
    StoredHistoryError,
    build_user_framework_message,
    history_from_stored_messages,
    project_messages,
    render_output,
)
from dex_agents_pydantic_ai._recorded_results import close_open_tool_calls, deferred_tool_results
from dex_agents_pydantic_ai._state import PydanticAiRunState
from dex_agents_pydantic_ai._streaming import forward_stream_event
from dex_agents_pydantic_ai._system_prompts import system_prompt_request
from dex_agents_pydantic_ai._tool_execution import ToolCallRunner

__all__ = ["UNKNOWN_TOOL_POLICY", "PydanticAiRunner"]


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

    Args:
        agent: The agent. Its tools are offered to the model unchanged, but never run inside a model
            Step: each call runs in its own tool Step through `execute_deferred_tool_call`.
        deps: The dependencies of every run and tool call (`RunContext.deps`).
        model: A model to use instead of the agent's own, as in `Agent.run(model=...)`.
        model_settings: Model settings for every model call, as in `Agent.run(model_settings=...)`.
    """

    def __init__(
        self,
        agent: Agent[AgentDepsT, Any],
        *,
        deps: AgentDepsT | None = None,
        model: Model | KnownModelName | str | None = None,
        model_settings: ModelSettings | None = None,
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
        self._tool_calls = ToolCallRunner(agent, deps=self._deps)

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
            of the turn, or with `turn_error` when the output needs a retry.

        Raises:
            asyncio.CancelledError: When `cancel_turn` cancels the call. It reaches the model request
                Pydantic AI is awaiting, and leaving `Agent.iter()` closes the model's stream.
        """
        try:
            history = history_from_stored_messages(turn.messages)
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

        # A `UserError` is a configuration or history problem (no API key, an unknown model, a history
        # Pydantic AI refuses): every attempt would repeat it, so it ends the turn instead of failing
        # the attempt.
        try:
            system_prompts = await system_prompt_request(self._agent, deps=self._deps, model=self._model)
            if system_prompts is not None:
                history.insert(0, system_prompts)
            async with self._agent.iter(
                message_history=history,
                deferred_tool_results=results,
                deps=self._deps,
                model=self._model,
                model_settings=self._model_settings,
                capabilities=[ModelStepToolGate()],
            ) as run:
                try:
                    stop = await _run_to_boundary(run, turn.events)
                except UserError as error:
                    return _failed_turn(
                        turn,
                        [*earlier_turn_messages, *run.new_messages()],
                        f"Pydantic AI refused the run: {error}",
                        usage=_model_call_usage(run.new_messages()),
                    )
                except ToolCallInModelStepError as error:
                    # Every attempt would reach the same call. The response that asked for it stays out
                    # of the stored history: none of its calls ran.
                    return _failed_turn(
                        turn, earlier_turn_messages, str(error), usage=_model_call_usage(run.new_messages())
                    )
                new_messages = run.new_messages()
        except UserError as error:
            return _failed_turn(turn, earlier_turn_messages, f"Pydantic AI refused the run: {error}")
        usage = _model_call_usage(new_messages)
        turn_messages = [*earlier_turn_messages, *new_messages]

        if stop.boundary is _Boundary.TOOL_CALLS:
            return _tool_calls_requested(turn, stop, turn_messages, usage)
        if stop.boundary is _Boundary.OUTPUT_RETRY:
            assert stop.feedback is not None
            # The feedback answers the response's output tool calls, so the next turn's model sees it.
            return _failed_turn(
                turn,
                [*turn_messages, stop.feedback],
                "The model's answer could not be used as the agent's output, and retrying it would take "
                f"another model call: {_feedback_text(stop.feedback)}",
                usage=usage,
            )
        if isinstance(stop.output, DeferredToolRequests):
            return _failed_turn(
                turn,
                turn_messages,
                "Pydantic AI deferred tool calls while it resumed the turn; the runner defers every call",
                usage=usage,
            )
        # Output that came through an output tool call is not in any text part, so it becomes part of the
        # final response's display text.
        output_text = render_output(stop.output) if stop.output_from_tool else None
        return TurnCompleted(
            new_messages=project_messages(turn_messages, output_text=output_text), usage=usage
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Run the agent's real tool for one approved call, once.

        The tool runs through Pydantic AI's own pipeline (argument validation, `RunContext`, hooks), and
        `dex_agents.current_tool_execution()` gives it the call and its idempotency key.

        Args:
            call: The approved call.

        Returns:
            The tool's result as text.

        Raises:
            ToolExecutionError: For a failure the model should see: invalid arguments, `ModelRetry`,
                `ToolFailed`, or a tool name the agent does not have.
        """
        record = call.tool_call
        output = await self._tool_calls.run(
            tool_name=record.tool_name, tool_call_id=record.tool_call_id, arguments=record.arguments
        )
        return ToolExecutionResult(output)

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


def _failed_turn(
    turn: AgentTurnContext,
    turn_messages: Sequence[ModelMessage],
    error: str,
    *,
    usage: AgentUsage | None = None,
) -> TurnCompleted:
    """End the turn with ``error``, storing what it produced with a result for every tool call in it.

    Without messages, the session stores its turn-failure note when tool calls of the turn ran.
    """
    return TurnCompleted(
        new_messages=project_messages(close_open_tool_calls(turn_messages, turn.tool_calls)),
        usage=usage or AgentUsage(),
        turn_error=error,
    )


def _tool_calls_requested(
    turn: AgentTurnContext, stop: _Stop, turn_messages: Sequence[ModelMessage], usage: AgentUsage
) -> ToolCallsRequested:
    """Defer every call of the response except the agent's output tools, in model order."""
    assert stop.response is not None
    deferred: list[DeferredToolCall] = []
    output_tool_call_ids: list[str] = []
    for call in stop.response.tool_calls:
        tool_def = stop.tool_defs.get(call.tool_call_id)
        if tool_def is not None and tool_def.kind == "output":
            output_tool_call_ids.append(call.tool_call_id)
            continue
        if tool_def is None:
            policy = UNKNOWN_TOOL_POLICY
        else:
            policy = turn.resolve_tool_policy(call.tool_name, framework_effect(tool_def))
            if tool_def.kind == "unapproved" and call.tool_name not in turn.tool_policies:
                # The agent itself requires approval for this tool (`requires_approval=True`, an
                # `ApprovalRequiredToolset`); only an explicit session policy may waive it.
                policy = ToolPolicy(policy.effect, requires_approval=True)
        deferred.append(DeferredToolCall(call.tool_call_id, call.tool_name, call.args_as_json_str(), policy))
    state = PydanticAiRunState(turn_messages=turn_messages, output_tool_call_ids=tuple(output_tool_call_ids))
    return ToolCallsRequested(framework_run_state=state.to_json(), tool_calls=deferred, usage=usage)


async def _run_to_boundary(run: AgentRun[Any, Any], events: AgentEventWriter) -> _Stop:
    """Drive ``run`` through at most one model request and stop at the next boundary."""
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
            async with node.stream(run.ctx) as stream:
                async for event in stream:
                    forward_stream_event(event, events)
        elif isinstance(node, CallToolsNode) and model_requests:
            # The tool manager was prepared for this run step before the model request, so it holds the
            # definitions the model was offered, with their kinds and MCP annotations.
            tool_manager = run.ctx.deps.tool_manager
            response = node.model_response
            tool_defs = {
                call.tool_call_id: tool_manager.get_tool_def(call.tool_name) for call in response.tool_calls
            }
            if any(tool_def is None or tool_def.kind != "output" for tool_def in tool_defs.values()):
                # Stop before `CallToolsNode`: running it would run the tools inside this model Step.
                return _Stop(_Boundary.TOOL_CALLS, response=response, tool_defs=tool_defs)
        node = await run.next(node)


def _model_call_usage(new_messages: Sequence[ModelMessage]) -> AgentUsage:
    """Return the usage of the one model call among ``new_messages``, or zero when none was made."""
    responses = [message for message in new_messages if isinstance(message, ModelResponse)]
    if not responses:
        return AgentUsage()
    usage = responses[-1].usage
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
