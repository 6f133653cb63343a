"""The run state of a Stepwise turn: what the next `RunModel` needs that the session has not stored."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from dex_agents.stepwise._messages import framework_message_from_json, framework_message_to_json
from dex_agents.values import FrameworkMessage

__all__ = ["RUN_STATE_FORMAT", "StepwiseRunState", "StepwiseRunStateError"]

RUN_STATE_FORMAT = "dex-stepwise/1"
"""The ``format`` of the run state JSON this release writes and reads."""


class StepwiseRunStateError(ValueError):
    """A run state Stepwise did not write, or cannot read."""


@dataclass(frozen=True)
class StepwiseRunState:
    """The unstored part of a turn between two model calls.

    Attributes:
        items: The turn's items the session has not stored yet, in order.
        pending_tool_call_ids: The calls of the last answer, whose results follow ``items``.
        continuation: User text that follows those results, from ``decide_turn_continuation``.
        end_turn: Whether the turn ends once the results are in, with no further model call.
        turn_error: With ``end_turn``, the error the turn fails with.
        consecutive_continuations: Continuations in a row so far; written only after a continuation.
    """

    items: tuple[FrameworkMessage, ...] = ()
    pending_tool_call_ids: tuple[str, ...] = ()
    continuation: str | None = None
    end_turn: bool = False
    turn_error: str | None = None
    consecutive_continuations: int = 0

    def to_json(self) -> str:
        """Return the run state as compact JSON text; keys with their default value are left out."""
        data: dict[str, object] = {
            "format": RUN_STATE_FORMAT,
            "items": [framework_message_to_json(item) for item in self.items],
            "pending_tool_call_ids": list(self.pending_tool_call_ids),
        }
        if self.continuation is not None:
            data["continuation"] = self.continuation
        if self.end_turn:
            data["end_turn"] = True
        if self.turn_error is not None:
            data["turn_error"] = self.turn_error
        if self.consecutive_continuations:
            data["consecutive_continuations"] = self.consecutive_continuations
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | None) -> StepwiseRunState:
        """Read a run state; `None` (a turn's first model call) reads as the empty state.

        Args:
            text: What `to_json` wrote, or `None`.

        Returns:
            The run state.

        Raises:
            StepwiseRunStateError: If Stepwise did not write the text.
        """
        if text is None:
            return cls()
        try:
            data = json.loads(text)
        except ValueError as error:
            raise StepwiseRunStateError(f"the turn's run state is not JSON: {error}") from error
        if not isinstance(data, dict) or cast(dict[str, object], data).get("format") != RUN_STATE_FORMAT:
            raise StepwiseRunStateError(
                f"the turn's run state is not a Stepwise run state of format {RUN_STATE_FORMAT!r}; "
                "another runner or release wrote it"
            )
        state = cast(dict[str, Any], data)
        try:
            return cls(
                items=tuple(
                    framework_message_from_json(cast(Mapping[str, object], item)) for item in state["items"]
                ),
                pending_tool_call_ids=tuple(
                    str(tool_call_id) for tool_call_id in state["pending_tool_call_ids"]
                ),
                continuation=state.get("continuation"),
                end_turn=bool(state.get("end_turn", False)),
                turn_error=state.get("turn_error"),
                consecutive_continuations=int(state.get("consecutive_continuations", 0)),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise StepwiseRunStateError(f"the turn's Stepwise run state is malformed: {error!r}") from error
