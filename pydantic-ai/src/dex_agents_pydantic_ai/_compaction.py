"""Context compaction for `PydanticAiRunner`: the token estimate, the cut, and the summary in the model input.

The session asks before every model call how large the next model input is. The runner rebuilds that input
as `run_model_step` would send it (the summary, the stored messages after it, the turn's own messages from
the run state) and counts it with a `TokenEstimator`, by default `estimate_tokens`: a token per four
characters of the text the model reads. Once the session decides to compact, the cut falls only after a
whole model response or a request of tool results with no tool call still open, so no tool call is ever
summarized away from its result and no split response is cut between its pieces.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeAlias

from dex_agents import ContextSummary
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryFeedbackPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPromptPart,
)

from dex_agents_pydantic_ai._messages import HistoryUnit

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "CONTEXT_SUMMARY_HEADER",
    "TokenEstimator",
    "estimate_tokens",
    "select_cutoff",
    "summary_request",
]

CONTEXT_SUMMARY_HEADER = "[Dex] Summary of the earlier conversation:"
"""The line before the summary text where the model input starts, once the session has compacted."""

CHARACTERS_PER_TOKEN = 4
"""The default estimate's ratio: about right for English prose on current tokenizers, low for code."""

TokenEstimator: TypeAlias = Callable[[Sequence[ModelMessage]], int]
"""Counts the tokens of Pydantic AI messages, in the unit of the session's `CompactionPolicy`."""


def estimate_tokens(messages: Sequence[ModelMessage]) -> int:
    """Estimate the tokens of ``messages``: their characters divided by `CHARACTERS_PER_TOKEN`, rounded up.

    It counts the text a model reads: system prompts, user prompts (text only; files and images are not
    counted), instructions carried by a request, tool results, retry feedback, response text, thinking,
    and each tool call's name and JSON arguments. It makes no call and loads no tokenizer, so the session
    can ask before every model call.

    Args:
        messages: Pydantic AI messages.

    Returns:
        The estimated token count.
    """
    characters = sum(len(text) for text in _texts(messages))
    return -(-characters // CHARACTERS_PER_TOKEN)


def _texts(messages: Sequence[ModelMessage]) -> Iterator[str]:
    for message in messages:
        if isinstance(message, ModelRequest):
            if message.instructions:
                yield message.instructions
            for part in message.parts:
                if isinstance(part, SystemPromptPart):
                    yield part.content
                elif isinstance(part, UserPromptPart):
                    yield from _prompt_texts(part)
                elif isinstance(part, BaseToolReturnPart):
                    yield part.model_response_str()
                elif isinstance(part, RetryFeedbackPart):
                    yield part.model_response()
        else:
            for part in message.parts:
                if isinstance(part, TextPart | ThinkingPart):
                    yield part.content
                elif isinstance(part, ToolCallPart | NativeToolCallPart):
                    yield part.tool_name
                    yield part.args_as_json_str()
                elif isinstance(part, BaseToolReturnPart):
                    yield part.model_response_str()


def _prompt_texts(part: UserPromptPart) -> Iterator[str]:
    if isinstance(part.content, str):
        yield part.content
        return
    for item in part.content:
        if isinstance(item, str):
            yield item
        elif isinstance(item, TextContent):
            yield item.content


def summary_request(summary: ContextSummary) -> ModelRequest:
    """Return the request the model input starts with once the session has compacted.

    The summary goes in as a user prompt under `CONTEXT_SUMMARY_HEADER`, which every provider accepts at
    the start of a conversation; Pydantic AI merges it with the system prompts before it and with a user
    prompt right after it.
    """
    return ModelRequest(parts=[UserPromptPart(f"{CONTEXT_SUMMARY_HEADER}\n\n{summary.text}")])


def select_cutoff(
    units: Sequence[HistoryUnit],
    *,
    unstored_tokens: int,
    retained_token_budget: int,
    estimator: TokenEstimator,
) -> int | None:
    """Return the last stored sequence to summarize, or `None` when no cut is allowed.

    A cut may follow a model response, or a request of tool results, when every tool call up to it has its
    result up to it; never the last unit, which holds the turn's user message. Of the allowed cuts it
    takes the earliest whose newer messages, with the turn's unstored ones, fit the budget, so as much as
    fits stays verbatim; when none fits, the latest.

    Args:
        units: The stored messages after the current summary, rebuilt into Pydantic AI messages.
        unstored_tokens: The tokens of the turn's messages in the run state, which are kept whatever the cut.
        retained_token_budget: The tokens to keep after the cut.
        estimator: Counts the tokens of each unit.
    """
    kept_after = [0] * (len(units) + 1)
    for index in range(len(units) - 1, -1, -1):
        kept_after[index] = kept_after[index + 1] + estimator([units[index].message])
    open_calls: set[str] = set()
    cuts: list[int] = []
    for index, unit in enumerate(units[:-1]):
        message = unit.message
        if isinstance(message, ModelResponse):
            open_calls.update(call.tool_call_id for call in message.tool_calls)
            ends_exchange = True
        else:
            answered = {
                tool_call_id
                for part in message.parts
                if isinstance(tool_call_id := getattr(part, "tool_call_id", None), str)
            }
            open_calls -= answered
            ends_exchange = bool(answered)
        if ends_exchange and not open_calls:
            cuts.append(index)
    for index in cuts:
        if kept_after[index + 1] + unstored_tokens <= retained_token_budget:
            return units[index].last_sequence
    return units[cuts[-1]].last_sequence if cuts else None
