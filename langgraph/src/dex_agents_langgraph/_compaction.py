"""Context compaction for `LangGraphRunner`: the token estimate, the cut, the summary call and its message.

Once the session has compacted, the model input starts with the summary as a LangChain `HumanMessage`
(`context_summary_text`, under the core's header), then the stored messages after it. The summary message
has a fixed ID per summary, so it is part of the replayed history, never one of the turn's new messages.

`SummarizationMiddleware` cannot be the summarizer: it rewrites the graph's state, which the session
rebuilds from its stored messages on every model Step, and its summary is not handed to anyone. The
runner's own summary call uses the model given as ``summary_model`` and LangChain's
`count_tokens_approximately` for every estimate.

The cut is made only at a turn's first model call: later model calls of a turn resume a checkpoint whose
history must match the stored messages it was exported with, so `select_compaction_cutoff` answers `None`
there and the call goes ahead as is.
"""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents import AgentTurnContext, ContextSummary, context_summary_text
from dex_agents.compaction import build_summary_prompt
from dex_agents.values import AgentMessage, MessageRole
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

__all__ = [
    "select_cutoff",
    "summary_message",
    "summary_prompt",
]

# count_tokens_approximately's defaults, so a stored message's share matches the whole input's estimate.
_CHARACTERS_PER_TOKEN = 4.0
_TOKENS_PER_MESSAGE = 3


def summary_message(summary: ContextSummary) -> HumanMessage:
    """Return the message the model input starts with once the session has compacted."""
    return HumanMessage(
        content=context_summary_text(summary), id=f"dex-context-summary-{summary.last_sequence}"
    )


def _transcript_line(message: AgentMessage) -> str:
    if message.role is MessageRole.TOOL:
        return f"tool {message.tool_name} [{message.tool_call_id}] result: {message.tool_output or ''}"
    if message.tool_call_id is not None:
        return (
            f"assistant calls {message.tool_name} {message.tool_arguments or '{}'} [{message.tool_call_id}]"
        )
    return f"{message.role.value}: {message.text or ''}"


def _tokens(text: str) -> int:
    return int(len(text) / _CHARACTERS_PER_TOKEN) + _TOKENS_PER_MESSAGE


def summary_prompt(
    previous_summary: ContextSummary | None, messages: Sequence[AgentMessage], input_token_budget: int
) -> str:
    """Return the summary call's one prompt; the oldest messages are left out while it does not fit."""
    lines = [_transcript_line(message) for message in messages]
    left_out = 0
    prompt = build_summary_prompt(previous_summary, lines)
    while (
        lines
        and input_token_budget > 0
        and count_tokens_approximately([HumanMessage(prompt)]) > input_token_budget
    ):
        lines.pop(0)
        left_out += 1
        prompt = build_summary_prompt(previous_summary, lines, left_out=left_out)
    return prompt


def estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """LangChain's approximate token count of the messages."""
    return count_tokens_approximately(messages)


def select_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """Return the sequence of the last stored message to summarize, or `None` when no cut is allowed.

    A cut may follow a message when every tool call up to it has its result up to it and the next message
    is not another part of the same tool-calling `AIMessage`; never the last message (the turn's user
    message). Of the allowed cuts, the earliest whose newer messages fit the budget, else the latest.
    """
    if turn.framework_run_state is not None:
        return None
    messages = turn.messages
    kept_after = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        kept_after[index] = kept_after[index + 1] + _tokens(_transcript_line(messages[index]))
    open_calls: set[str] = set()
    cuts: list[int] = []
    for index, message in enumerate(messages[:-1]):
        if message.role is MessageRole.TOOL and message.tool_call_id is not None:
            open_calls.discard(message.tool_call_id)
        elif message.role is MessageRole.ASSISTANT and message.tool_call_id is not None:
            open_calls.add(message.tool_call_id)
        following = messages[index + 1]
        continues_response = following.role is MessageRole.ASSISTANT and following.tool_call_id is not None
        if not open_calls and not continues_response:
            cuts.append(index)
    for index in cuts:
        if kept_after[index + 1] <= retained_token_budget:
            return messages[index].sequence
    return messages[cuts[-1]].sequence if cuts else None
