"""`GoogleAdkRunner`: the session's runner contract for a Google ADK `App` or agent.

One `run_model_step` runs the user's application with an ADK `Runner` over a fresh in-memory session
service, restored from the stored messages (and, mid-turn, from the framework run state), and lets ADK
make exactly one model call:

- the response asks for tools: the adapter's gate plugin (`DexToolGate`) asks ADK for a confirmation of
  every call instead of running it, and ADK pauses the invocation. The invocation's events go into the
  framework run state, and every call becomes a `DeferredToolCall`;
- the response is the final answer: the invocation ends and the turn's messages are stored;
- the response transfers to another agent (`transfer_to_agent` alone): the gate carries the transfer out,
  the runner stops before ADK runs the target agent, and the turn continues (`TurnContinued`) with the
  paused invocation's events, from which ADK resumes the target agent in the next Step.

The next `run_model_step` of the turn resumes the paused invocation through ADK's own mechanism: a user
message of `adk_request_confirmation` responses, each carrying the call's recorded result (a rejection
with its message, a failure or unknown outcome with the session's text), which the gate hands to ADK as
the tool's answer before ADK makes the next model call itself.

Besides the application's own tools, every `LlmAgent` of the Step's agent tree is offered the session's
enabled built-ins and the tools of the runner's `McpToolSource`, as declared ADK tools (`_turn_tools`);
their calls are deferred like any other, the session carries out the built-ins' calls, and the source runs
its calls in their tool Steps. The turn's session settings may choose the root agent's model and add
instructions (`_settings`).

A valid structured answer (ADK's `set_model_response`, see `_structured_answer`) ends the turn as ADK
ends it. When it came alone, the model Step completes the turn. When it came next to other tool calls,
those calls are deferred as usual, and the Step that resumes the turn completes it with their recorded
results and the structured answer, without running ADK again: ADK makes no model call after a structured
answer either.

A turn that ends without an answer (it failed, or steering or `cancel_turn` ended it) keeps its items:
`build_unfinished_turn_messages` projects the paused invocation's events with every call's recorded
result. `cancel_turn` cancels the `run_model_step` coroutine while it waits for ADK's next event; ADK's
`Runner.run_async` runs the agent in a task of its own and cancels that task when its consumer stops, so
the model's streaming call is cancelled at its current `await` and its response stream closed.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, cast

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BUILT_IN_TOOL_NAMES,
    WRITE_TODOS,
    ContextSummaryRequest,
    ContextSummaryResult,
    ContextWindowExceeded,
    DeferredToolOutcome,
    ModelCallMetadata,
    ToolTaskCancellation,
    ToolTaskHandlers,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskRouter,
    build_plan_note,
    context_summary_text,
    is_context_window_refusal,
    provider_refusal,
)
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolExecutionResult,
    TurnCompleted,
    TurnContinued,
)
from dex_agents.values import AgentMessage, AgentUsage, FrameworkMessage, InteractionMode, MessageRole

# ADK 2 deprecates its workflow agents in favour of its Workflow; applications still compose with them.
from google.adk.agents import (
    BaseAgent,
    LlmAgent,
    LoopAgent,  # pyright: ignore[reportDeprecated]
    ParallelAgent,  # pyright: ignore[reportDeprecated]
    SequentialAgent,  # pyright: ignore[reportDeprecated]
)
from google.adk.agents.run_config import (
    RunConfig,
    StreamingMode,  # pyright: ignore[reportPrivateImportUsage]
)
from google.adk.apps import App
from google.adk.code_executors.built_in_code_executor import BuiltInCodeExecutor
from google.adk.events import Event
from google.adk.sessions import InMemorySessionService
from google.adk.tools.set_model_response_tool import SetModelResponseTool
from google.genai import types

from dex_agents_google_adk._adk_patches import skip_failing_a2a_import
from dex_agents_google_adk._app import (
    AdkServices,
    agent_tool_names,
    close_toolsets,
    declared_tool_description,
    iter_agents,
    resumable_app,
    step_root_agent,
)
from dex_agents_google_adk._call_metadata import (
    code_text,
    model_call_metadata,
    model_call_usage,
    terminal_model_error,
)
from dex_agents_google_adk._compaction import (
    estimate_event_tokens,
    estimate_text_tokens,
    select_cutoff,
    summarize,
    summary_model,
)
from dex_agents_google_adk._effects import annotation_policy
from dex_agents_google_adk._gate import DexToolGate, NextModelCallBoundary
from dex_agents_google_adk._litellm_answers import watching_litellm_answers
from dex_agents_google_adk._messages import (
    REQUEST_CONFIRMATION_FUNCTION_NAME,
    build_user_event,
    encode_event,
    events_from_stored_messages,
    project_turn_events,
    text_of,
    user_content_of,
)
from dex_agents_google_adk._recorded_results import (
    recorded_confirmations,
    recorded_outputs,
    with_recorded_results,
)
from dex_agents_google_adk._settings import (
    InstructionsForSettings,
    ModelForSettings,
    TurnChoices,
    choose_for_turn,
)
from dex_agents_google_adk._state import GoogleAdkRunState
from dex_agents_google_adk._structured_answer import SET_MODEL_RESPONSE, find_structured_answer
from dex_agents_google_adk._tool_execution import TRANSFER_TO_AGENT, run_tool_call
from dex_agents_google_adk._turn_tools import DeclaredTool

if TYPE_CHECKING:
    # `dex_agents.mcp` needs the `mcp` extra; a runner without a source never imports it.
    from dex_agents.mcp import McpToolSource

__all__ = ["AGENT_TRANSFER_EVENT_TYPE", "DEFAULT_USER_ID", "UNKNOWN_TOOL_POLICY", "GoogleAdkRunner"]

DEFAULT_USER_ID = "dex"
"""The ADK user ID of every session unless the runner is given another."""
AGENT_TRANSFER_EVENT_TYPE = "google_adk.agent_transfer"
"""The session event of an ADK agent transfer; its payload names the ``source_agent`` and ``target_agent``."""


class GoogleAdkRunner:
    """Runs a Google ADK application inside a durable Dex agent session, one Step per model and tool call.

    Give it the `App` or root agent you already have, with its ordinary tools, toolsets and plugins; the
    session turns every tool call into its own Step. Keep the runner stateless: a Worker builds it once
    and the session calls it from any Step, in any process.

    Args:
        app_or_agent: The application, or its root agent (then the application is named after it). No
            agent of its tree may have a `code_executor` that runs code outside the model provider.
        user_id: The ADK user ID of every session (`Context.user_id` in tools and callbacks).
        run_config: ADK's run configuration for model Steps; by default SSE streaming, so text deltas
            reach the session's event stream while the model writes.
        services: ADK services (`artifact_service`, `memory_service`, `credential_service`) for every
            Step. The session service is always a fresh in-memory one per Step, restored from the
            session's stored messages; give persistent services here when tools need artifacts, memory or
            credentials across Steps and Worker processes.
        model_for_settings: Chooses each turn's model from the session settings the turn started with
            (`AgentTurnContext.session_settings`): a model name ADK knows or a `BaseLlm`, which replaces
            the root agent's model for the turn (an `LlmAgent` root only); `None` keeps the agent's own.
        instructions_for_settings: Returns instructions that every model request of a turn gets after the
            agent's own, from the turn's session settings; `None` adds none.
        mcp_tools: An `McpToolSource` (`dex_agents.mcp`, the ``mcp`` extra) whose servers' tools every
            `LlmAgent` is offered next to its own; each call runs in its tool Step through the source,
            with the session's idempotency key, and the source polls and cancels the MCP tasks its calls
            start.
        tool_tasks: Polls and cancels the remote tasks your own tools start with
            `dex_agents.start_tool_task`, by tool name.
        patch_adk: Apply the adapter's work-around for ADK's import of an optional module on every
            invocation (``dex_agents_google_adk/_adk_patches.py``): process-wide, only for the ADK release
            it was written for, and only when that module cannot be imported anyway.
        trust_mcp_annotations: Whether the MCP annotations of ADK's `McpToolset` tools
            (`McpTool.raw_mcp_tool`) decide the policies of tools the session has no `ToolPolicy` for, as
            `dex_agents.policy_from_mcp_annotations` maps them: ``readOnlyHint`` is a `read`,
            ``idempotentHint`` an `idempotent_write`, and a destructive tool still asks for approval. Off by
            default, since any server may claim anything: the tools then take the session's
            ``default_tool_effect``. Turn it on only when you trust every MCP server the agents use.
            ``mcp_tools`` has its own switch per server (``trust_annotations``).

    Raises:
        TypeError: An agent's `code_executor` runs model-written code itself (anything but
            `BuiltInCodeExecutor`).
    """

    poll_tool_task: Callable[[ToolTaskPoll], Awaitable[ToolTaskPollOutcome]]
    """Polls a started task (`ToolTaskPoller`); present only with ``tool_tasks`` or ``mcp_tools``."""
    cancel_tool_task: Callable[[ToolTaskCancellation], Awaitable[None]]
    """Cancels an abandoned task (`ToolTaskCanceller`); present only with ``tool_tasks`` or ``mcp_tools``."""

    def __init__(
        self,
        app_or_agent: App | BaseAgent,
        *,
        user_id: str = DEFAULT_USER_ID,
        run_config: RunConfig | None = None,
        services: AdkServices | None = None,
        model_for_settings: ModelForSettings | None = None,
        instructions_for_settings: InstructionsForSettings | None = None,
        mcp_tools: McpToolSource | None = None,
        tool_tasks: ToolTaskHandlers | None = None,
        patch_adk: bool = True,
        trust_mcp_annotations: bool = False,
    ) -> None:
        if isinstance(app_or_agent, App):
            self._app = app_or_agent
        else:
            self._app = App(name=app_or_agent.name, root_agent=app_or_agent)
        _refuse_local_code_executors(cast(BaseAgent, self._app.root_agent))
        self._resumes_next_model_call = _resumable_tree(cast(BaseAgent, self._app.root_agent))
        if patch_adk:
            skip_failing_a2a_import()
        self._user_id = user_id
        self._run_config = run_config or RunConfig(streaming_mode=StreamingMode.SSE)
        self._services = services or AdkServices()
        self._model_for_settings = model_for_settings
        self._instructions_for_settings = instructions_for_settings
        self._mcp = mcp_tools
        self._trust_mcp_annotations = trust_mcp_annotations
        # A started task's poll and cancel go to the MCP source that owns its call, else to `tool_tasks`.
        tasks = ToolTaskRouter(
            "GoogleAdkRunner", "tool_tasks", tool_tasks, sources=() if mcp_tools is None else (mcp_tools,)
        )
        if tasks.can_poll:
            # The session offers tools a task only when the runner polls them (`supports_tool_tasks`), so
            # without anything to poll with, a tool finishes its work inside the call instead.
            self.poll_tool_task = tasks.poll_tool_task
            self.cancel_tool_task = tasks.cancel_tool_task

    @property
    def supports_plan_mode(self) -> bool:
        """`True`: a planning turn offers every agent's model only ``write_todos``, and a plan is shown.

        The gate leaves only ``write_todos`` in each model request of a `planning` turn (enable it in
        the session's built-in tools), and puts `dex_agents.build_plan_note` before the turn's user
        message as user text whenever the session has a plan or the turn plans.
        """
        return True

    @property
    def app(self) -> App:
        """The application this runner drives."""
        return self._app

    async def close(self) -> None:
        """Close the application's toolsets, such as the MCP sessions its tools opened.

        Steps share the application's toolsets, as the calls of one ADK `Runner` do, and leave them open
        between Steps: call this when the Worker shuts down.
        """
        await close_toolsets(cast(BaseAgent, self._app.root_agent))

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user message holding ``text`` as the ADK user event a `Runner` would append."""
        return FrameworkMessage(
            role=MessageRole.USER, framework_item=encode_event(build_user_event(text)), text=text
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Let the application make one model call and return what the session does next.

        Args:
            turn: The committed state of the turn.

        Returns:
            `ToolCallsRequested` when the model asked for tools, else `TurnCompleted` with every message
            of the turn, or with `turn_error` for a failure that a retry would only repeat.
        """
        turn_message = _turn_user_message(turn)
        if turn_message is None:
            return TurnCompleted(new_messages=(), turn_error="the turn has no user message to answer")
        state: GoogleAdkRunState | None = None
        if turn.framework_run_state is not None:
            try:
                state = GoogleAdkRunState.from_json(turn.framework_run_state)
            except ValueError as error:
                return TurnCompleted(new_messages=(), turn_error=str(error))
            if find_structured_answer(state.turn_events) is not None:
                return _finish_with_structured_answer(state, turn)
        declared_tools = await self._declared_tools(turn)
        try:
            choices = choose_for_turn(
                turn.session_settings, self._model_for_settings, self._instructions_for_settings
            )
            root = step_root_agent(
                cast(BaseAgent, self._app.root_agent), extra_tools=declared_tools, model=choices.model
            )
        except Exception as error:
            # The settings stay the same on every attempt of the turn, so a retry would fail alike.
            return TurnCompleted(
                new_messages=(),
                turn_error="the session settings chose no usable model or instructions: "
                f"{type(error).__name__}: {error}",
            )
        return await self._run_adk(turn, turn_message, state, root, choices)

    async def _run_adk(
        self,
        turn: AgentTurnContext,
        turn_message: AgentMessage,
        state: GoogleAdkRunState | None,
        root: BaseAgent,
        choices: TurnChoices,
    ) -> AgentTurnOutcome:
        """Run one model call of ``root`` in a fresh session service restored from the session."""
        earlier = [message for message in turn.messages if message is not turn_message]
        gate = DexToolGate(
            turn.events,
            frozenset(turn.tool_calls),
            choices.instructions,
            # As ADK decides whether it calls the model with stream=True.
            is_streaming=self._run_config.streaming_mode == StreamingMode.SSE,
            resumes_next_model_call=self._resumes_next_model_call,
            # A planning turn offers only write_todos; any turn with a plan shows it before its message.
            only_tools=frozenset({WRITE_TODOS})
            if turn.interaction_mode is InteractionMode.PLANNING
            else None,
            plan_note=build_plan_note(turn.plan, turn.interaction_mode),
            turn_text=turn_message.text,
        )
        app = resumable_app(self._app.model_copy(update={"root_agent": root}), [gate])
        service = InMemorySessionService()
        runner = self._services.runner(app, service)
        session = await service.create_session(
            app_name=app.name, user_id=self._user_id, session_id=turn.flow_id
        )
        if turn.context_summary is not None:
            # The session compacted: ADK reads the summary as the conversation's first user message.
            await service.append_event(session, build_user_event(context_summary_text(turn.context_summary)))
        for event in events_from_stored_messages(earlier):
            await service.append_event(session, event)
        turn_start = len(session.events)
        if state is None:
            new_message: types.Content | None = user_content_of(turn_message)
            invocation_id: str | None = None
        else:
            answered_in_model_step = set(state.unknown_tool_call_ids) | {
                response.id
                for event in state.turn_events
                for response in event.get_function_responses()
                if response.name == SET_MODEL_RESPONSE and response.id
            }
            for event in with_recorded_results(state.turn_events, turn, answered_in_model_step):
                await service.append_event(session, event)
            new_message = recorded_confirmations(state, turn)
            invocation_id = state.invocation_id
        invocation_events: list[Event] = []
        model_error: Event | None = None
        try:
            with watching_litellm_answers():
                async for event in runner.run_async(
                    user_id=self._user_id,
                    session_id=turn.flow_id,
                    invocation_id=invocation_id,
                    new_message=new_message,
                    run_config=self._run_config,
                ):
                    if event.error_code is not None and not event.partial:
                        # Stop at once: an agent that goes on after the failed call would make a second
                        # model call, whose refusal would hide this error.
                        model_error = event
                        break
                    if not event.partial:
                        invocation_events.append(event)
                    if gate.transfer_target is not None and event.actions.transfer_to_agent:
                        # ADK would now run the target agent, whose model call is the next Step's; the
                        # event is in the session already, and resuming the invocation runs that agent.
                        break
        except NextModelCallBoundary:
            # ADK has stored the agent states that resume the tree at the next model call (a
            # SequentialAgent's next sub-agent); that call is the next Step's.
            pass
        except Exception as error:
            if gate.model_requests > 1 or gate.refused_confirmation is not None:
                return TurnCompleted(new_messages=(), turn_error=str(error))
            return _failed_model_call(error)
        if gate.refused_confirmation is not None:
            # ADK reports the gate's refusal as an error event; a retry would meet the same confirmation.
            return TurnCompleted(new_messages=(), turn_error=str(gate.refused_confirmation))
        if model_error is not None and gate.model_exception is not None:
            # ADK reported the model client's exception as an error event that names only its type.
            return _failed_model_call(gate.model_exception)
        if model_error is not None:
            # A failed model call was still a model call, unless a callback answered with the error.
            model_called = gate.final_response is not None
            usage = model_call_usage(model_error) if model_called else AgentUsage()
            metadata = _metadata(gate, root, model_error) if model_called else None
            turn_error = terminal_model_error(model_error)
            if turn_error is None:
                # Transient or unknown: fail the Step, and `RunModel` retries the call.
                code = code_text(model_error.error_code)
                message = model_error.error_message or ""
                raise RuntimeError(f"the model call failed: {code}{': ' + message if message else ''}")
            return TurnCompleted(
                new_messages=(), usage=usage, turn_error=turn_error, model_call_metadata=metadata
            )

        stored = await service.get_session(app_name=app.name, user_id=self._user_id, session_id=turn.flow_id)
        if stored is None:
            raise RuntimeError(f"Google ADK lost session {turn.flow_id!r} during the model call")
        turn_events = list(stored.events[turn_start:])
        structured_answer = find_structured_answer(invocation_events)
        last_response = next(
            (
                event
                for event in reversed(invocation_events)
                if _is_model_response(event) and event is not structured_answer
            ),
            None,
        )
        if last_response is None:
            raise RuntimeError("Google ADK finished the model Step without a model response")
        gate.take_response(last_response)
        # A response an agent callback gave instead of the model is not a model call.
        if gate.answered_by_callback:
            usage, metadata = AgentUsage(), None
        else:
            usage, metadata = model_call_usage(last_response), _metadata(gate, root, last_response)
        if not gate.streamed_text:
            # A model that does not stream (or a non-streaming run_config) still shows its text live.
            turn.events.write_text_delta(text_of(last_response.content))
        deferred = self._deferred_calls(turn, gate)
        if deferred:
            return self._tool_calls_requested(gate, deferred, turn_events, state, usage, metadata)
        if gate.stopped_before_next_model_call and gate.transfer_target is None:
            if structured_answer is not None:
                turn.events.write_text_delta(text_of(structured_answer.content))
            return TurnContinued(
                framework_run_state=_paused_state(gate, turn_events, state).to_json(),
                usage=usage,
                model_call_metadata=metadata,
            )
        if gate.transfer_target is not None:
            turn.events.write_event(
                AGENT_TRANSFER_EVENT_TYPE,
                {"source_agent": last_response.author, "target_agent": gate.transfer_target},
            )
            return TurnContinued(
                framework_run_state=_paused_state(gate, turn_events, state).to_json(),
                usage=usage,
                model_call_metadata=metadata,
            )
        if structured_answer is not None:
            turn.events.write_text_delta(text_of(structured_answer.content))
        # The first event of the invocation is the turn's user message, which the session stored already.
        return TurnCompleted(
            new_messages=project_turn_events(turn_events[1:], recorded_outputs(turn)),
            usage=usage,
            model_call_metadata=metadata,
        )

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the items of a turn that ends without an answer, each tool call with its recorded result.

        The session calls it when a turn fails, is steered or is cancelled. The paused invocation's events
        in the run state are the turn's items; each call's answer is replaced by its final record, as the
        next model call would have seen it, and the events are projected as a completed turn's are. No
        model is called and no tool runs.

        Args:
            turn: The turn's committed state, every record final.

        Returns:
            The turn's messages after its user message; none before the turn's first tool calls.

        Raises:
            dex_agents.RunStateFormatError: If another runner wrote the run state; the session then
                stores its note instead.
        """
        if turn.framework_run_state is None:
            return ()
        state = GoogleAdkRunState.from_json(turn.framework_run_state)
        events = with_recorded_results(state.turn_events, turn, set(turn.tool_calls))
        # The first event of the invocation is the turn's user message, which the session stored already.
        return project_turn_events(events[1:], recorded_outputs(turn))

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run the application's real tool for one approved call, once.

        The tool runs through ADK's own pipeline (plugin and agent tool callbacks, error callbacks,
        `ToolContext`), and `dex_agents.current_tool_execution()` gives it the call and its idempotency
        key, so it may also ask the user (`dex_agents.ask_user_input`) or hand over a remote task
        (`dex_agents.start_tool_task`). A call of an `McpToolSource` tool runs through the source instead:
        one ``tools/call`` on a new connection.

        Args:
            call: The approved call.

        Returns:
            The tool's result as text, or the MCP source's outcome (a result, or a task it started).

        Raises:
            ToolExecutionError: For a failure the model should see, such as a tool name the agent does not
                have.
        """
        record = call.tool_call
        if self._mcp is not None and self._mcp.owns_tool_call(record):
            return await self._mcp.call_tool(call)
        output = await run_tool_call(
            self._app,
            self._services,
            run_config=self._run_config,
            user_id=self._user_id,
            session_id=call.flow_id,
            agent_name=_agent_name(record.tool_source_reference),
            tool_name=record.tool_name,
            tool_call_id=record.tool_call_id,
            arguments=record.arguments,
        )
        return ToolExecutionResult(output)

    def agent_tool_names(self) -> Collection[str] | None:
        """Return the names of the application's own tools, for checking the session's tool policies.

        Every `LlmAgent` of the tree counts, by the name its model calls the tool (a plain function's
        name, as ADK's `FunctionTool` gives it). Nothing is contacted: an agent with a toolset (such as
        ADK's `McpToolset`) makes the answer `None`, since its tools are known only once it runs. The
        session adds its built-ins and the ``mcp_tools`` source's tools itself.

        Returns:
            The tool names, or `None` when a toolset's tools are known only at run time.
        """
        return agent_tool_names(cast(BaseAgent, self._app.root_agent))

    def describe_tool(self, tool_name: str) -> str | None:
        """Return what tool ``tool_name`` does, for tracing (`ToolDescriber`), or `None` when unknown.

        It gives the `BaseTool.description` of the first agent's tool by that name (a plain function's
        docstring, as ADK's `FunctionTool` reads it), else the last listing of ``mcp_tools``. Toolsets,
        such as ADK's `McpToolset`, are not asked: describing a span never contacts a server.

        Args:
            tool_name: The tool's name, as the model called it.

        Returns:
            The tool's description, or `None`.
        """
        description = declared_tool_description(cast(BaseAgent, self._app.root_agent), tool_name)
        if description is None and self._mcp is not None:
            description = self._mcp.describe_tool(tool_name)
        return description

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Return the estimated tokens of the next model call's input (`ContextCompactionRunner`).

        It counts the summary, the stored messages after it, the turn's events in the run state and the
        root agent's instruction, a token per four characters; tool definitions are not counted. No
        model call is made.
        """
        texts: list[str] = []
        if turn.context_summary is not None:
            texts.append(context_summary_text(turn.context_summary))
        root = cast(BaseAgent, self._app.root_agent)
        if isinstance(root, LlmAgent) and isinstance(root.instruction, str):
            texts.append(root.instruction)
        return (
            estimate_text_tokens(texts)
            + estimate_event_tokens(events_from_stored_messages(turn.messages))
            + self._unstored_tokens(turn)
        )

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the last stored message to summarize, or `None` (`ContextCompactionRunner`).

        The cut follows a whole ADK event with every tool call up to it answered, before the turn's own
        user message, and keeps about ``retained_token_budget`` tokens of the newest messages.
        """
        turn_message = _turn_user_message(turn)
        if turn_message is None:
            return None
        return select_cutoff(
            turn.messages,
            turn_message,
            unstored_tokens=self._unstored_tokens(turn),
            budget=retained_token_budget,
        )

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make the one summary call with the root agent's own model (`ContextCompactionRunner`).

        The model gets the core's summary instructions and one user prompt: the previous summary, then the
        messages as a transcript that names the agent of each line. Its text becomes the session's summary,
        which every later model Step shows ADK as the first user event of its session.

        Raises:
            RuntimeError: The call failed or returned no text; the `CompactContext` Step retries it.
        """
        model = summary_model(cast(BaseAgent, self._app.root_agent))
        response, llm_request = await summarize(
            model, request.messages, request.previous_summary, request.input_token_budget
        )
        return ContextSummaryResult(
            text=text_of(response.content),
            usage=model_call_usage(response),
            model_call_metadata=model_call_metadata(llm_request, response, model),
        )

    def _unstored_tokens(self, turn: AgentTurnContext) -> int:
        """The tokens of the turn's events in the run state, after its stored user message."""
        if turn.framework_run_state is None:
            return 0
        try:
            state = GoogleAdkRunState.from_json(turn.framework_run_state)
        except ValueError:
            return 0
        return estimate_event_tokens(state.turn_events[1:])

    async def _declared_tools(self, turn: AgentTurnContext) -> list[DeclaredTool]:
        """The tools a model Step adds to the application's own: the MCP source's, then the built-ins."""
        built_ins = [name for name in BUILT_IN_TOOL_NAMES if name in turn.enabled_built_in_tools]
        tools: list[DeclaredTool] = []
        if self._mcp is not None:
            listed = await self._mcp.list_tools()
            # An enabled built-in's name is the built-in's.
            tools.extend(
                DeclaredTool(
                    name=tool.name,
                    description=tool.description,
                    parameters_json_schema=tool.input_schema,
                    kind="mcp",
                )
                for tool in listed
                if tool.name not in built_ins
            )
            names = {tool.name for tool in listed}
            # A call of the turn to a tool the server no longer lists (it could not be listed again after
            # a Worker restart) still needs an ADK tool to hand its recorded result to.
            tools.extend(
                DeclaredTool(name=record.tool_name, description="", parameters_json_schema=None, kind="mcp")
                for record in turn.tool_calls.values()
                if record.tool_name not in names and self._mcp.owns_tool_call(record)
            )
        for name in built_ins:
            definition = BUILT_IN_TOOL_DEFINITIONS[name]
            tools.append(
                DeclaredTool(
                    name=name,
                    description=definition.description,
                    parameters_json_schema=definition.parameters_json_schema,
                    kind="built_in",
                )
            )
        return tools

    def _deferred_calls(self, turn: AgentTurnContext, gate: DexToolGate) -> list[DeferredToolCall]:
        """Return a `DeferredToolCall` for every call of the response that needs a tool Step."""
        deferred: list[DeferredToolCall] = []
        for call in gate.tool_calls:
            arguments = json.dumps(dict(call.arguments), ensure_ascii=False, sort_keys=True)
            if isinstance(call.tool, DeclaredTool) and call.tool.kind == "mcp" and self._mcp is not None:
                # The source resolves the policy from the tool's annotations and names its server.
                deferred.append(
                    self._mcp.deferred_tool_call(
                        turn, tool_call_id=call.tool_call_id, tool_name=call.tool_name, arguments=arguments
                    )
                )
                continue
            if call.tool is None:
                policy = UNKNOWN_TOOL_POLICY
            elif isinstance(call.tool, SetModelResponseTool):
                if call.tool_call_id not in gate.invalid_structured_answers:
                    continue  # A valid structured answer: ADK has made it the turn's final answer.
                # Its tool Step only checks the answer again and records the error the model reads.
                policy = UNKNOWN_TOOL_POLICY
            elif call.tool_name == TRANSFER_TO_AGENT:
                if gate.transfer_target is not None:
                    continue  # Carried out in the model Step; the next Step runs the target agent.
                # Not carried out (next to other calls, or to an agent it may not reach): its tool Step
                # only records why, for the model to read; nothing runs.
                policy = UNKNOWN_TOOL_POLICY
            else:
                # A built-in's policy is the session's own; it replaces this one.
                # Any MCP server may annotate its tools as it likes, so an `McpToolset`'s annotations
                # count only where the Worker's code says it trusts them.
                declared = annotation_policy(call.tool) if self._trust_mcp_annotations else None
                policy = turn.resolve_tool_policy(call.tool_name, framework_policy=declared)
                if (
                    call.tool_call_id in gate.confirmation_required
                    and call.tool_name not in turn.tool_policies
                ):
                    # ADK's own `require_confirmation` becomes the session's approval, which survives
                    # restarts; an explicit policy still decides.
                    policy = dataclasses.replace(policy, requires_approval=True)
            deferred.append(
                DeferredToolCall(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    arguments=arguments,
                    policy=policy,
                    tool_source_reference=json.dumps({"agent": call.agent_name}),
                )
            )
        return deferred

    def _tool_calls_requested(
        self,
        gate: DexToolGate,
        deferred: Sequence[DeferredToolCall],
        turn_events: Sequence[Event],
        earlier_state: GoogleAdkRunState | None,
        usage: AgentUsage,
        metadata: ModelCallMetadata | None,
    ) -> ToolCallsRequested:
        return ToolCallsRequested(
            framework_run_state=_paused_state(gate, turn_events, earlier_state).to_json(),
            tool_calls=deferred,
            usage=usage,
            model_call_metadata=metadata,
        )


def _paused_state(
    gate: DexToolGate, turn_events: Sequence[Event], earlier_state: GoogleAdkRunState | None
) -> GoogleAdkRunState:
    """The run state of the invocation this Step leaves paused: its events, and its unknown tool calls."""
    unknown = [
        *(earlier_state.unknown_tool_call_ids if earlier_state else ()),
        *(call.tool_call_id for call in gate.tool_calls if call.tool is None),
    ]
    return GoogleAdkRunState(
        invocation_id=turn_events[0].invocation_id,
        turn_events=turn_events,
        unknown_tool_call_ids=tuple(unknown),
    )


def _failed_model_call(error: Exception) -> TurnCompleted:
    """End the turn for a provider's refusal that every attempt would meet; otherwise re-raise ``error``.

    Raises:
        ContextWindowExceeded: The provider refused the input as longer than the context window; the
            session compacts or ends the turn saying so.
        Exception: ``error`` itself, for a rate limit, a 5xx, a cut or unfinished answer or a timeout:
            ``RunModel`` makes a new attempt (after the provider's ``Retry-After``, read from ``error``),
            whose text replaces this attempt's.
    """
    if is_context_window_refusal(error):
        raise ContextWindowExceeded(str(error)) from error
    refusal = provider_refusal(error)
    if refusal is None:
        raise error
    # A bad request, a wrong key or model name: every attempt would get the same answer.
    return TurnCompleted(new_messages=(), turn_error=refusal)


def _metadata(gate: DexToolGate, root: BaseAgent, response: Event) -> ModelCallMetadata:
    """The tracing metadata of the Step's model call, from ADK's request and the response event."""
    agent = root.find_agent(response.author)
    model = agent.canonical_model if isinstance(agent, LlmAgent) else None
    return model_call_metadata(gate.request, response, model, gate.timing)


def _resumable_tree(root: BaseAgent) -> bool:
    """Whether ADK resumes every agent of the tree at its next model call from the recorded agent states.

    `LlmAgent` and `SequentialAgent` record where they are (`SequentialAgentState.current_sub_agent`) and
    resume there, so a Step may stop before the next model call and the next Step resume the invocation.

    Raises:
        TypeError: The tree has a `ParallelAgent` (its branches call their models at the same time, in one
            Step) or a `LoopAgent` (it ends when a tool escalates, which a tool Step does not carry back).
    """
    resumable = True
    for agent in iter_agents(root):
        if isinstance(agent, ParallelAgent | LoopAgent):  # pyright: ignore[reportDeprecated]
            why = (
                "its branches call their models at the same time, inside one Step"
                if isinstance(agent, ParallelAgent)  # pyright: ignore[reportDeprecated]
                else "it ends when a tool escalates (exit_loop), and a tool's actions stay in its tool Step"
            )
            raise TypeError(
                f"agent {agent.name!r} is a {type(agent).__name__}, which a durable Dex session does not "
                f"run: {why}. Use a SequentialAgent, sub-agents with transfer_to_agent, or AgentTool"
            )
        if not isinstance(agent, LlmAgent | SequentialAgent):  # pyright: ignore[reportDeprecated]
            # A custom agent restarts from its first sub-agent when resumed: its next model call ends
            # the turn (`SecondModelCallError`) instead.
            resumable = False
    return resumable


def _refuse_local_code_executors(root: BaseAgent) -> None:
    """Refuse every agent whose code executor would run model-written code inside the model Step.

    ADK runs such code in its response processor, between the model call and the next one, without any
    tool callback: the gate never sees it, so it would run unrecorded and again on every retry of the
    Step. `BuiltInCodeExecutor` only asks the provider to run the code inside the model call itself.
    """
    for agent in iter_agents(root):
        executor = agent.code_executor if isinstance(agent, LlmAgent) else None
        if executor is not None and not isinstance(executor, BuiltInCodeExecutor):
            raise TypeError(
                f"agent {agent.name!r} has code_executor={type(executor).__name__}, which runs "
                "model-written code inside the model call's Step, outside any tool Step; a durable Dex "
                "session cannot defer it. Remove the code_executor, use BuiltInCodeExecutor (the model "
                "provider runs the code), or offer code execution as a tool"
            )


def _turn_user_message(turn: AgentTurnContext) -> AgentMessage | None:
    for message in reversed(turn.messages):
        if message.role == MessageRole.USER and message.turn_id == turn.turn_id:
            return message
    return None


def _finish_with_structured_answer(state: GoogleAdkRunState, turn: AgentTurnContext) -> TurnCompleted:
    """Complete a turn whose paused invocation already holds a valid structured answer.

    ADK ends an invocation after a structured answer, so resuming it would only hand over the recorded
    results; they replace the placeholders here, and no model call is made.
    """
    events = with_recorded_results(state.turn_events, turn, set(turn.tool_calls))
    answer = find_structured_answer(events)
    turn.events.write_text_delta(text_of(answer.content if answer is not None else None))
    # The first event of the invocation is the turn's user message, which the session stored already.
    return TurnCompleted(
        new_messages=project_turn_events(events[1:], recorded_outputs(turn)), usage=AgentUsage()
    )


def _is_model_response(event: Event) -> bool:
    content = event.content
    if event.partial or content is None or content.role != "model" or not content.parts:
        return False
    return not all(
        part.function_call is not None and part.function_call.name == REQUEST_CONFIRMATION_FUNCTION_NAME
        for part in content.parts
    )


def _agent_name(tool_source_reference: str | None) -> str | None:
    if not tool_source_reference:
        return None
    try:
        reference = json.loads(tool_source_reference)
    except json.JSONDecodeError:
        return None
    if isinstance(reference, dict):
        agent = cast(dict[str, Any], reference).get("agent")
        return agent if isinstance(agent, str) else None
    return None
