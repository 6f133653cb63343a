"""Context compaction for `ClaudeAgentRunner`: the session's summary as the root of the CLI transcript.

The model input is the CLI's transcript, which each completed turn stores on its last message. Once the
session has compacted, a turn gets only the messages after the summary, so the transcript it rebuilds
starts with the first kept turn's entries, whose first parent link names an entry of a summarized turn.
The runner puts a user entry holding the summary (`dex_agents.context_summary_text`) in front and points
every such dangling link at it, so the CLI reads the summary, then the kept turns, then the new prompt.
When no kept turn carries a transcript (the summary covers every earlier turn), the run starts a new CLI
conversation whose prompt opens with the summary, a text block of its own.

The cut falls only at the end of an earlier turn (its last message, which carries that turn's transcript),
since a turn's transcript entries are stored together, and a completed or closed turn has a result for
every tool call. The estimate counts the text a model reads, a token per four characters: the summary, the
stored messages' texts, tool names, arguments and outputs, and the running turn's items.

`summarize_context` is one CLI run of its own: a new conversation with no tools and no MCP servers, the
core's summary instructions as its system prompt and `build_summary_prompt` as its one prompt.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from dex_agents import ContextSummary, context_summary_text
from dex_agents.runner import AgentTurnContext
from dex_agents.values import AgentMessage, MessageRole

from dex_agents_claude_agent_sdk._state import ClaudeRunState

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "estimate_input_tokens",
    "select_cutoff",
    "summary_lines",
    "with_summary_root",
]

CHARACTERS_PER_TOKEN = 4
"""The estimate's ratio: about right for English prose on current tokenizers, low for code."""


def estimate_input_tokens(turn: AgentTurnContext) -> int:
    """Estimate the tokens of the next run's model input (see the module docstring)."""
    characters = 0 if turn.context_summary is None else len(context_summary_text(turn.context_summary))
    characters += sum(_characters(message) for message in turn.messages)
    if turn.framework_run_state is not None:
        try:
            state = ClaudeRunState.from_json(turn.framework_run_state)
        except ValueError:
            state = None  # run_model_step ends the turn saying why
        if state is not None:
            characters += len(json.dumps(list(state.turn_items)))
    return -(-characters // CHARACTERS_PER_TOKEN)


def select_cutoff(turn: AgentTurnContext, retained_token_budget: int) -> int | None:
    """Return the last message to summarize: the end of an earlier turn, or `None` when there is none.

    Of the allowed cuts it takes the earliest whose newer messages fit the budget, so as much as fits stays
    verbatim; when none fits, the latest.
    """
    messages = list(turn.messages)
    kept_after = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        kept_after[index] = kept_after[index + 1] + -(-_characters(messages[index]) // CHARACTERS_PER_TOKEN)
    cuts = [
        index
        for index, message in enumerate(messages)
        if message.turn_id != turn.turn_id and _ends_turn(message)
    ]
    for index in cuts:
        if kept_after[index + 1] <= retained_token_budget:
            return messages[index].sequence
    return messages[cuts[-1]].sequence if cuts else None


def summary_lines(messages: Sequence[AgentMessage]) -> list[str]:
    """Render messages for the summary prompt, one line per text, tool call or tool result."""
    lines: list[str] = []
    for message in messages:
        if message.role is MessageRole.TOOL:
            lines.append(f"tool {message.tool_name or '?'} result: {message.tool_output or ''}")
        elif message.tool_name:
            lines.append(f"assistant calls {message.tool_name} {message.tool_arguments or '{}'}")
        elif message.text:
            lines.append(f"{message.role.value}: {message.text}")
    return lines


def with_summary_root(summary: ContextSummary, entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return the kept transcript entries behind a user entry holding the summary (see the docstring).

    Entries whose parent is not among them point at the summary entry instead. Without such an entry the
    transcript is whole (its conversation started after the summary, with it in its prompt) and is returned
    as it is.
    """
    kept = [dict(entry) for entry in entries]
    known = {entry.get("uuid") for entry in kept if entry.get("uuid")}
    dangling = [entry for entry in kept if entry.get("parentUuid") and entry.get("parentUuid") not in known]
    if not dangling:
        return kept
    first = next((entry for entry in kept if entry.get("type") in ("user", "assistant")), dangling[0])
    session = str(first.get("sessionId", ""))
    root_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"dex-agents:{session}:summary:{summary.last_sequence}"))
    for entry in dangling:
        entry["parentUuid"] = root_id
    root: dict[str, Any] = {
        "parentUuid": None,
        "isSidechain": False,
        "type": "user",
        "message": {"role": "user", "content": context_summary_text(summary)},
        "uuid": root_id,
        "timestamp": first.get("timestamp") or _now(),
        **{
            key: first[key]
            for key in ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch")
            if key in first
        },
    }
    return [root, *kept]


def _ends_turn(message: AgentMessage) -> bool:
    """Whether a message is the last of a completed or closed turn: it carries that turn's transcript."""
    try:
        item: object = json.loads(message.framework_item)
    except json.JSONDecodeError:
        return False
    return isinstance(item, dict) and "cli_session" in cast(dict[str, Any], item)


def _characters(message: AgentMessage) -> int:
    return sum(
        len(text or "")
        for text in (message.text, message.tool_name, message.tool_arguments, message.tool_output)
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
