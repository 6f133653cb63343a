"""The Steps that start, run, resume and end a turn."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from dex import AsyncContext, StepDecision, Wait, force_fail, go_to_many

from dex_agents._provider_errors import (
    CONTEXT_WINDOW_EXCEEDED_ERROR,
    ContextWindowExceeded,
    provider_retry_after,
)
from dex_agents.compaction._capability import ContextCompactionRunner
from dex_agents.compaction._decision import compaction_cutoff, refused_input_cutoff
from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.limits import (
    MAX_STORED_VALUE_BYTES,
    MAX_USER_MESSAGE_BYTES,
    bounded_text,
    unencodable_index,
    utf8_size,
)
from dex_agents.persistence import (
    AGENT_STATE,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    QUEUED_USER_MESSAGES,
    TOOL_CALL_RESULTS,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.runner import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolCall,
    ToolCallsRequested,
    ToolPolicy,
    TurnCompleted,
    TurnContinued,
    build_turn_failure_note,
)
from dex_agents.session._builtins import ResponseCalls
from dex_agents.session._control import (
    MAX_CHANNEL_MESSAGES,
    abandon_waiting_calls_for_steer,
    end_turn_by_control,
    read_turn_control,
)
from dex_agents.session._deps import SessionDeps
from dex_agents.session._errors import (
    NO_WORKER_AVAILABLE_ERROR_TYPE,
    RunnerCallError,
    SessionStateError,
    describe_exception,
    plain_recovery_detail,
    runner_errors,
)
from dex_agents.session._message_reads import reply_count
from dex_agents.session._moves import Moves
from dex_agents.session._plan import (
    decide_interaction_mode,
    drop_stale_approval,
    is_plan_execution_wake,
    plan_execution_condition,
    start_plan_execution,
)
from dex_agents.session._settings import (
    INVALID_START_SETTINGS_REASON,
    session_settings_problem,
    store_session_settings,
)
from dex_agents.session._state import (
    InvalidRunnerOutput,
    heartbeating,
    iter_final,
    read_interrupts,
    read_state,
    read_turn_records,
    read_usage,
)
from dex_agents.session._step import SessionStep
from dex_agents.session._storage import append_messages
from dex_agents.session._tool_names import listed_tool_names, unknown_tool_policy_problem
from dex_agents.session._turn_lifecycle import (
    back_to_the_model,
    begin_turn,
    has_unfinished_turn_builder,
    record_usage,
    storable_note,
    store_unfinished_turn_messages,
    turn_context,
)
from dex_agents.session._turn_lifecycle import end_turn as _end_turn
from dex_agents.values import (
    AgentSessionStartInput,
    AgentSessionStatus,
    AgentState,
    AgentToolCall,
    AgentUsage,
    CompactContextInput,
)

__all__ = [
    "AwaitUserMessage",
    "RecordTurnFailure",
    "ResumeTurn",
    "RunModel",
    "StartAgentSession",
]

_logger = logging.getLogger("dex_agents")

NEW_MESSAGES_NEED_UNFINISHED_TURN_BUILDER = (
    "a runner that sets ToolCallsRequested.new_messages must implement build_unfinished_turn_messages"
)
CONTINUED_MESSAGES_NEED_UNFINISHED_TURN_BUILDER = (
    "a runner that sets TurnContinued.new_messages must implement build_unfinished_turn_messages"
)


def _fail_turn(
    context: AsyncContext,
    deps: SessionDeps,
    moves: Moves,
    state: AgentState,
    error: str,
    records: Sequence[AgentToolCall],
) -> StepDecision:
    """End the active turn as failed, leaving a note when tool calls of the turn already ran."""
    turn_id = state.active_turn_id
    final = iter_final(records)
    if final and turn_id is not None:
        try:
            note = storable_note(
                deps.runner,
                lambda budget: build_turn_failure_note(final, max_bytes=budget),
                state.next_message_sequence,
                turn_id,
            )
            state, _ = append_messages(context, deps.options, state, turn_id, [note])
        except Exception as note_error:
            # The failure route must end the turn even when the runner cannot build the note.
            _logger.warning(
                "turn %s failed after tool calls ran, but its turn-failure note could not be stored: %s",
                turn_id,
                describe_exception(note_error),
            )
    ended = _end_turn(context, deps.options, state, records, error)
    writer = deps.event_writer(context, turn_id)
    writer.write_event(AgentEventType.TURN_FAILED, {"error": ended.last_turn_error})
    return go_to_many(moves.to_await_user_message())


def _initial_message_problem(text: str) -> str | None:
    index = unencodable_index(text)
    if index is not None:
        return f"the initial message is not valid UTF-8 text (character {index} is a lone surrogate)"
    size = utf8_size(text)
    if size > MAX_USER_MESSAGE_BYTES:
        return (
            f"the initial message is {size} bytes of UTF-8, more than the {MAX_USER_MESSAGE_BYTES}-byte limit"
        )
    return None


class StartAgentSession(SessionStep[AgentSessionStartInput]):
    """Start Step: initialises the session and starts the first turn when there is a first message."""

    async def execute(self, context: AsyncContext, input: AgentSessionStartInput) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Initialise state, usage, interrupts and settings; start a turn for a non-blank first message.

        Settings it refuses fail the session: starting it without them would run turns with settings the
        caller did not ask for.
        """
        state = read_state(context) or AgentState(
            status=AgentSessionStatus.WAITING_FOR_USER_MESSAGE,
            turn_count=0,
            active_turn_id=None,
            next_message_sequence=1,
            last_turn_error=None,
        )
        AGENT_STATE.set(context, state)
        AGENT_USAGE.set(context, read_usage(context))
        PENDING_INTERRUPTS.set(context, read_interrupts(context))
        settings: object = input.session_settings if input is not None else None  # pyright: ignore[reportUnnecessaryComparison]
        if settings is not None:
            problem = session_settings_problem(settings)
            if problem is not None:
                reason = bounded_text(f"{INVALID_START_SETTINGS_REASON}: {problem}")
                AGENT_STATE.set(
                    context, replace(state, status=AgentSessionStatus.FAILED, last_turn_error=reason)
                )
                return force_fail(reason)
            store_session_settings(context, settings)
        text = input.initial_message if input is not None else None  # pyright: ignore[reportUnnecessaryComparison]
        problem = None if text is None or not text.strip() else _initial_message_problem(text)
        if text is None or not text.strip() or problem is not None:
            # The start is an activation even without a turn; begin_turn starts one for a turn.
            self._deps.tracing.begin_activation(context, None)
        if text is None or not text.strip():
            return go_to_many(self._moves.to_await_user_message())
        if problem is not None:
            # AgentSessionClient refuses this before starting; a raw start_flow gets an idle session that
            # says why, instead of a start Step that fails on every retry.
            AGENT_STATE.set(context, replace(state, last_turn_error=f"{problem}, so no turn started"))
            return go_to_many(self._moves.to_await_user_message())
        mode = decide_interaction_mode(context, self._deps.options, [False])
        return begin_turn(context, self._deps, self._moves, state, [text], interaction_mode=mode)


class AwaitUserMessage(SessionStep[None]):
    """Waits for the next queued user message and starts its turn, or for a steer to apply."""

    async def wait_for(self, context: AsyncContext, input: None) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for a steer, one queued user message, or a plan approval: the first ready, in this order."""
        approval = plan_execution_condition(context)
        return Wait.any_of(
            TURN_CONTROL_REQUESTS.for_range(at_least=1, at_most=MAX_CHANNEL_MESSAGES),
            QUEUED_USER_MESSAGES.for_one(),
            *(() if approval is None else (approval,)),
        )

    async def execute(self, context: AsyncContext, input: None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Hand a steer to `ApplyTurnControl`, or store the message as a new turn's and move to `RunModel`."""
        if TURN_CONTROL_REQUESTS.results(context):
            # A steer that committed after its turn ended: its messages start the next turn.
            return go_to_many(self._moves.to_apply_turn_control(context))
        state = read_state(context)
        if state is None:
            raise SessionStateError("AwaitUserMessage ran before StartAgentSession stored the session state")
        if state.active_turn_id is not None:
            raise SessionStateError(
                f"AwaitUserMessage ran while turn {state.active_turn_id} is still active; "
                "the message stays queued"
            )
        messages = QUEUED_USER_MESSAGES.results(context)
        if not messages and is_plan_execution_wake(context):
            return start_plan_execution(context, self._deps, self._moves, state)
        drop_stale_approval(context)
        text = messages[0].text if messages else ""
        if not text.strip():
            # send_user_message refuses blank text, so only a message from another writer lands here.
            return go_to_many(self._moves.to_await_user_message())
        mode = decide_interaction_mode(context, self._deps.options, [messages[0].plan_mode])
        return begin_turn(context, self._deps, self._moves, state, [text], interaction_mode=mode)


def _tool_call_id_problem(call: DeferredToolCall, position: int, seen: set[str]) -> str | None:
    tool_call_id = call.tool_call_id
    where = f"tool call {position + 1} ({call.tool_name!r})"
    if not isinstance(tool_call_id, str) or not tool_call_id:  # pyright: ignore[reportUnnecessaryIsInstance]
        return f"{where} has an empty tool call ID"
    if "/" in tool_call_id:
        return f"{where} has the tool call ID {tool_call_id!r}, which contains '/'"
    if tool_call_id in seen:
        return f"{where} reuses the tool call ID {tool_call_id!r}, which is already used in this turn"
    return None


def _run_state_problem(outcome: ToolCallsRequested | TurnContinued) -> str | None:
    """Return why an outcome's run state cannot be stored, or `None` when it can."""
    run_state = outcome.framework_run_state
    if not isinstance(run_state, str) or not run_state:  # pyright: ignore[reportUnnecessaryIsInstance]
        return f"{type(outcome).__name__}.framework_run_state must be non-empty text that continues the turn"
    size = utf8_size(run_state)
    if size > MAX_STORED_VALUE_BYTES:
        waits_for = "its tool calls" if isinstance(outcome, ToolCallsRequested) else "its next model call"
        return (
            f"the framework run state is {size} bytes, more than the {MAX_STORED_VALUE_BYTES}-byte limit of "
            f"one stored value, so the turn cannot wait for {waits_for}"
        )
    return None


def _check_tool_calls(
    outcome: ToolCallsRequested, records: Sequence[AgentToolCall], *, stores_incrementally: bool = False
) -> str | None:
    """Return why a `ToolCallsRequested` cannot be stored, or `None` when it can.

    ``stores_incrementally`` says whether the runner implements `build_unfinished_turn_messages`, which a
    runner that sets ``new_messages`` needs so a turn that ends early keeps a result for every stored call.
    """
    if outcome.new_messages and not stores_incrementally:
        return NEW_MESSAGES_NEED_UNFINISHED_TURN_BUILDER
    problem = _run_state_problem(outcome)
    if problem is not None:
        return problem
    if not outcome.tool_calls:
        return "ToolCallsRequested must name at least one tool call; return TurnCompleted for a final answer"
    seen = {record.tool_call_id for record in records}
    for position, call in enumerate(outcome.tool_calls):
        if not isinstance(call, DeferredToolCall):  # pyright: ignore[reportUnnecessaryIsInstance]
            return f"tool call {position + 1} must be a DeferredToolCall, got {type(call).__name__}"
        problem = _tool_call_id_problem(call, position, seen)
        if problem is not None:
            return f"{problem}; tool call IDs must be non-empty, contain no '/', and be unique within a turn"
        seen.add(call.tool_call_id)
        if not isinstance(call.policy, ToolPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            return f"tool call {call.tool_call_id!r} has no ToolPolicy; use turn.resolve_tool_policy"
        if not isinstance(call.arguments, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            return f"tool call {call.tool_call_id!r} must carry its arguments as JSON text"
    return None


def _tool_policy_problem(deps: SessionDeps) -> str | None:
    """Return why the session's tool policies name a tool the runner now lists no tool by, if they do."""
    policies = deps.options.tool_policies
    if not policies:
        return None
    with runner_errors():
        listed = listed_tool_names(deps.runner)
    if listed is None:
        return None
    return unknown_tool_policy_problem(policies, listed, deps.options.built_in_tools)


class RunModel(SessionStep[CompactContextInput | None]):
    """Makes one model call through the runner and stores its outcome, or first compacts the context.

    Its input is always `None`; it shares `CompactContextInput | None` with `CompactContext` because both
    fail to `RecordTurnFailure`, and a failure route takes its Step's input type.
    """

    async def execute(self, context: AsyncContext, input: CompactContextInput | None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Call `run_model_step` once and store its final answer, tool calls, or continuation.

        Its decisions before the model call, in order: a turn that is steered or cancelled ends here, and a
        model input past the compaction trigger moves to `CompactContext`; neither calls the model. A
        `cancel_turn` during the model call cancels this coroutine, and Dex drops its result.
        """
        state = read_state(context)
        if state is None or state.active_turn_id is None:
            raise SessionStateError("RunModel ran without an active turn")
        turn_id = state.active_turn_id
        records = read_turn_records(context, turn_id)
        unfinished = [record.tool_call_id for record in records if not record.is_final]
        if unfinished:
            raise SessionStateError(f"RunModel ran while tool calls {unfinished} of {turn_id} are not final")
        # Retries reuse the first attempt's snapshot, so this is decided once, before any model call.
        control = read_turn_control(context)
        if control.reason is not None:
            await end_turn_by_control(
                context, self._deps, state, records, control.reason, control.steered_message_count
            )
            return go_to_many(self._moves.to_apply_turn_control(context))
        writer = self._deps.event_writer(context, turn_id)
        turn = turn_context(context, self._deps, turn_id, records, writer)
        through = await self._compaction_cutoff(state, turn)
        if through is not None:
            writer.close()
            AGENT_STATE.set(context, replace(state, status=AgentSessionStatus.COMPACTING_CONTEXT))
            return go_to_many(self._moves.to_compact_context(context, through))
        # Output before the model call: Dex hands an attempt that produced no output to another Worker under
        # the same attempt number, so without it a model call killed early would repeat as "attempt 1" and a
        # UI could not tell the two calls apart.
        await context.heartbeat()
        try:
            return await self._deps.tracing.trace_model_call(
                context,
                turn_id,
                turn.messages,
                lambda: self._call_runner(context, turn, writer),
                lambda outcome: self._store_outcome(context, state, records, outcome),
                records,
            )
        except ContextWindowExceeded as refusal:
            return await self._input_refused(context, state, turn, records, refusal)

    async def _input_refused(
        self,
        context: AsyncContext,
        state: AgentState,
        turn: AgentTurnContext,
        records: Sequence[AgentToolCall],
        refusal: ContextWindowExceeded,
    ) -> StepDecision:
        """Compact after the provider refused the input as too long, or end the turn saying why."""
        policy = self._deps.options.compaction
        if policy is not None:
            runner = cast(ContextCompactionRunner, self._deps.runner)
            through = await refused_input_cutoff(policy, runner, turn, state.next_message_sequence)
            if through is not None:
                AGENT_STATE.set(context, replace(state, status=AgentSessionStatus.COMPACTING_CONTEXT))
                return go_to_many(self._moves.to_compact_context(context, through))
            remedy = "and nothing older is left to summarize"
        else:
            remedy = "and the session does not compact (AgentSessionOptions.compaction is not set)"
        error = f"{CONTEXT_WINDOW_EXCEEDED_ERROR} ({refusal}), {remedy}"
        return await self._fail(context, state, error, records)

    async def _compaction_cutoff(self, state: AgentState, turn: AgentTurnContext) -> int | None:
        policy = self._deps.options.compaction
        if policy is None:
            return None
        runner = cast(ContextCompactionRunner, self._deps.runner)
        return await compaction_cutoff(policy, runner, turn, state.next_message_sequence)

    async def _call_runner(
        self, context: AsyncContext, turn: AgentTurnContext, writer: AgentEventWriter
    ) -> AgentTurnOutcome:
        async with heartbeating(context):
            try:
                return await self._deps.runner.run_model_step(turn)
            except (ContextWindowExceeded, RunnerCallError):
                raise
            except Exception as error:
                # The next attempt would only meet the same rate limit sooner than the provider asked.
                pause = provider_retry_after(error)
                if pause:
                    await asyncio.sleep(pause)
                raise RunnerCallError(describe_exception(error)) from error
            finally:
                writer.close()

    async def _fail(
        self, context: AsyncContext, state: AgentState, error: str, records: Sequence[AgentToolCall]
    ) -> StepDecision:
        """Fail the turn in this commit, keeping the runner's unstored items first when it builds them."""
        kept, _ = await store_unfinished_turn_messages(context, self._deps, state, records)
        return _fail_turn(context, self._deps, self._moves, kept, error, records)

    async def _store_outcome(
        self,
        context: AsyncContext,
        state: AgentState,
        records: Sequence[AgentToolCall],
        outcome: object,
    ) -> StepDecision:
        if not isinstance(outcome, TurnCompleted | ToolCallsRequested | TurnContinued):
            raise RunnerCallError(
                "run_model_step must return TurnCompleted, ToolCallsRequested or TurnContinued, "
                f"got {type(outcome).__name__}"
            )
        usage = outcome.usage
        if not isinstance(usage, AgentUsage):  # pyright: ignore[reportUnnecessaryIsInstance]
            return await self._fail(
                context, state, f"the outcome's usage must be AgentUsage, got {type(usage).__name__}", records
            )
        record_usage(context, self._deps, state.active_turn_id, usage)
        # A runner whose tools are known only once it runs (an MCP listing) lists them now. Failing here
        # drops the whole response, so none of its tool calls runs under the wrong policy.
        problem = _tool_policy_problem(self._deps)
        if problem is not None:
            return await self._fail(context, state, problem, records)
        if isinstance(outcome, TurnCompleted):
            return await self._complete_turn(context, state, records, outcome)
        if isinstance(outcome, TurnContinued):
            return await self._continue_turn(context, state, records, outcome)
        return await self._request_tool_calls(context, state, records, outcome)

    async def _complete_turn(
        self,
        context: AsyncContext,
        state: AgentState,
        records: Sequence[AgentToolCall],
        outcome: TurnCompleted,
    ) -> StepDecision:
        turn_id = state.active_turn_id
        assert turn_id is not None
        try:
            advanced, stored = append_messages(
                context, self._deps.options, state, turn_id, list(outcome.new_messages)
            )
        except InvalidRunnerOutput as error:
            return await self._fail(
                context, state, f"run_model_step returned a message that cannot be stored: {error}", records
            )
        if outcome.turn_error is not None:
            error = str(outcome.turn_error) or "the runner ended the turn with an empty turn_error"
            if stored:
                ended = _end_turn(context, self._deps.options, advanced, records, error)
                self._deps.event_writer(context, turn_id).write_event(
                    AgentEventType.TURN_FAILED, {"error": ended.last_turn_error}
                )
                return go_to_many(self._moves.to_await_user_message())
            # A runner that stops by raising returns no messages; its unstored items (a tool's result
            # among them) would leave a stored call without its result, so ask it for them first.
            return await self._fail(context, advanced, error, records)
        _end_turn(context, self._deps.options, advanced, records, None)
        self._deps.event_writer(context, turn_id).write_event(
            AgentEventType.TURN_COMPLETED,
            {"message_count": reply_count(context, turn_id, advanced.next_message_sequence)},
        )
        return go_to_many(self._moves.to_await_user_message())

    async def _continue_turn(
        self,
        context: AsyncContext,
        state: AgentState,
        records: Sequence[AgentToolCall],
        outcome: TurnContinued,
    ) -> StepDecision:
        """Store a `TurnContinued` and make the turn's next model call, with no tool call in between."""
        turn_id = state.active_turn_id
        assert turn_id is not None
        # Stored items of an unfinished turn need the runner's unfinished-turn messages when the turn fails.
        if outcome.new_messages and not has_unfinished_turn_builder(self._deps.runner):
            return await self._fail(context, state, CONTINUED_MESSAGES_NEED_UNFINISHED_TURN_BUILDER, records)
        problem = _run_state_problem(outcome)
        if problem is not None:
            return await self._fail(context, state, problem, records)
        try:
            advanced, _ = append_messages(
                context, self._deps.options, state, turn_id, list(outcome.new_messages)
            )
        except InvalidRunnerOutput as error:
            return await self._fail(
                context, state, f"run_model_step returned a message that cannot be stored: {error}", records
            )
        FRAMEWORK_RUN_STATE.set(context, outcome.framework_run_state)
        return go_to_many(back_to_the_model(context, self._moves, advanced))

    async def _request_tool_calls(
        self,
        context: AsyncContext,
        state: AgentState,
        records: Sequence[AgentToolCall],
        outcome: ToolCallsRequested,
    ) -> StepDecision:
        turn_id = state.active_turn_id
        assert turn_id is not None
        problem = _check_tool_calls(
            outcome, records, stores_incrementally=has_unfinished_turn_builder(self._deps.runner)
        )
        if problem is not None:
            return await self._fail(context, state, problem, records)
        try:
            state, _ = append_messages(
                context, self._deps.options, state, turn_id, list(outcome.new_messages)
            )
        except InvalidRunnerOutput as error:
            return await self._fail(
                context, state, f"run_model_step returned a message that cannot be stored: {error}", records
            )
        FRAMEWORK_RUN_STATE.set(context, outcome.framework_run_state)
        interrupts = read_interrupts(context)
        calls = ResponseCalls(
            context,
            self._deps,
            self._moves,
            self._deps.event_writer(context, turn_id),
            interrupts,
            state.interaction_mode,
            list(outcome.tool_calls),
        )
        for offset, call in enumerate(outcome.tool_calls):
            calls.record(call, turn_id, len(records) + offset)
        PENDING_INTERRUPTS.set(context, interrupts)
        AGENT_STATE.set(context, replace(state, status=AgentSessionStatus.RUNNING_TOOLS))
        if calls.resumes_turn_itself:
            return go_to_many(*calls.movements)
        return go_to_many(*calls.movements, self._moves.to_resume_turn(len(outcome.tool_calls)))


class ResumeTurn(SessionStep[int]):
    """Waits for the results of a turn's tool calls, then resumes the model; a steer abandons the waits."""

    async def wait_for(self, context: AsyncContext, input: int) -> Wait:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Wait for ``input`` tool call results, or for a steer."""
        return Wait.any_of(
            TOOL_CALL_RESULTS.for_n(input),
            TURN_CONTROL_REQUESTS.for_range(at_least=1, at_most=MAX_CHANNEL_MESSAGES),
        )

    async def execute(self, context: AsyncContext, input: int) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Resume the model once every record is final, end a steered or cancelled turn, or wait again."""
        state = read_state(context)
        if state is None or state.active_turn_id is None:
            raise SessionStateError("ResumeTurn ran without an active turn")
        turn_id = state.active_turn_id
        records = read_turn_records(context, turn_id)
        control = read_turn_control(context)
        if TURN_CONTROL_REQUESTS.results(context):
            # A steer woke this Step, so no result was consumed. In a cancelled turn FinishTurnCancellation
            # owns the waiting calls instead.
            if control.is_steered and not control.is_cancelled:
                abandon_waiting_calls_for_steer(context, self._deps, turn_id, records)
            return go_to_many(self._moves.to_resume_turn(input))
        unfinished = sum(1 for record in records if not record.is_final)
        if unfinished:
            # A consumed result belonged to an earlier turn whose call reused an ID; wait for the rest.
            return go_to_many(self._moves.to_resume_turn(unfinished))
        if control.reason is not None:
            return go_to_many(self._moves.to_apply_turn_control(context))
        return go_to_many(back_to_the_model(context, self._moves, state))


class RecordTurnFailure(SessionStep[CompactContextInput | None]):
    """Failure route of `RunModel` and `CompactContext`: ends the turn as failed. It ignores its input."""

    async def execute(self, context: AsyncContext, input: CompactContextInput | None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Record `last_turn_error`, leave a note when tool calls ran, and clear the turn."""
        state = read_state(context)
        if state is None or state.active_turn_id is None:
            _logger.warning("RecordTurnFailure found no active turn; there is nothing to end")
            return go_to_many(self._moves.to_await_user_message())
        recovery = context.recovery_error
        error = (
            plain_recovery_detail(recovery.detail) or recovery.error_type or "the model call failed"
            if recovery is not None
            else "the model call failed without an error detail"
        )
        if recovery is not None and NO_WORKER_AVAILABLE_ERROR_TYPE in recovery.error_type.upper():
            error = _no_worker_turn_error(self._deps.flow_type, error)
            _logger.warning("turn %s of session %s failed: %s", state.active_turn_id, context.flow_id, error)
        records = read_turn_records(context, state.active_turn_id)
        state, _ = await store_unfinished_turn_messages(context, self._deps, state, records)
        return _fail_turn(context, self._deps, self._moves, state, error, records)


def _no_worker_turn_error(flow_type: str, detail: str) -> str:
    """Return `last_turn_error` for a turn whose last `RunModel` attempt no Worker accepted.

    The server's own detail may not say what an operator has to fix, so the error names the Flow type.

    Args:
        flow_type: The session's Flow type.
        detail: The recovery error's detail.

    Returns:
        The error.
    """
    return (
        f"no Worker served Flow type {flow_type!r}: the last of RunModel's attempts found no Worker that "
        "accepted it within the server's dispatch wait, so the turn failed without an answer; start a "
        "Worker that registers it (or free task slots on its Workers), then send the message again "
        f"(server detail: {detail})"
    )
