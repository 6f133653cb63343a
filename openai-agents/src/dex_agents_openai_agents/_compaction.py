"""Context compaction for `OpenAIAgentsRunner`: the token estimate, the cut, and the summary call.

The session asks before every model call how large the next model input is. The runner rebuilds that input
as `run_model_step` would hand it to the SDK (the summary, the stored messages after it, the plan note and
the turn's own items from the run state) and counts a token per four characters of the text the model
reads. Once the session decides to compact, the cut falls only at the end of an earlier turn: a turn's
items are whole there (every call has its result, no reasoning item is parted from the item it belongs
to), and the current turn's messages stay, so its run state still counts them.

The summary call is one SDK run of a tool-less agent with the starting agent's model (or the one the
session settings choose) and one user item: the core's `build_summary_prompt` of the previous summary and
the messages as a transcript. Its answer is the summary; the session stores it, and every later model
input starts with it as a user item (`context_summary_text`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from agents import TResponseInputItem
from dex_agents import build_summary_prompt
from dex_agents.values import AgentMessage, ContextSummary

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "estimate_item_tokens",
    "select_turn_cutoff",
    "summary_prompt",
]

CHARACTERS_PER_TOKEN = 4
"""The estimate's ratio: about right for English prose on current tokenizers, low for code."""

# Keys whose values are identifiers or markers, not text the model reads as such.
_NOT_TEXT_KEYS = frozenset(
    {"type", "id", "call_id", "role", "status", "approval_request_id", "server_label", "encrypted_content"}
)


def _texts(value: object, key: str | None = None) -> Iterator[str]:
    if key in _NOT_TEXT_KEYS:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for inner_key, inner in cast(Mapping[str, object], value).items():
            yield from _texts(inner, inner_key)
    elif isinstance(value, list):
        for inner in cast(list[object], value):
            yield from _texts(inner)


def estimate_item_tokens(items: Sequence[TResponseInputItem | Mapping[str, Any]]) -> int:
    """Estimate the tokens of SDK input items: their text characters over `CHARACTERS_PER_TOKEN`.

    It counts message text, tool names, arguments and outputs, and reasoning summaries; IDs, types and
    encrypted reasoning are left out. It makes no call and loads no tokenizer.

    Args:
        items: SDK input items.

    Returns:
        The estimated token count, rounded up.
    """
    characters = sum(len(text) for item in items for text in _texts(item))
    return -(-characters // CHARACTERS_PER_TOKEN)


def _message_tokens(message: AgentMessage) -> int:
    try:
        loaded: object = json.loads(message.framework_item)
    except ValueError:
        loaded = message.framework_item
    return estimate_item_tokens([cast(Mapping[str, Any], loaded)] if isinstance(loaded, dict) else [])


def select_turn_cutoff(
    messages: Sequence[AgentMessage],
    current_turn_id: str,
    *,
    unstored_tokens: int,
    retained_token_budget: int,
) -> int | None:
    """Return the last stored sequence to summarize, or `None` when no earlier turn can be cut.

    The cut falls at the end of an earlier turn. Of those it takes the earliest whose newer messages, with
    the turn's unstored items, fit the budget, so as much as fits stays verbatim; when none fits, the latest.

    Args:
        messages: The stored messages after the current summary, oldest first.
        current_turn_id: The running turn, whose messages are never cut.
        unstored_tokens: The tokens of the turn's items in the run state and the notes, kept whatever the cut.
        retained_token_budget: The tokens to keep after the cut.
    """
    tokens = [_message_tokens(message) for message in messages]
    cuts: list[int] = []
    for index, message in enumerate(messages[:-1]):
        if message.turn_id == current_turn_id:
            break
        if messages[index + 1].turn_id != message.turn_id:
            cuts.append(index)
    for index in cuts:
        if sum(tokens[index + 1 :]) + unstored_tokens <= retained_token_budget:
            return messages[index].sequence
    return messages[cuts[-1]].sequence if cuts else None


def _transcript_line(message: AgentMessage) -> str | None:
    if message.role.value == "tool":
        return f"tool {message.tool_name} [{message.tool_call_id}]: {message.tool_output}"
    if message.tool_name:
        return f"assistant calls {message.tool_name} {message.tool_arguments} [{message.tool_call_id}]"
    if message.text:
        return f"{message.role.value}: {message.text}"
    # Reasoning and hosted tool items without text carry nothing a summary could keep.
    return None


def summary_prompt(
    previous_summary: ContextSummary | None, messages: Sequence[AgentMessage], input_token_budget: int
) -> str:
    """Return the summary call's one user prompt, leaving out the oldest messages that do not fit.

    Args:
        previous_summary: The summary to fold in, or `None` the first time.
        messages: The messages to summarize.
        input_token_budget: The most input tokens the call may take; 0 or less for no limit.

    Returns:
        The prompt (`build_summary_prompt`).
    """
    lines = [(line, message) for message in messages if (line := _transcript_line(message)) is not None]
    left_out = 0
    while True:
        prompt = build_summary_prompt(previous_summary, [line for line, _ in lines], left_out=left_out)
        fits = -(-len(prompt) // CHARACTERS_PER_TOKEN) <= input_token_budget
        if input_token_budget <= 0 or fits or not lines:
            return prompt
        lines.pop(0)
        left_out += 1
