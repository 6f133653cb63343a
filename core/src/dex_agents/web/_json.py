"""The JSON a browser sees: snapshots without the Steps' own fields, and events with parsed payloads."""

from __future__ import annotations

import dataclasses
from typing import Any

from dex_agents._tools._arguments import parse_json_text
from dex_agents.values import AgentEvent, AgentMessagesPage, AgentSnapshot

__all__ = [
    "STEP_ONLY_TOOL_CALL_FIELDS",
    "event_json",
    "messages_page_json",
    "parse_json_text",
    "snapshot_json",
]

#: Tool call record fields that only the session's Steps use; a browser never sees them.
STEP_ONLY_TOOL_CALL_FIELDS = frozenset(
    {
        "tool_source_reference",
        "trace_context",
        "input_continuation",
        "input_answers",
        "task_answer_pending",
        "resumes_turn",
    }
)
_STEP_ONLY_MESSAGE_FIELDS = frozenset({"framework_item"})


def _without(record: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key not in names}


def snapshot_json(
    snapshot: AgentSnapshot, resume_token: str, *, include_session_settings: bool = False
) -> dict[str, Any]:
    """Return a snapshot as browser JSON, with the resume token to open its events from.

    Args:
        snapshot: The session's snapshot.
        resume_token: Where the events that follow this snapshot start (``""`` for the oldest retained).
        include_session_settings: Keep ``session_settings`` (the model, instructions or keys an application
            may keep there); left out by default.

    Returns:
        The snapshot's fields minus the Steps' own (``framework_item``, ``tool_source_reference``,
        ``trace_context``, ``input_continuation``, ``input_answers``, ``task_answer_pending``) and, unless
        asked for, ``session_settings``; plus ``resume_token``.
    """
    data = dataclasses.asdict(snapshot)
    data["messages"] = [_without(message, _STEP_ONLY_MESSAGE_FIELDS) for message in data["messages"]]
    data["tool_calls"] = [_without(record, STEP_ONLY_TOOL_CALL_FIELDS) for record in data["tool_calls"]]
    if not include_session_settings:
        del data["session_settings"]
    data["resume_token"] = resume_token
    return data


def messages_page_json(page: AgentMessagesPage) -> dict[str, Any]:
    """Return a page of older messages as browser JSON, without the Steps' own fields."""
    return {
        "messages": [
            _without(dataclasses.asdict(message), _STEP_ONLY_MESSAGE_FIELDS) for message in page.messages
        ],
        "next_before_sequence": page.next_before_sequence,
        "deleted_before_sequence": page.deleted_before_sequence,
    }


def event_json(event: AgentEvent) -> dict[str, Any]:
    """Return an event as browser JSON, its payload parsed."""
    return {
        "type": event.type,
        "turn_id": event.turn_id,
        "step_execution_id": event.step_execution_id,
        "attempt": event.attempt,
        "payload": parse_json_text(event.payload),
    }
