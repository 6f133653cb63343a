"""Context compaction for Stepwise: the token count, the cut, and the summary call's one request.

Tokens are counted with LiteLLM's ``token_counter`` for a model LiteLLM's model map lists, and as a token
per `CHARACTERS_PER_TOKEN` characters otherwise. A cut falls only right after a whole model response whose
tool calls all have their results stored, so no tool call is summarized away from its result and the pieces
of one stored response (its text, then one message per call) are never split.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, cast

from dex_agents.compaction import build_summary_prompt, context_summary_text
from dex_agents.stepwise._litellm import litellm
from dex_agents.stepwise._messages import (
    ChatMessage,
    chat_message_of,
    render_chat_transcript,
    replay_chat_messages,
)
from dex_agents.stepwise._tools import ListedTool, chat_tool
from dex_agents.values import AgentMessage, ContextSummary

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "TokenCounter",
    "count_tokens",
    "select_cutoff",
    "summary_chat_message",
    "summary_request_messages",
]

CHARACTERS_PER_TOKEN = 4
"""The fallback count's ratio: about right for English prose on current tokenizers, low for code."""

TokenCounter: TypeAlias = Callable[[Sequence[Mapping[str, object]]], int]
"""Counts the tokens of chat messages for one model."""


def _model_map_lists(model_name: str) -> bool:
    # A dictionary lookup rather than litellm.get_model_info, which prints a banner for every unknown model.
    cost_map = cast(Mapping[str, object], litellm.model_cost)  # pyright: ignore[reportUnknownMemberType]
    return model_name in cost_map or model_name.partition("/")[2] in cost_map


def count_tokens(
    model_name: str, messages: Sequence[Mapping[str, object]], tools: Sequence[ListedTool] = ()
) -> int:
    """Count the tokens of a request: LiteLLM's count for a model it knows, else characters divided by 4.

    Args:
        model_name: The LiteLLM model string (or another client's model name).
        messages: The chat messages.
        tools: The tools the request offers.

    Returns:
        The token count.
    """
    chat_tools = [chat_tool(tool) for tool in tools]
    if _model_map_lists(model_name):
        try:
            return int(
                litellm.token_counter(  # pyright: ignore[reportUnknownMemberType]
                    model=model_name,
                    messages=[dict(message) for message in messages],
                    tools=cast(Any, chat_tools or None),
                )
            )
        except Exception:
            pass  # a request LiteLLM cannot count still has characters to count
    characters = sum(len(text) for text in _texts(messages))
    characters += sum(len(json.dumps(tool, ensure_ascii=False)) for tool in chat_tools)
    return -(-characters // CHARACTERS_PER_TOKEN)


def _texts(messages: Sequence[Mapping[str, object]]) -> Iterator[str]:
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            for part in cast(list[object], content):
                if isinstance(part, Mapping):
                    yield str(cast(Mapping[str, object], part).get("text", ""))
        for call in cast(list[Mapping[str, Any]], message.get("tool_calls") or []):
            function = cast(Mapping[str, Any], call.get("function") or {})
            yield str(function.get("name") or "")
            yield str(function.get("arguments") or "")


def summary_chat_message(summary: ContextSummary) -> ChatMessage:
    """Return the user message a model input starts with (after the instructions) once the session compacted.

    A user message, which every provider takes at the start of a conversation; LiteLLM merges it with a user
    message right after it for providers that need roles to alternate.
    """
    return {"role": "user", "content": context_summary_text(summary)}


def _calls_of(chat: Mapping[str, object]) -> set[str]:
    return {str(call.get("id")) for call in cast(list[Mapping[str, Any]], chat.get("tool_calls") or [])}


def _cut_indexes(messages: Sequence[AgentMessage]) -> list[int]:
    """Return the indexes of the messages a cut may directly follow.

    A cut may follow a model response that has no tool call (after its last stored piece), or the stored
    result that completes the calls of a response; never a point a tool result follows, so the messages
    after a cut never start with a result. A response whose calls did not all get a stored result is no cut
    point; the next user message or response ends it, as a request replays it.
    """
    chats = [chat_message_of(message) for message in messages]
    cuts: list[int] = []
    waiting: set[str] = set()  # the calls of the current response without a stored result
    for index, chat in enumerate(chats):
        role = chat["role"]
        if role == "tool":
            waiting.discard(str(chat.get("tool_call_id")))
        elif role == "assistant" and _calls_of(chat) and index and chats[index - 1]["role"] == "assistant":
            waiting |= _calls_of(chat)  # another piece of the same response
        else:
            waiting = _calls_of(chat)
        following = chats[index + 1] if index + 1 < len(chats) else None
        # A result never starts the messages after a cut, and a call right after an answer is its piece.
        joins = following is not None and (
            following["role"] == "tool"
            or (role == "assistant" and following["role"] == "assistant" and bool(_calls_of(following)))
        )
        if role in ("assistant", "tool") and not waiting and not joins:
            cuts.append(index)
    return cuts


def select_cutoff(
    messages: Sequence[AgentMessage], *, unstored_tokens: int, retained_token_budget: int, count: TokenCounter
) -> int | None:
    """Return the last stored sequence to summarize, or `None` when no cut is allowed.

    Of the allowed cuts it takes the earliest whose newer messages, with the turn's unstored ones, fit the
    budget, so as much as fits stays verbatim; when none fits, the latest.

    Args:
        messages: The stored messages after the current summary.
        unstored_tokens: The tokens of the turn's unstored messages, which every cut keeps.
        retained_token_budget: The tokens to keep after the cut.
        count: Counts the tokens of chat messages.
    """
    cuts = _cut_indexes(messages)
    if not cuts:
        return None
    kept_after = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        kept_after[index] = kept_after[index + 1] + count([chat_message_of(messages[index])])
    for index in cuts:
        if kept_after[index + 1] + unstored_tokens <= retained_token_budget:
            return messages[index].sequence
    return messages[cuts[-1]].sequence


def _groups(messages: Sequence[AgentMessage]) -> list[Sequence[AgentMessage]]:
    """Split messages at the allowed cuts: each group ends a response (the last may not)."""
    groups: list[Sequence[AgentMessage]] = []
    start = 0
    for index in _cut_indexes(messages):
        groups.append(messages[start : index + 1])
        start = index + 1
    if start < len(messages):
        groups.append(messages[start:])
    return groups


def summary_request_messages(
    previous_summary: ContextSummary | None,
    messages: Sequence[AgentMessage],
    *,
    instructions: str,
    input_token_budget: int,
    count: TokenCounter,
) -> list[ChatMessage]:
    """Return the summary call's messages: the instructions, then one prompt with the conversation.

    The prompt is `dex_agents.build_summary_prompt`'s: the previous summary, then the messages as a
    transcript. When the request would take more than ``input_token_budget`` tokens, as few of the oldest
    messages as needed are left out, up to a cut (a whole response with its results at a time), and the
    prompt says how many with `dex_agents.left_out_messages_note`. When even the previous summary alone
    does not fit, every message is left out and the request goes as it is.

    Args:
        previous_summary: The summary to fold in, or `None` the first time.
        messages: The stored messages to summarize.
        instructions: The summary call's instructions; blank for none.
        input_token_budget: The most input tokens the request may take.
        count: Counts the tokens of chat messages.

    Returns:
        The chat messages of the summary call.
    """
    head: list[ChatMessage] = [{"role": "system", "content": instructions}] if instructions.strip() else []
    groups = _groups(messages)
    blocks = [render_chat_transcript(replay_chat_messages(group)) for group in groups]

    def request(dropped: int) -> list[ChatMessage]:
        lines = [line for block in blocks[dropped:] for line in block]
        left_out = sum(len(group) for group in groups[:dropped])
        prompt = build_summary_prompt(previous_summary, lines, left_out=left_out)
        return [*head, {"role": "user", "content": prompt}]

    if count(request(0)) <= input_token_budget:
        return request(0)
    # First an estimate that counts each block once: the request without the transcript (with the longest
    # note) plus each block's share, with the line break before it. Then a count of the real request moves
    # the estimate by whole blocks, so the request leaves out as few messages as fit, in a few counts.
    total = count(request(len(blocks)))
    costs = [count([{"role": "user", "content": "\n" + "\n".join(block)}]) for block in blocks]
    total += sum(costs)
    dropped = 0
    while dropped < len(blocks) and total > input_token_budget:
        total -= costs[dropped]
        dropped += 1
    while dropped < len(blocks) and count(request(dropped)) > input_token_budget:
        dropped += 1
    while dropped > 0 and count(request(dropped - 1)) <= input_token_budget:
        dropped -= 1
    return request(dropped)
