"""The run state of a turn that waits for a tool call, and the session store that carries the transcript.

The Claude Code CLI keeps a conversation as a transcript addressed by its session ID. The runner never
leaves it on a Worker's disk: a `TranscriptStore` (the SDK's `SessionStore` protocol) hands the CLI the
transcript at the start of every run and collects what the run appends. Entries of earlier turns travel in
the stored messages' `framework_item`; entries of the running turn travel in `ClaudeRunState`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from claude_agent_sdk.types import SessionKey, SessionStoreEntry
from dex_agents import RunStateFormat, RunStateFormatError

__all__ = [
    "RUN_STATE_FORMAT",
    "ClaudeRunState",
    "PendingToolUse",
    "TranscriptStore",
    "deferred_permission_entries",
    "tool_result_entries",
]

RUN_STATE_FORMAT = RunStateFormat("dex-agents-claude-agent-sdk/run-state", 1, "ClaudeAgentRunner")
"""The envelope of `ClaudeRunState` (its fields are those of the 0.1.0 state, which had no `format`)."""

# dex-agents-claude-agent-sdk 0.1.0 wrote these keys and no `format`; a turn that waits for an approval
# across the upgrade goes on with them.
_UNNAMED_STATE_KEYS = {"version", "session_id", "turn_entries", "turn_items", "pending"}

_ENTRY_METADATA = ("userType", "entrypoint", "cwd", "sessionId", "version", "gitBranch")
"""What an entry the CLI writes for a tool result copies from its tool use's entry."""


@dataclass(frozen=True)
class PendingToolUse:
    """The tool call a run deferred: the one the next run resumes with its recorded result.

    Attributes:
        tool_use_id: The model's tool use ID.
        tool_name: The user's tool name, without the MCP prefix, or the name of one of Claude Code's own
            tools (`Bash`) for a permission request.
        input: The call's arguments.
        is_permission_request: A call of one of Claude Code's own tools whose permission request waits for
            the session's approval (`permission_requests_as_approvals`), not a call of the runner's tools.
    """

    tool_use_id: str
    tool_name: str
    input: Mapping[str, Any]
    is_permission_request: bool = False


@dataclass(frozen=True)
class ClaudeRunState:
    """What the next `run_model_step` of a turn needs to resume the CLI session.

    Attributes:
        session_id: The CLI session.
        turn_entries: The transcript entries this turn's runs appended, in order.
        turn_items: The turn's conversation items so far (text, tool uses, tool results), in order.
        pending: The deferred tool call the CLI waits for.
    """

    session_id: str
    turn_entries: Sequence[Mapping[str, Any]]
    turn_items: Sequence[Mapping[str, Any]]
    pending: PendingToolUse

    def to_json(self) -> str:
        """Return the state as compact JSON text in `RUN_STATE_FORMAT`'s envelope."""
        pending: dict[str, Any] = {
            "tool_use_id": self.pending.tool_use_id,
            "tool_name": self.pending.tool_name,
            "input": dict(self.pending.input),
        }
        if self.pending.is_permission_request:
            # Only then: a state without it reads as before (and as release 0.1.0 wrote it).
            pending["permission_request"] = True
        return RUN_STATE_FORMAT.wrap(
            {
                "session_id": self.session_id,
                "turn_entries": list(self.turn_entries),
                "turn_items": list(self.turn_items),
                "pending": pending,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ClaudeRunState:
        """Parse a state that `to_json` wrote (or that version 0.1.0 of this package wrote).

        Args:
            text: The framework run state.

        Returns:
            The state.

        Raises:
            RunStateFormatError: If the text is not JSON, is another runner's state or another version, or
                lacks a field (the message says which).
        """
        data = _unnamed_state(text)
        if data is None:
            data = RUN_STATE_FORMAT.unwrap(text)
        try:
            pending = cast(dict[str, Any], data["pending"])
            return cls(
                session_id=str(data["session_id"]),
                turn_entries=list(cast(list[dict[str, Any]], data["turn_entries"])),
                turn_items=list(cast(list[dict[str, Any]], data["turn_items"])),
                pending=PendingToolUse(
                    tool_use_id=str(pending["tool_use_id"]),
                    tool_name=str(pending["tool_name"]),
                    input=cast(dict[str, Any], pending["input"]),
                    is_permission_request=pending.get("permission_request") is True,
                ),
            )
        except (AttributeError, KeyError, TypeError) as error:
            raise RunStateFormatError(
                f"the framework run state of ClaudeAgentRunner lacks a field or has a wrong one: {error!r}"
            ) from error


def _unnamed_state(text: str) -> dict[str, Any] | None:
    """The fields of a state in 0.1.0's shape (no `format`), or `None` for any other text."""
    try:
        loaded: object = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(loaded, dict):
        return None
    data = cast(dict[str, Any], loaded)
    if set(data) != _UNNAMED_STATE_KEYS or data["version"] != 1:
        return None
    return data


def tool_result_entries(
    entries: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Return transcript entries that give tool uses of ``entries`` their results, as the CLI writes them.

    A transcript whose last tool use has no result is one the CLI resumes as a deferred call (it asks the
    hook about it again, or answers it "[Tool result missing due to internal error]"). A turn that ends
    without an answer closes its calls with these entries, so the next turn's run sees each result and
    starts from the new prompt. Each entry follows the one before it, after the last entry of
    ``entries``, and carries the metadata of the assistant entry that holds its tool use.

    Args:
        entries: The turn's transcript entries, oldest first.
        results: `tool_result` content blocks (`tool_use_id`, `content`, `is_error`), in order.

    Returns:
        One `user` entry per result.
    """
    sources: dict[str, Mapping[str, Any]] = {}
    parent: str | None = None
    for entry in entries:
        if entry.get("uuid"):
            parent = str(entry["uuid"])
        message = entry.get("message")
        if entry.get("type") == "assistant" and isinstance(message, Mapping):
            for block in cast(Sequence[Any], cast(Mapping[str, Any], message).get("content") or []):
                if isinstance(block, Mapping) and cast(Mapping[str, Any], block).get("type") == "tool_use":
                    sources[str(cast(Mapping[str, Any], block).get("id"))] = entry
    timestamp = _now()
    closing: list[dict[str, Any]] = []
    for result in results:
        source = sources.get(str(result["tool_use_id"]), {})
        session = str(source.get("sessionId", ""))
        entry_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"dex-agents:{session}:{result['tool_use_id']}"))
        result_entry: dict[str, Any] = {
            "parentUuid": parent,
            "isSidechain": False,
            "type": "user",
            "message": {"role": "user", "content": [dict(result)]},
            "uuid": entry_id,
            "timestamp": timestamp,
            "toolUseResult": result.get("content"),
            **{key: source[key] for key in _ENTRY_METADATA if key in source},
        }
        if source.get("uuid"):
            result_entry["sourceToolAssistantUUID"] = source["uuid"]
        closing.append(result_entry)
        parent = entry_id
    return closing


def deferred_permission_entries(
    entries: Sequence[Mapping[str, Any]], pending: PendingToolUse
) -> list[dict[str, Any]]:
    """Return a run's transcript as if a `PreToolUse` hook had deferred the pending permission request.

    The runner stops such a run by refusing the request with `interrupt`, so the CLI writes a refusal as
    the call's result and an interruption notice. Both go, with everything after them, and an entry like
    the one the CLI writes for a hook's deferral (`hook_deferred_tool`) takes their place: a resumed run
    then asks for the call's permission again, and runs it or reads its refusal, before the next model
    call.

    Args:
        entries: The transcript entries of the run's turn so far, oldest first.
        pending: The call whose permission request waits.

    Returns:
        The entries up to the call's tool use and the other results before its refusal, then the deferral.
    """
    kept: list[dict[str, Any]] = []
    for entry in entries:
        if _holds_tool_result(entry, pending.tool_use_id):
            break
        kept.append(dict(entry))
    nothing: Mapping[str, Any] = {}
    source = next(
        (entry for entry in reversed(kept) if entry.get("type") == "assistant" and entry.get("uuid")), nothing
    )
    parent = next((str(entry["uuid"]) for entry in reversed(kept) if entry.get("uuid")), None)
    session = str(source.get("sessionId", ""))
    entry_id = uuid.uuid5(uuid.NAMESPACE_URL, f"dex-agents:{session}:{pending.tool_use_id}:deferred")
    kept.append(
        {
            "parentUuid": parent,
            "isSidechain": False,
            "attachment": {
                "type": "hook_deferred_tool",
                "toolUseID": pending.tool_use_id,
                "toolName": pending.tool_name,
                "toolInput": dict(pending.input),
                "hookName": "settings",
                "hookEvent": "PreToolUse",
                "permissionMode": "default",
            },
            "type": "attachment",
            "uuid": str(entry_id),
            "timestamp": source.get("timestamp") or _now(),
            **{key: source[key] for key in _ENTRY_METADATA if key in source},
        }
    )
    return kept


def _holds_tool_result(entry: Mapping[str, Any], tool_use_id: str) -> bool:
    message = entry.get("message")
    if entry.get("type") != "user" or not isinstance(message, Mapping):
        return False
    content = cast(Mapping[str, Any], message).get("content")
    if not isinstance(content, list):
        return False
    return any(
        isinstance(block, Mapping)
        and cast(Mapping[str, Any], block).get("type") == "tool_result"
        and cast(Mapping[str, Any], block).get("tool_use_id") == tool_use_id
        for block in cast(list[Any], content)
    )


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class TranscriptStore:
    """A `SessionStore` that holds one run's transcripts in memory, keyed by CLI session ID.

    The SDK keys transcripts by project (the sanitized working directory) too; this store ignores the
    project, so a run may resume in another directory, on another machine.

    Attributes:
        loaded: The entries each session starts the run with (main transcript: `subpath` `None`).
        appended: What the CLI appended during the run, per session and subpath.
    """

    loaded: dict[tuple[str, str | None], list[SessionStoreEntry]] = field(
        default_factory=dict[tuple[str, str | None], list[SessionStoreEntry]]
    )
    appended: dict[tuple[str, str | None], list[SessionStoreEntry]] = field(
        default_factory=dict[tuple[str, str | None], list[SessionStoreEntry]]
    )

    def preload(self, session_id: str, entries: Sequence[Mapping[str, Any]]) -> None:
        """Give a session its transcript before the CLI resumes it.

        Args:
            session_id: The CLI session.
            entries: The transcript entries, oldest first.
        """
        self.loaded[(session_id, None)] = [cast(SessionStoreEntry, dict(entry)) for entry in entries]

    def new_entries(self, session_id: str) -> list[dict[str, Any]]:
        """Return the main-transcript entries the run appended to a session, without reloaded ones."""
        seen = {entry.get("uuid") for entry in self.loaded.get((session_id, None), []) if entry.get("uuid")}
        return [
            dict(entry)
            for entry in self.appended.get((session_id, None), [])
            if not entry.get("uuid") or entry.get("uuid") not in seen
        ]

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Collect entries the CLI appended (the `SessionStore` protocol)."""
        self.appended.setdefault((key["session_id"], key.get("subpath")), []).extend(entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Return a session's transcript for a resume (the `SessionStore` protocol)."""
        slot = (key["session_id"], key.get("subpath"))
        entries = [*self.loaded.get(slot, []), *self.appended.get(slot, [])]
        return entries or None
