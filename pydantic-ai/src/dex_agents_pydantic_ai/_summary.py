"""The one summary call of `CompactContext`, made with the agent's own model through Pydantic AI.

The conversation to summarize goes to the model as a transcript in one user prompt, after the previous
summary, under instructions that say what a summary must keep; the core writes the prompt
(`dex_agents.build_summary_prompt`), so every runner's summary call reads alike. A transcript rather
than the original messages, because a request that replays tool calls needs their tool definitions on
several providers, and a summary call offers no tools. When the request would not fit the session's
context window (less the answer's `max_tokens`), the oldest messages are left out and the prompt says how
many.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from dex_agents import ContextSummary, build_summary_prompt
from pydantic_ai.direct import model_request_stream
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings, merge_model_settings

from dex_agents_pydantic_ai._call_metadata import CallRequest, system_instructions
from dex_agents_pydantic_ai._compaction import TokenEstimator
from dex_agents_pydantic_ai._messages import HistoryUnit
from dex_agents_pydantic_ai._transcript import render_transcript

__all__ = ["make_summary_call", "summary_call_messages"]


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
    lines = [line for block in blocks for line in block]
    prompt = build_summary_prompt(previous_summary, lines, left_out=left_out)
    return ModelRequest(parts=[UserPromptPart(prompt)], instructions=instructions or None)


async def make_summary_call(
    model: Model, messages: Sequence[ModelMessage], model_settings: ModelSettings | None
) -> tuple[ModelResponse, CallRequest]:
    """Make the one summary request through Pydantic AI and return the model's response and its request.

    It streams, as every model call of the runner does, and drops the stream's events: the summary is not
    an answer to the user, so it is not written as live text.
    """
    started = time.perf_counter()
    first_event: float | None = None
    async with model_request_stream(model, messages, model_settings=model_settings) as stream:
        async for _ in stream:
            if first_event is None:
                first_event = time.perf_counter()
        response = stream.get()
    request = CallRequest(
        # The model's own settings under the runner's, as Pydantic AI merges them for the request.
        settings=merge_model_settings(model.settings, model_settings),
        system_instructions=system_instructions(messages),
        time_to_first_chunk_seconds=None if first_event is None else first_event - started,
    )
    return response, request
