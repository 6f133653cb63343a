"""The one summary call of `CompactContext`, made with the agent's own model through Pydantic AI.

The conversation to summarize goes to the model as a transcript in one user prompt, after the previous
summary, under instructions that say what a summary must keep. A transcript rather than the original
messages, because a request that replays tool calls needs their tool definitions on several providers,
and a summary call offers no tools. When the request would not fit the session's context window (less the
answer's `max_tokens`), the oldest messages are left out and the prompt says how many.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents import ContextSummary
from pydantic_ai.direct import model_request_stream
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models import KnownModelName, Model
from pydantic_ai.settings import ModelSettings

from dex_agents_pydantic_ai._compaction import CONTEXT_SUMMARY_HEADER, TokenEstimator
from dex_agents_pydantic_ai._messages import HistoryUnit
from dex_agents_pydantic_ai._transcript import render_transcript

__all__ = ["DEFAULT_SUMMARY_INSTRUCTIONS", "left_out_note", "make_summary_call", "summary_call_messages"]

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You keep the running summary of a conversation between a user and an AI assistant that uses tools. "
    "The assistant will continue from your summary and the newest messages only, so your summary replaces "
    "everything it covers. Fold the earlier summary, when there is one, and the conversation after it into "
    "one summary. Keep what the assistant needs to go on: the user's goals, preferences and open requests; "
    "decisions and promises; facts, names, IDs, amounts and dates; which tool calls ran and what they "
    "returned, above all writes such as payments, refunds or messages sent, so that none is repeated; and "
    "tool calls that failed or whose outcome is unknown. Leave out greetings and small talk. Write short "
    "notes in the language of the conversation, with no preamble."
)
"""The summary call's instructions, unless the runner is given its own."""


def left_out_note(count: int) -> str:
    """Return the line that tells the summary model how many of the oldest messages did not fit."""
    if count == 1:
        return "[Dex] 1 earlier message did not fit in this request and is left out."
    return f"[Dex] {count} earlier messages did not fit in this request and are left out."


def summary_call_messages(
    previous_summary: ContextSummary | None,
    units: Sequence[HistoryUnit],
    *,
    instructions: str,
    input_token_budget: int,
    estimator: TokenEstimator,
) -> list[ModelMessage]:
    """Return the summary call's one request: the previous summary, then the conversation as a transcript.

    Args:
        previous_summary: The summary to fold in, or `None` the first time.
        units: The messages to summarize, rebuilt into Pydantic AI messages.
        instructions: The request's instructions.
        input_token_budget: The most input tokens the request may take; 0 or less for no limit.
        estimator: Counts the request's tokens, as the compaction estimate does.

    Returns:
        The messages to send.
    """
    kept = [(unit, render_transcript([unit.message])) for unit in units]
    request = _request(previous_summary, [lines for _, lines in kept], 0, instructions)
    if input_token_budget <= 0 or estimator([request]) <= input_token_budget:
        return [request]
    # The request without a transcript, with a note, plus each message's share: so leaving out the oldest
    # messages one by one needs no new request per step.
    total = estimator([_request(previous_summary, [], 1, instructions)])
    costs = [estimator([ModelRequest(parts=[UserPromptPart("\n".join(lines))])]) for _, lines in kept]
    total += sum(costs)
    left_out = 0
    while kept and total > input_token_budget:
        unit, _ = kept.pop(0)
        total -= costs.pop(0)
        left_out += unit.last_sequence - unit.first_sequence + 1
    return [_request(previous_summary, [lines for _, lines in kept], left_out, instructions)]


def _request(
    previous_summary: ContextSummary | None, blocks: Sequence[list[str]], left_out: int, instructions: str
) -> ModelRequest:
    sections: list[str] = []
    if previous_summary is not None:
        sections.append(f"{CONTEXT_SUMMARY_HEADER}\n\n{previous_summary.text}")
    if left_out:
        sections.append(left_out_note(left_out))
    lines = [line for block in blocks for line in block]
    heading = "The conversation since that summary:" if previous_summary is not None else "The conversation:"
    sections.append("\n".join([heading, *lines]))
    return ModelRequest(parts=[UserPromptPart("\n\n".join(sections))], instructions=instructions or None)


async def make_summary_call(
    model: Model | KnownModelName | str,
    messages: Sequence[ModelMessage],
    model_settings: ModelSettings | None,
) -> ModelResponse:
    """Make the one summary request through Pydantic AI and return the model's response.

    It streams, as every model call of the runner does, and drops the stream's events: the summary is not
    an answer to the user, so it is not written as live text.
    """
    async with model_request_stream(model, messages, model_settings=model_settings) as stream:
        async for _ in stream:
            pass
        return stream.get()
