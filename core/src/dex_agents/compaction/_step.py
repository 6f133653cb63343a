"""`CompactContext`: the one summary call, and the commit that stores its summary.

It makes the summary call and, in one commit, stores the summary, records the call's usage, applies
retention, and goes back to `RunModel`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from dex import AsyncContext, StepDecision, go_to_many

from dex_agents.compaction._capability import (
    ContextCompactionRunner,
    ContextSummaryRequest,
    ContextSummaryResult,
)
from dex_agents.compaction._decision import checked_summary
from dex_agents.events import AgentEventType
from dex_agents.persistence import AGENT_STATE, CONTEXT_SUMMARY
from dex_agents.session._errors import SessionStateError, runner_errors
from dex_agents.session._message_reads import read_messages
from dex_agents.session._settings import read_turn_session_settings
from dex_agents.session._state import (
    format_time,
    heartbeating,
    now,
    read_context_summary,
    read_state,
)
from dex_agents.session._step import SessionStep
from dex_agents.session._storage import settle_storage
from dex_agents.session._turn_lifecycle import record_usage
from dex_agents.values import (
    AgentSessionStatus,
    CompactContextInput,
    ContextSummary,
)

__all__ = ["CompactContext"]


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
                    return checked_summary(await runner.summarize_context(request))
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
