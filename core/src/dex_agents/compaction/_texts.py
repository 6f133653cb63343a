"""The texts every runner shows its model about compaction, so a transcript reads the same in each."""

from __future__ import annotations

from collections.abc import Sequence

from dex_agents.values import ContextSummary

__all__ = [
    "CONTEXT_SUMMARY_HEADER",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "build_summary_prompt",
    "context_summary_text",
    "left_out_messages_note",
]

CONTEXT_SUMMARY_HEADER = "[Dex] Summary of the earlier conversation:"
"""The line before the summary text where a model input starts once the session has compacted."""

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
"""The instructions of a summary call, unless a runner is given its own."""


def context_summary_text(summary: ContextSummary) -> str:
    """Return the text a model input starts with once the session has compacted.

    Args:
        summary: The session's current summary.

    Returns:
        `CONTEXT_SUMMARY_HEADER`, a blank line, and the summary's text.
    """
    return f"{CONTEXT_SUMMARY_HEADER}\n\n{summary.text}"


def left_out_messages_note(count: int) -> str:
    """Return the line that tells a summary model how many of the oldest messages did not fit its request.

    Args:
        count: How many stored messages were left out; at least 1.

    Returns:
        ``[Dex] <count> earlier messages did not fit in this request and are left out.``, in the singular
        for one message.

    Raises:
        ValueError: If ``count`` is below 1: with nothing left out, a request carries no note.
    """
    if isinstance(count, bool) or count < 1:
        raise ValueError(f"a left-out note needs at least one left-out message, got {count!r}")
    if count == 1:
        return "[Dex] 1 earlier message did not fit in this request and is left out."
    return f"[Dex] {count} earlier messages did not fit in this request and are left out."


def build_summary_prompt(
    previous_summary: ContextSummary | None, transcript_lines: Sequence[str], *, left_out: int = 0
) -> str:
    """Return the one user prompt of a summary call: what to fold in, then the conversation as a transcript.

    The previous summary comes first under `CONTEXT_SUMMARY_HEADER`, then `left_out_messages_note` when
    messages were left out, then the transcript under a heading that says whether it follows a summary.

    Args:
        previous_summary: The summary to fold in, or `None` the first time.
        transcript_lines: The messages to summarize, one line per message (or per tool call), in order.
        left_out: How many of the oldest messages to summarize did not fit the request.

    Returns:
        The prompt, its sections separated by blank lines.
    """
    sections: list[str] = []
    if previous_summary is not None:
        sections.append(context_summary_text(previous_summary))
    if left_out:
        sections.append(left_out_messages_note(left_out))
    heading = "The conversation since that summary:" if previous_summary is not None else "The conversation:"
    sections.append("\n".join([heading, *transcript_lines]))
    return "\n\n".join(sections)
