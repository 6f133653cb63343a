"""`StepwiseRunner`: the core's own agent loop, one LiteLLM call per `RunModel`.

The boundary it keeps: `run_model_step` makes exactly one model call and runs no tool. Every tool call the
model asks for is deferred to its own Step with the policy from the definition; a name the agent does not
have is deferred too, with `UNKNOWN_TOOL_POLICY`, and its tool Step records it failed with a message the
model reads at its next call, so no answer ever hides a second model call.

Each answer's messages are stored as soon as the answer is: with its tool calls (`ToolCallsRequested`), with
a continuation (`TurnContinued`), or when the turn ends. Between model calls the run state
(`StepwiseRunState`) holds only which calls' results come next and what the loop decided, so a turn that ends
without an answer needs only those results from `build_unfinished_turn_messages`.

It compacts (`ContextCompactionRunner`, see `_compaction`): once the session has a summary, every model input
starts, after the instructions, with the summary under `dex_agents.CONTEXT_SUMMARY_HEADER`.

It has every other optional capability of the runner contract too: it offers the session's enabled built-in
tools like its own (the session carries out their calls), supports plan mode (`PlanModeRunner`), passes the
polls and cancellations of started tasks to the tool source that owns the call (`ToolTaskPoller`,
`ToolTaskCanceller`), and reports each model call's `ModelCallMetadata` for tracing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from dex_agents._provider_errors import ContextWindowExceeded, is_context_window_refusal, provider_refusal
from dex_agents._run_state import RunStateFormatError
from dex_agents._tools._tasks import (
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
    ToolTaskRouter,
)
from dex_agents.compaction import ContextSummaryRequest, ContextSummaryResult
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolDescriber,
    ToolExecutionError,
    ToolNamesRunner,
    TurnCompleted,
    TurnContinued,
    describe_tool_call_outcome,
)
from dex_agents.stepwise._compaction import (
    count_tokens,
    select_cutoff,
    summary_chat_message,
    summary_request_messages,
)
from dex_agents.stepwise._definition import (
    END_TURN,
    MAX_CONSECUTIVE_CONTINUATIONS,
    AgentDefinition,
    InstructionContext,
    TurnContinuation,
    TurnContinuationContext,
    TurnContinuationDecision,
)
from dex_agents.stepwise._messages import (
    ChatMessage,
    replay_chat_messages,
    response_messages,
    tool_result_message,
    user_message,
)
from dex_agents.stepwise._model import (
    ModelRequest,
    ModelResponse,
    ModelToolCall,
    model_call_metadata,
)
from dex_agents.stepwise._offer import (
    OfferedTools,
    offered_tools,
    planning_tool_choice,
    replay_with_plan_note,
)
from dex_agents.stepwise._run_state import StepwiseRunState
from dex_agents.stepwise._tasks import without_tool_tasks
from dex_agents.stepwise._tools import (
    ListedTool,
    ToolDefinitionError,
    ToolSource,
)
from dex_agents.values import AgentToolCall, AgentUsage, FrameworkMessage

__all__ = ["StepwiseRunner"]


def _with_usable_tool_call_ids(response: ModelResponse, turn: AgentTurnContext) -> ModelResponse:
    """Give every call an ID the session accepts: non-empty, without '/', unique within the turn."""
    taken = set(turn.tool_calls)
    counter = len(taken)
    calls: list[ModelToolCall] = []
    for call in response.tool_calls:
        tool_call_id = call.tool_call_id.replace("/", "_")
        while not tool_call_id or tool_call_id in taken:
            counter += 1
            tool_call_id = f"call-{counter}"
        taken.add(tool_call_id)
        calls.append(ModelToolCall(tool_call_id, call.tool_name, call.arguments))
    if [call.tool_call_id for call in calls] == [call.tool_call_id for call in response.tool_calls]:
        return response
    message = {**response.message, "tool_calls": [call.to_chat() for call in calls]}
    return dataclasses.replace(response, message=message, tool_calls=tuple(calls))


class StepwiseRunner:
    """The `AgentFrameworkRunner` of a Stepwise `AgentDefinition`.

    Register it like any adapter's runner::

        flow = AgentSessionFlow(StepwiseRunner(definition), flow_type="OrderDesk")

    Args:
        definition: The agent.

    Raises:
        TypeError: If ``definition`` is not an `AgentDefinition`.
    """

    def __init__(self, definition: AgentDefinition) -> None:
        if not isinstance(definition, AgentDefinition):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"StepwiseRunner takes an AgentDefinition, got {type(definition).__name__}")
        self._definition = definition
        # Function tools' handlers live in their FunctionToolSource, so the router has none of its own.
        self._tasks = ToolTaskRouter("StepwiseRunner", None, None, sources=definition.tool_sources)

    @property
    def definition(self) -> AgentDefinition:
        """The agent."""
        return self._definition

    @property
    def supports_plan_mode(self) -> bool:
        """`True`: a planning turn offers only ``write_todos``, and every turn with a plan shows it first."""
        return True

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return a user chat message holding ``text``.

        Args:
            text: The user's text, or a note the session writes.

        Returns:
            The message.
        """
        return user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Make exactly one model call, or none when the turn ends with its tool results.

        Args:
            turn: The turn's committed state.

        Returns:
            `ToolCallsRequested` for an answer with tool calls, `TurnContinued` for an answer that
            ``decide_turn_continuation`` continues, else `TurnCompleted`, each with the call's
            `ModelCallMetadata`. A run state this release did not write, and a planning turn that must
            force ``write_todos`` on a model that cannot be forced, end the turn with ``turn_error`` before
            any model call.
        """
        try:
            state = StepwiseRunState.from_json(turn.framework_run_state)
        except RunStateFormatError as error:
            # Another release or runner wrote it, so a retry would fail the same way. The recorded results
            # stay in the session's turn-failure note.
            return TurnCompleted(new_messages=(), usage=AgentUsage(), turn_error=str(error))
        items = self._tool_results(turn, state.pending_tool_call_ids)
        if state.end_turn:
            return TurnCompleted(new_messages=items, usage=AgentUsage(), turn_error=state.turn_error)
        if state.continuation is not None:
            items.append(user_message(state.continuation))
        definition = self._definition
        client = definition.model_client_for(turn.session_settings)
        tool_choice = planning_tool_choice(turn, definition.planning_tool_choice)
        if tool_choice == "required":
            problem = definition.forced_planning_problem(client)
            if problem is not None:
                return TurnCompleted(new_messages=items, usage=AgentUsage(), turn_error=problem)
        offered = await offered_tools(turn, self._listed_tools)
        request = ModelRequest(
            messages=await self._model_input(turn, items),
            tools=[tool for tool, _ in offered.values()],
            settings=definition.model_settings,
            events=turn.events,
            tool_choice=tool_choice,
        )
        try:
            answer = await client.complete(request)
        except Exception as error:
            if is_context_window_refusal(error):
                raise ContextWindowExceeded(str(error)) from error
            refusal = provider_refusal(error)
            if refusal is None:
                raise
            return TurnCompleted(new_messages=items, usage=AgentUsage(), turn_error=refusal)
        response = _with_usable_tool_call_ids(answer, turn)
        metadata = model_call_metadata(client, response, request)
        items.extend(response_messages(response))
        decision, turn_error = await self._decide(turn, response, state.consecutive_continuations)
        continuation = decision if isinstance(decision, TurnContinuation) and turn_error is None else None
        consecutive = state.consecutive_continuations + 1 if continuation is not None else 0
        if response.tool_calls:
            next_state = StepwiseRunState(
                pending_tool_call_ids=tuple(call.tool_call_id for call in response.tool_calls),
                continuation=None if continuation is None else continuation.message,
                end_turn=decision == END_TURN or turn_error is not None,
                turn_error=turn_error,
                consecutive_continuations=consecutive,
            )
            return ToolCallsRequested(
                framework_run_state=next_state.to_json(),
                tool_calls=self._defer(turn, response.tool_calls, offered),
                usage=response.usage,
                new_messages=items,
                model_call_metadata=metadata,
            )
        if continuation is not None:
            return TurnContinued(
                framework_run_state=StepwiseRunState(consecutive_continuations=consecutive).to_json(),
                new_messages=[*items, user_message(continuation.message)],
                usage=response.usage,
                model_call_metadata=metadata,
            )
        return TurnCompleted(
            new_messages=items, usage=response.usage, turn_error=turn_error, model_call_metadata=metadata
        )

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> Sequence[FrameworkMessage]:
        """Return the results of the last answer's tool calls when the turn ends without an answer.

        Everything else of the turn is stored already, so these close every stored call with its result.

        Args:
            turn: The turn's committed state; every tool call record is final.

        Returns:
            A result for each call of the last answer, in order.

        Raises:
            RunStateFormatError: If this release did not write the run state; the session then stores its
                note of the results instead.
        """
        state = StepwiseRunState.from_json(turn.framework_run_state)
        return self._tool_results(turn, state.pending_tool_call_ids)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one tool call once, through the tool source that deferred it.

        The source is found by the call's record (`ToolSource.owns_tool_call`), so an MCP call reaches its
        server with no listing; only a call no source owns lists them, for its error. The tools of a
        source that polls no tasks run with ``supports_tool_tasks`` false.

        Args:
            call: The approved call.

        Returns:
            What the model sees, a question the tool asks, or a task it started.

        Raises:
            ToolExecutionError: For an unknown tool, arguments the tool cannot take, or as the tool raises it.
        """
        source = self._source_of(call.tool_call)
        if source is None:
            names = ", ".join(sorted(await self._listed_tools())) or "none"
            raise ToolExecutionError(
                f"unknown tool {call.tool_call.tool_name!r}; the tools of this agent are: {names}"
            )
        if isinstance(source, ToolTaskPoller):
            return await source.call_tool(call)
        with without_tool_tasks(call) as execution:
            return await source.call_tool(execution)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll a started task once, through the tool source that owns its call.

        Args:
            poll: The poll.

        Returns:
            What the source's ``poll_tool_task`` returns.

        Raises:
            LookupError: If no source owns the call or its source polls no tasks; after three attempts the
                call is recorded by its effect.
        """
        return await self._tasks.poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Cancel an abandoned task through the tool source that owns its call, if that source can.

        Args:
            cancellation: The abandoned task.
        """
        await self._tasks.cancel_tool_task(cancellation)

    async def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Count the tokens of the model input `run_model_step` would send for ``turn``.

        It builds the input as the model call does: the instructions, the summary, the plan note, the stored
        messages after the summary, the turn's unstored tool results and continuation, and the offered tools
        (listed as the model call lists them; an MCP source answers from its cache). It counts them with
        LiteLLM's ``token_counter`` for a model in LiteLLM's model map and a token per 4 characters for any
        other. A turn that ends with no model call (``END_TURN``, or a run state another release wrote)
        counts 0, so it never compacts.

        Args:
            turn: The turn's committed state.

        Returns:
            The token count.
        """
        items = self._unstored_items(turn)
        if items is None:
            return 0
        messages = await self._model_input(turn, items)
        tools = [tool for tool, _ in (await offered_tools(turn, self._listed_tools)).values()]
        model_name = self._definition.model_client_for(turn.session_settings).model_name
        return count_tokens(model_name, messages, tools)

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the last stored sequence to summarize, keeping about ``retained_token_budget`` tokens.

        A cut falls only right after a model response whose tool calls all have stored results: after an
        answer without calls, or after the last stored result of a response's calls; never between the
        pieces of one stored response (its text, then one message per call), and never before a result. Of
        those cuts it takes the earliest whose newer messages, with the turn's unstored ones, fit the budget;
        when none fits, the latest.

        Args:
            turn: The turn's committed state.
            retained_token_budget: The tokens to keep after the cut.

        Returns:
            The sequence, or `None` when no cut is allowed.
        """
        model_name = self._definition.model_client_for(turn.session_settings).model_name

        def count(messages: Sequence[Mapping[str, object]]) -> int:
            return count_tokens(model_name, messages)

        items = self._unstored_items(turn) or []
        unstored = count(replay_chat_messages(items)) if items else 0
        return select_cutoff(
            turn.messages, unstored_tokens=unstored, retained_token_budget=retained_token_budget, count=count
        )

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make the one summary call: one LiteLLM call with the turn's model and the definition's settings.

        The call has the definition's ``summary_instructions`` and one user prompt: the previous summary,
        then the messages through the cut as a transcript (`dex_agents.build_summary_prompt`). When that
        prompt and the answer's ``max_output_tokens`` would not fit ``request.input_token_budget``, the
        oldest messages are left out up to a cut and the prompt says how many. Nothing streams to the
        session's events: a summary is not an answer to the user.

        Args:
            request: The messages to summarize and the summary so far.

        Returns:
            The answer's text, the call's usage and its `ModelCallMetadata`.

        Raises:
            StepwiseHistoryError: If a message to summarize is not one Stepwise stores.
            Exception: As the model client raises it; `CompactContext` retries the call.
        """
        definition = self._definition
        client = definition.model_client_for(request.session_settings)

        def count(messages: Sequence[Mapping[str, object]]) -> int:
            return count_tokens(client.model_name, messages)

        messages = summary_request_messages(
            request.previous_summary,
            request.messages,
            instructions=definition.summary_instructions,
            input_token_budget=request.input_token_budget
            - (definition.model_settings.max_output_tokens or 0),
            count=count,
        )
        summary_request = ModelRequest(messages=messages, settings=definition.model_settings)
        response = await client.complete(summary_request)
        metadata = model_call_metadata(client, response, summary_request)
        return ContextSummaryResult(text=response.text, usage=response.usage, model_call_metadata=metadata)

    @staticmethod
    def _tool_results(turn: AgentTurnContext, tool_call_ids: Sequence[str]) -> list[FrameworkMessage]:
        results: list[FrameworkMessage] = []
        for tool_call_id in tool_call_ids:
            record = turn.recorded_tool_call(tool_call_id)
            results.append(tool_result_message(record, describe_tool_call_outcome(record)))
        return results

    def _unstored_items(self, turn: AgentTurnContext) -> list[FrameworkMessage] | None:
        """The items the next model call adds to the stored messages; `None` when it makes no model call."""
        try:
            state = StepwiseRunState.from_json(turn.framework_run_state)
        except RunStateFormatError:
            return None
        if state.end_turn:
            return None
        items = self._tool_results(turn, state.pending_tool_call_ids)
        if state.continuation is not None:
            items.append(user_message(state.continuation))
        return items

    async def _model_input(
        self, turn: AgentTurnContext, items: Sequence[FrameworkMessage]
    ) -> list[ChatMessage]:
        context = InstructionContext(
            session_settings=turn.session_settings, flow_id=turn.flow_id, turn_id=turn.turn_id
        )
        instructions = await self._definition.instructions_for(context)
        messages: list[ChatMessage] = (
            [] if instructions is None else [{"role": "system", "content": instructions}]
        )
        if turn.context_summary is not None:
            messages.append(summary_chat_message(turn.context_summary))
        messages.extend(replay_with_plan_note(turn, items))
        return messages

    async def _listed_tools(self) -> dict[str, tuple[ListedTool, ToolSource]]:
        """Every tool of every source by name, in the sources' order."""
        listed: dict[str, tuple[ListedTool, ToolSource]] = {}
        for source in self._definition.tool_sources:
            for tool in await source.list_tools():
                if tool.name in listed:
                    raise ToolDefinitionError(
                        f"agent {self._definition.name!r} offers two tools named {tool.name!r}; tool names "
                        "must be unique across its tool sources"
                    )
                listed[tool.name] = (tool, source)
        return listed

    def agent_tool_names(self) -> tuple[str, ...] | None:
        """Return every source's tool names (`ToolNamesRunner`), or `None` when a source cannot list them.

        Function tools are known at once. An `McpToolSource` knows a server's tools once this Worker listed
        it (in a model call); until then the session takes that server's policies on trust, and checks them
        after the model call that lists it. A source without ``agent_tool_names`` makes it `None`.
        """
        names: list[str] = []
        for source in self._definition.tool_sources:
            listed = source.agent_tool_names() if isinstance(source, ToolNamesRunner) else None
            if listed is None:
                return None
            names.extend(listed)
        return tuple(names)

    def describe_tool(self, tool_name: str) -> str | None:
        """Return a tool's description from the first source that knows it (`ToolDescriber`), for tracing."""
        for source in self._definition.tool_sources:
            if isinstance(source, ToolDescriber):
                description = source.describe_tool(tool_name)
                if description:
                    return description
        return None

    def _source_of(self, record: AgentToolCall) -> ToolSource | None:
        """The source that deferred the call, found from its record alone."""
        sources = self._definition.tool_sources
        return next((source for source in sources if source.owns_tool_call(record)), None)

    @staticmethod
    def _defer(
        turn: AgentTurnContext, calls: Sequence[ModelToolCall], offered: OfferedTools
    ) -> list[DeferredToolCall]:
        deferred: list[DeferredToolCall] = []
        for call in calls:
            arguments = call.arguments or "{}"
            _, source = offered.get(call.tool_name, (None, None))
            if source is None:
                # A built-in is the session's to carry out, and nothing runs for a name the agent lacks (or
                # a planning turn does not offer): its Step only records the failure for the model.
                deferred.append(
                    DeferredToolCall(call.tool_call_id, call.tool_name, arguments, UNKNOWN_TOOL_POLICY)
                )
                continue
            deferred.append(
                source.deferred_tool_call(
                    turn, tool_call_id=call.tool_call_id, tool_name=call.tool_name, arguments=arguments
                )
            )
        return deferred

    async def _decide(
        self, turn: AgentTurnContext, response: ModelResponse, consecutive: int
    ) -> tuple[TurnContinuationDecision, str | None]:
        """Ask the continuation hook about an answer; return its decision and the turn's error, if any."""
        context = TurnContinuationContext(
            session_settings=turn.session_settings,
            flow_id=turn.flow_id,
            turn_id=turn.turn_id,
            answer=response.text,
            tool_calls=response.tool_calls,
            consecutive_continuations=consecutive,
        )
        try:
            decision = await self._definition.decide_continuation(context)
        except Exception as error:
            return None, f"decide_turn_continuation raised {type(error).__name__}: {error}"
        if isinstance(decision, TurnContinuation) and consecutive >= MAX_CONSECUTIVE_CONTINUATIONS:
            return decision, (
                f"decide_turn_continuation asked for more than {MAX_CONSECUTIVE_CONTINUATIONS} continuations "
                "in a row, so the turn ended"
            )
        return decision, None
