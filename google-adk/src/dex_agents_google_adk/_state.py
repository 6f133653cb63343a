"""The framework run state a turn keeps while its tool calls run.

Between a model call that asked for tools and the next one, the session stores this text in
`FrameworkRunState`. It holds only what the stored messages do not: the ADK events of the paused
invocation (its user message, the model responses, ADK's confirmation requests and the placeholder
results), the invocation's ID, and which calls named a tool the agent does not have.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from google.adk.events import Event

from dex_agents_google_adk._messages import decode_event, encode_event

__all__ = ["RUN_STATE_FORMAT", "RUN_STATE_VERSION", "GoogleAdkRunState"]

RUN_STATE_FORMAT = "dex-agents-google-adk/run-state"
"""Names the run state's JSON shape, so a state of another runner fails with a clear message."""
RUN_STATE_VERSION = 1
"""The version of the JSON shape this release reads and writes."""


@dataclass(frozen=True)
class GoogleAdkRunState:
    """A paused ADK invocation between a model call that asked for tools and the call that continues it.

    Attributes:
        invocation_id: The ADK invocation the turn runs in; every model call of the turn resumes it.
        turn_events: The invocation's events, from its user message on, as the session service held them.
        unknown_tool_call_ids: Calls to tool names the agent does not have. ADK cannot confirm them, so
            their recorded failure replaces ADK's own answer in ``turn_events`` when the turn resumes.
    """

    invocation_id: str
    turn_events: Sequence[Event]
    unknown_tool_call_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.invocation_id:
            raise ValueError("a Google ADK run state needs the ID of the paused invocation")
        if not self.turn_events:
            raise ValueError("a Google ADK run state needs the events of the paused invocation")

    def to_json(self) -> str:
        """Return the run state as the JSON text the session stores."""
        return json.dumps(
            {
                "format": RUN_STATE_FORMAT,
                "version": RUN_STATE_VERSION,
                "invocation_id": self.invocation_id,
                "unknown_tool_call_ids": list(self.unknown_tool_call_ids),
                "turn_events": [json.loads(encode_event(event)) for event in self.turn_events],
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> GoogleAdkRunState:
        """Read a run state written by `to_json`.

        Args:
            text: The stored `FrameworkRunState`.

        Returns:
            The run state.

        Raises:
            ValueError: If the text is not a run state of this runner, or of another version.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"the framework run state is not JSON: {error}") from error
        if not isinstance(data, dict) or cast(dict[str, Any], data).get("format") != RUN_STATE_FORMAT:
            raise ValueError(
                "the framework run state was not written by GoogleAdkRunner "
                f"(expected format {RUN_STATE_FORMAT!r})"
            )
        state = cast(dict[str, Any], data)
        if state.get("version") != RUN_STATE_VERSION:
            raise ValueError(
                f"the framework run state has version {state.get('version')!r}; "
                f"this release reads {RUN_STATE_VERSION}"
            )
        events = cast(list[Any], state["turn_events"])
        return cls(
            invocation_id=str(state["invocation_id"]),
            turn_events=[decode_event(json.dumps(event)) for event in events],
            unknown_tool_call_ids=tuple(str(call_id) for call_id in state["unknown_tool_call_ids"]),
        )
