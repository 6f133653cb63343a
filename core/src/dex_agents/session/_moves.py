"""The movements a session Step may return, as a protocol: a Step names where it goes, not how.

`SessionTransitions` implements it; Steps receive it when the Flow is built, so no Step module imports
another Step's class, and the one module that does (``_transitions.py``) imports no Step module's helpers.
"""

from __future__ import annotations

from typing import Any, Protocol

from dex import Context, Step, StepMovement, StepOptions

from dex_agents.values import AgentToolCall, CompactContextInput

__all__ = ["Moves"]


class Moves(Protocol):
    """Where a session Step goes next; each movement carries the destination's full options."""

    def options_of(self, step_type: str) -> StepOptions:
        """The options of ``step_type`` for a movement that loads nothing beyond its rule."""
        ...

    @property
    def cancelled_with_the_turn(self) -> tuple[type[Step[Any]], ...]:
        """The Step types `cancel_turn` cancels, running attempts included."""
        ...

    def to_await_user_message(self) -> StepMovement[None]:
        """To `AwaitUserMessage`."""
        ...

    def to_run_model(self, context: Context) -> StepMovement[CompactContextInput | None]:
        """To `RunModel`, loading the model input as of ``context`` (its own writes included)."""
        ...

    def to_compact_context(
        self, context: Context, through_sequence: int
    ) -> StepMovement[CompactContextInput | None]:
        """To `CompactContext`, summarizing through ``through_sequence``."""
        ...

    def to_resume_turn(self, expected_result_count: int) -> StepMovement[int]:
        """To `ResumeTurn`, waiting for ``expected_result_count`` results."""
        ...

    def to_apply_turn_control(self, context: Context) -> StepMovement[None]:
        """To `ApplyTurnControl`, loading the model input as of ``context``."""
        ...

    def to_finish_turn_cancellation(self, turn_id: str) -> StepMovement[str]:
        """To `FinishTurnCancellation` for ``turn_id``."""
        ...

    def to_await_tool_approval(self, tool_call_id: str) -> StepMovement[str]:
        """To `AwaitToolApproval` for one call."""
        ...

    def to_tool_step(self, record: AgentToolCall) -> StepMovement[str]:
        """To the tool Step that runs an approved call, chosen by its effect."""
        ...

    def to_await_question_answer(self, record: AgentToolCall) -> StepMovement[str]:
        """To `AwaitQuestionAnswer` for a call that is `awaiting_answer`."""
        ...

    def to_await_timer(self, tool_call_id: str) -> StepMovement[str]:
        """To `AwaitTimer` for a ``durable_wait`` call."""
        ...

    def to_poll_tool_task(self, record: AgentToolCall) -> StepMovement[str]:
        """To `PollToolTask` for a call that is `waiting_for_task`."""
        ...

    def to_cancel_tool_task(self, record: AgentToolCall) -> StepMovement[str]:
        """To `CancelToolTask` for a started task that `cancel_turn` abandoned."""
        ...

    def to_waiting_step(self, record: AgentToolCall) -> StepMovement[str]:
        """Back to the Step that waits for a call's answer or Timer, which then applies it."""
        ...

    def to_first_step_of(self, record: AgentToolCall) -> StepMovement[str]:
        """To a newly requested call's first Step: its approval, or its tool Step."""
        ...
