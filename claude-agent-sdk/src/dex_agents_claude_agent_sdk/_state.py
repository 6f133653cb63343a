"""The run state of a turn that waits for a tool call, and the session store that carries the transcript.

The Claude Code CLI keeps a conversation as a transcript addressed by its session ID. The runner never
leaves it on a Worker's disk: a `TranscriptStore` (the SDK's `SessionStore` protocol) hands the CLI the
transcript at the start of every run and collects what the run appends. Entries of earlier turns travel in
the stored messages' `framework_item`; entries of the running turn travel in `ClaudeRunState`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from claude_agent_sdk.types import SessionKey, SessionStoreEntry

__all__ = ["ClaudeRunState", "PendingToolUse", "TranscriptStore"]

_STATE_VERSION = 1


@dataclass(frozen=True)
class PendingToolUse:
    """The tool call a run deferred: the one the next run resumes with its recorded result.

    Attributes:
        tool_use_id: The model's tool use ID.
        tool_name: The user's tool name, without the MCP prefix.
        input: The call's arguments.
    """

    tool_use_id: str
    tool_name: str
    input: Mapping[str, Any]


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
        """Return the state as compact JSON text."""
        return json.dumps(
            {
                "version": _STATE_VERSION,
                "session_id": self.session_id,
                "turn_entries": list(self.turn_entries),
                "turn_items": list(self.turn_items),
                "pending": {
                    "tool_use_id": self.pending.tool_use_id,
                    "tool_name": self.pending.tool_name,
                    "input": dict(self.pending.input),
                },
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ClaudeRunState:
        """Parse a state that `to_json` wrote.

        Args:
            text: The framework run state.

        Returns:
            The state.

        Raises:
            ValueError: If the text is not a run state of this version.
        """
        try:
            data = cast(dict[str, Any], json.loads(text))
            if data.get("version") != _STATE_VERSION:
                raise ValueError(f"unsupported version {data.get('version')!r}")
            pending = cast(dict[str, Any], data["pending"])
            return cls(
                session_id=str(data["session_id"]),
                turn_entries=list(cast(list[dict[str, Any]], data["turn_entries"])),
                turn_items=list(cast(list[dict[str, Any]], data["turn_items"])),
                pending=PendingToolUse(
                    tool_use_id=str(pending["tool_use_id"]),
                    tool_name=str(pending["tool_name"]),
                    input=cast(dict[str, Any], pending["input"]),
                ),
            )
        except (AttributeError, KeyError, TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a Claude Agent SDK run state: {error}") from error


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
