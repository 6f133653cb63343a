"""`RunModel`'s decision to compact, and the check of what a summary call returned.

`RunModel` decides before its model call, after the steering and cancellation check: with
`AgentSessionOptions.compaction`, it asks the runner for the next model input's size, and at the policy's
trigger for the last message to summarize. A cut after the current summary sends the turn to
`CompactContext` with no model call. No message is stored between the two, and `RunModel` compacts only
when the cut moves past the summary, so they cannot loop.
"""

from __future__ import annotations

import inspect

from dex_agents.compaction._capability import ContextCompactionRunner, ContextSummaryResult
from dex_agents.compaction._policy import CompactionPolicy
from dex_agents.limits import MAX_CONTEXT_SUMMARY_BYTES, utf8_size
from dex_agents.runner import AgentTurnContext
from dex_agents.session._errors import RunnerCallError, runner_errors
from dex_agents.session._state import stored_size
from dex_agents.values import AgentUsage

__all__ = ["checked_summary", "compaction_cutoff", "refused_input_cutoff"]


async def _call(value: object) -> object:
    return await value if inspect.isawaitable(value) else value


def _whole_number(value: object, method: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RunnerCallError(f"{method} must return an int, got {type(value).__name__}")
    return value


async def compaction_cutoff(
    policy: CompactionPolicy,
    runner: ContextCompactionRunner,
    turn: AgentTurnContext,
    next_message_sequence: int,
) -> int | None:
    """Return the last message to summarize before this model call, or `None` to make the call.

    Args:
        policy: The session's compaction policy.
        runner: The session's runner.
        turn: What the model call would see.
        next_message_sequence: The sequence the next stored message will take.

    Raises:
        RunnerCallError: If the runner's estimate or cut raises, is not an int, or names a message that is
            not stored yet.
    """
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
    return _checked_cutoff(cutoff, turn, next_message_sequence)


async def refused_input_cutoff(
    policy: CompactionPolicy,
    runner: ContextCompactionRunner,
    turn: AgentTurnContext,
    next_message_sequence: int,
) -> int | None:
    """Return the last message to summarize after the provider refused the input as too long.

    The provider's refusal overrides the trigger: the runner's estimate was too low, so the cut keeps at
    most half of it (and no more than the policy's retained budget). `None` when nothing past the current
    summary can be summarized, so a refusal right after a compaction ends the turn instead of looping.

    Raises:
        RunnerCallError: As `compaction_cutoff`.
    """
    with runner_errors():
        estimate = _whole_number(await _call(runner.estimate_input_tokens(turn)), "estimate_input_tokens")
        budget = min(policy.retained_token_budget, max(estimate // 2, 1))
        cutoff = await _call(runner.select_compaction_cutoff(turn, budget))
    return _checked_cutoff(cutoff, turn, next_message_sequence)


def _checked_cutoff(cutoff: object, turn: AgentTurnContext, next_message_sequence: int) -> int | None:
    if cutoff is None:
        return None
    through = _whole_number(cutoff, "select_compaction_cutoff")
    summarized = 0 if turn.context_summary is None else turn.context_summary.last_sequence
    if through <= summarized:
        return None
    if through >= next_message_sequence:
        raise RunnerCallError(
            f"select_compaction_cutoff returned {through}, but the last stored message is "
            f"{next_message_sequence - 1}"
        )
    return through


def checked_summary(result: object) -> ContextSummaryResult:
    """Return ``result`` if it is a storable summary.

    Raises:
        RunnerCallError: If it is not a `ContextSummaryResult`, its text is blank or too large, or its usage
            is not `AgentUsage`.
    """
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
