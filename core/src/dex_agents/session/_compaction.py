"""Context compaction: `RunModel`'s decision to compact, and `CompactContext`, which writes the summary.

`RunModel` decides before its model call, after the steering and cancellation check: with
`AgentSessionOptions.compaction`, it asks the runner for the next model input's size, and at the policy's
trigger for the last message to summarize. A cut after the current summary sends the turn to
`CompactContext` with no model call. `CompactContext` makes the one summary call and, in one commit, stores
the summary, records the call's usage, applies retention, and goes back to `RunModel`. No message is stored
between the two, and `RunModel` compacts only when the cut moves past the summary, so they cannot loop.
"""

from __future__ import annotations

import inspect
from dataclasses import replace
from typing import cast

from dex import AsyncContext, StepDecision, go_to_many

from dex_agents.compaction import ContextCompactionRunner, ContextSummaryRequest, ContextSummaryResult
from dex_agents.events import AgentEventType
from dex_agents.limits import MAX_CONTEXT_SUMMARY_BYTES, utf8_size
from dex_agents.persistence import AGENT_STATE, CONTEXT_SUMMARY
from dex_agents.runner import AgentTurnContext
from dex_agents.session._deps import SessionDeps
from dex_agents.session._errors import RunnerCallError, SessionStateError, runner_errors
from dex_agents.session._settings import read_turn_session_settings
from dex_agents.session._state import (
    format_time,
    heartbeating,
    now,
    read_context_summary,
    read_state,
    stored_size,
)
from dex_agents.session._step import SessionStep
from dex_agents.session._storage import read_messages, settle_storage
from dex_agents.session._turn_lifecycle import record_usage
from dex_agents.values import (
    AgentSessionStatus,
    AgentState,
    AgentUsage,
    CompactContextInput,
    ContextSummary,
)

__all__ = ["CompactContext", "compaction_cutoff"]


async def _call(value: object) -> object:
    return await value if inspect.isawaitable(value) else value


def _whole_number(value: object, method: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunnerCallError(f"{method} must return an int, got {type(value).__name__}")
    return value


async def compaction_cutoff(deps: SessionDeps, state: AgentState, turn: AgentTurnContext) -> int | None:
    """Return the last message to summarize before this model call, or `None` to make the call.

    Raises:
        RunnerCallError: If the runner's estimate or cut raises, is not an int, or names a message that is
            not stored yet.
    """
    policy = deps.options.compaction
    if policy is None:
        return None
    runner = cast(ContextCompactionRunner, deps.runner)
    input_bytes = sum(stored_size(message) for message in turn.messages)
    with runner_errors():
        estimate = _whole_number(await _call(runner.estimate_input_tokens(turn)), "estimate_input_tokens")
        over_bytes = input_bytes >= policy.trigger_bytes
        if estimate < policy.trigger_tokens and not over_bytes:
            return None
        budget = policy.retained_token_budget
        if over_bytes:
            # The runner cuts by its own tokens; keeping the bytes' share of them keeps about that many bytes.
            budget = min(budget, estimate * policy.retained_bytes // max(input_bytes, 1))
        cutoff = await _call(runner.select_compaction_cutoff(turn, budget))
    if cutoff is None:
        return None
    through = _whole_number(cutoff, "select_compaction_cutoff")
    summarized = 0 if turn.context_summary is None else turn.context_summary.last_sequence
    if through <= summarized:
        return None
    if through >= state.next_message_sequence:
        raise RunnerCallError(
            f"select_compaction_cutoff returned {through}, but the last stored message is "
            f"{state.next_message_sequence - 1}"
        )
    return through


def _check_summary(result: object) -> ContextSummaryResult:
    if not isinstance(result, ContextSummaryResult):
        raise RunnerCallError(
            f"summarize_context must return ContextSummaryResult, got {type(result).__name__}"
        )
    if not isinstance(result.text, str) or not result.text.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerCallError("summarize_context returned a blank summary")
    if not isinstance(result.usage, AgentUsage):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise RunnerCallError(f"the summary's usage must be AgentUsage, got {type(result.usage).__name__}")
    size = utf8_size(result.text)
    if size > MAX_CONTEXT_SUMMARY_BYTES:
        raise RunnerCallError(
            f"summarize_context returned a {size}-byte summary, more than the "
            f"{MAX_CONTEXT_SUMMARY_BYTES}-byte limit of a context summary (every Step request and snapshot "
            "carries it); ask for a shorter one"
        )
    return result


class CompactContext(SessionStep[CompactContextInput | None]):
    """Summarizes the messages after the current summary through ``through_sequence``, then resumes the model.

    It has `RunModel`'s options and failure route; a crash repeats only the summary call.
    """

    async def execute(self, context: AsyncContext, input: CompactContextInput | None) -> StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        """Make the summary call, then store the summary, its usage and retention in one commit."""
        if input is None:
            raise SessionStateError("CompactContext ran without the sequence to summarize through")
        state = read_state(context)
        if state is None or state.active_turn_id is None:
            raise SessionStateError("CompactContext ran without an active turn")
        turn_id = state.active_turn_id
        through = input.through_sequence
        previous = read_context_summary(context)
        after = 0 if previous is None else previous.last_sequence
        if through > after and self._deps.compacts:
            summary = await self._summarize(context, turn_id, previous, through)
            CONTEXT_SUMMARY.set(context, summary)
            settle_storage(context, self._deps.options, state.next_message_sequence)
            self._deps.event_writer(context, turn_id).write_event(
                AgentEventType.COMPACTION_FINISHED,
                {"generation": summary.generation, "through_sequence": through},
            )
        AGENT_STATE.set(context, replace(state, status=AgentSessionStatus.RUNNING_MODEL))
        return go_to_many(self._moves.to_run_model(context))

    async def _summarize(
        self, context: AsyncContext, turn_id: str, previous: ContextSummary | None, through: int
    ) -> ContextSummary:
        after = 0 if previous is None else previous.last_sequence
        messages = read_messages(context, after, through)
        writer = self._deps.event_writer(context, turn_id)
        writer.write_event(AgentEventType.COMPACTION_STARTED, {"through_sequence": through})
        policy = self._deps.options.compaction
        request = ContextSummaryRequest(
            flow_id=context.flow_id,
            turn_id=turn_id,
            attempt=context.attempt,
            previous_summary=previous,
            messages=tuple(messages),
            through_sequence=through,
            events=writer,
            heartbeat_function=context.heartbeat,
            # A session whose options dropped compaction since RunModel decided still finishes the summary.
            input_token_budget=0 if policy is None else policy.context_window_tokens,
            session_settings=read_turn_session_settings(context, turn_id),
        )
        await context.heartbeat()
        return await self._deps.tracing.trace_model_call(
            context,
            turn_id,
            messages,
            lambda: self._call_summarizer(context, request),
            lambda result: self._store_summary(context, turn_id, previous, through, result),
        )

    async def _call_summarizer(
        self, context: AsyncContext, request: ContextSummaryRequest
    ) -> ContextSummaryResult:
        runner = cast(ContextCompactionRunner, self._deps.runner)
        async with heartbeating(context):
            try:
                with runner_errors():
                    return _check_summary(await runner.summarize_context(request))
            finally:
                request.events.close()

    async def _store_summary(
        self,
        context: AsyncContext,
        turn_id: str,
        previous: ContextSummary | None,
        through: int,
        result: ContextSummaryResult,
    ) -> ContextSummary:
        record_usage(context, self._deps, turn_id, result.usage)
        return ContextSummary(
            generation=(0 if previous is None else previous.generation) + 1,
            first_sequence=1,
            last_sequence=through,
            text=result.text,
            created_at=format_time(now()),
        )
