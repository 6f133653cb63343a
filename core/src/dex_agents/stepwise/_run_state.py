"""The run state of a Stepwise turn: what the next `RunModel` needs besides the stored messages.

Stepwise stores each answer's messages in the commit that records its tool calls, so the run state holds
only the loop's own bookkeeping, a few fields whatever the turn's length, inside the core's run-state
envelope (`dex_agents.RunStateFormat`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dex_agents._run_state import RunStateFormat, RunStateFormatError

__all__ = ["RUN_STATE_FORMAT", "StepwiseRunState"]

RUN_STATE_FORMAT = RunStateFormat("dex-agents-stepwise/run-state", 1, "StepwiseRunner")
"""The envelope of the run state this release writes and reads."""


@dataclass(frozen=True)
class StepwiseRunState:
    """A turn between two model calls.

    Attributes:
        pending_tool_call_ids: The calls of the last answer, whose results the next model call reads.
        continuation: User text that follows those results, from ``decide_turn_continuation``.
        end_turn: Whether the turn ends once the results are in, with no further model call.
        turn_error: With ``end_turn``, the error the turn fails with.
        consecutive_continuations: Continuations in a row so far; written only after a continuation.
    """

    pending_tool_call_ids: tuple[str, ...] = ()
    continuation: str | None = None
    end_turn: bool = False
    turn_error: str | None = None
    consecutive_continuations: int = 0

    def to_json(self) -> str:
        """Return the run state in its envelope; fields with their default value are left out."""
        fields: dict[str, object] = {}
        if self.pending_tool_call_ids:
            fields["pending_tool_call_ids"] = list(self.pending_tool_call_ids)
        if self.continuation is not None:
            fields["continuation"] = self.continuation
        if self.end_turn:
            fields["end_turn"] = True
        if self.turn_error is not None:
            fields["turn_error"] = self.turn_error
        if self.consecutive_continuations:
            fields["consecutive_continuations"] = self.consecutive_continuations
        return RUN_STATE_FORMAT.wrap(fields)

    @classmethod
    def from_json(cls, text: str | None) -> StepwiseRunState:
        """Read a run state; `None` (a turn's first model call) reads as the empty state.

        Args:
            text: What `to_json` wrote, or `None`.

        Returns:
            The run state.

        Raises:
            RunStateFormatError: If this release of Stepwise did not write the text, or a field is malformed.
        """
        if text is None:
            return cls()
        fields = RUN_STATE_FORMAT.unwrap(text)
        pending = fields.get("pending_tool_call_ids", [])
        continuation = fields.get("continuation")
        turn_error = fields.get("turn_error")
        consecutive = fields.get("consecutive_continuations", 0)
        if not (
            isinstance(pending, list)
            and all(isinstance(tool_call_id, str) for tool_call_id in pending)  # pyright: ignore[reportUnknownVariableType]
            and isinstance(continuation, str | None)
            and isinstance(turn_error, str | None)
            and isinstance(fields.get("end_turn", False), bool)
            and isinstance(consecutive, int)
        ):
            raise RunStateFormatError(f"the Stepwise run state is malformed: {text[:200]}")
        return cls(
            pending_tool_call_ids=tuple(pending),  # pyright: ignore[reportUnknownArgumentType]
            continuation=continuation,
            end_turn=fields.get("end_turn", False),
            turn_error=turn_error,
            consecutive_continuations=consecutive,
        )
