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

from dex_agents import RunStateFormat
from google.adk.events import Event

from dex_agents_google_adk._messages import decode_event, encode_event

__all__ = ["RUN_STATE_FORMAT", "GoogleAdkRunState"]

RUN_STATE_FORMAT = RunStateFormat("dex-agents-google-adk/run-state", 1, "GoogleAdkRunner")
"""Names the run state's JSON shape, so a state of another runner or version fails with a clear message."""


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
        return RUN_STATE_FORMAT.wrap(
            {
                "invocation_id": self.invocation_id,
                "unknown_tool_call_ids": list(self.unknown_tool_call_ids),
                "turn_events": [json.loads(encode_event(event)) for event in self.turn_events],
            }
        )

    @classmethod
    def from_json(cls, text: str) -> GoogleAdkRunState:
        """Read a run state written by `to_json`.

        Args:
            text: The stored `FrameworkRunState`.

        Returns:
            The run state.

        Raises:
            dex_agents.RunStateFormatError: If the text is not a run state of this runner, or of another
                version.
        """
        state = RUN_STATE_FORMAT.unwrap(text)
        events = cast(list[Any], state["turn_events"])
        return cls(
            invocation_id=str(state["invocation_id"]),
            turn_events=[decode_event(json.dumps(event)) for event in events],
            unknown_tool_call_ids=tuple(str(call_id) for call_id in state["unknown_tool_call_ids"]),
        )
