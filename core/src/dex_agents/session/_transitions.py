"""The session's Steps and every movement between them: the one module that names every Step.

`build_session_steps` makes each Step of a Flow type with the type's dependencies and one
`SessionTransitions`, which is their `Moves`. A movement's options are the destination's rule in
`STEP_RULES` and what the movement loads: the message chunks of the model input as of the moving Step's
context, or the call's own record and answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dex import Context, Step, StepMovement, StepOptions

from dex_agents.compaction._step import CompactContext
from dex_agents.session._control import ApplyTurnControl, FinishTurnCancellation
from dex_agents.session._deps import SessionDeps
from dex_agents.session._durable_wait import AwaitTimer
from dex_agents.session._message_reads import ChunkLoads, chunk_loads
from dex_agents.session._questions import AwaitQuestionAnswer
from dex_agents.session._records import question_interrupt_id
from dex_agents.session._step import SessionStep
from dex_agents.session._step_options import (
    NO_LOADS,
    RETRYING_EFFECTS,
    MovementLoads,
    failure_route_of,
    step_options,
)
from dex_agents.session._tasks import CancelToolTask, PollToolTask
from dex_agents.session._tool_steps import (
    AwaitToolApproval,
    CallSingleAttemptTool,
    CallTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents.session._turn_steps import (
    AwaitUserMessage,
    RecordTurnFailure,
    ResumeTurn,
    RunModel,
    StartAgentSession,
)
from dex_agents.values import AgentToolCall, CompactContextInput, ToolCallStatus, ToolEffect

__all__ = ["SessionSteps", "SessionTransitions", "build_session_steps"]

#: Every session Step but the start, in the order the Flow registers them.
_STEP_TYPES: tuple[type[SessionStep[Any]], ...] = (
    AwaitUserMessage,
    RunModel,
    CompactContext,
    AwaitToolApproval,
    AwaitQuestionAnswer,
    AwaitTimer,
    CallTool,
    CallSingleAttemptTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
    PollToolTask,
    CancelToolTask,
    ResumeTurn,
    RecordTurnFailure,
    ApplyTurnControl,
    FinishTurnCancellation,
)


_CANCELLED_WITH_THE_TURN: tuple[type[Step[Any]], ...] = (
    RunModel,
    CompactContext,
    RecordTurnFailure,
    AwaitToolApproval,
    AwaitQuestionAnswer,
    AwaitTimer,
    PollToolTask,
)
"""The Step types `cancel_turn` cancels, running attempts included: the model call, the summary call, the
failure route that would end the turn as failed, the waits of calls (approvals, questions, durable waits),
and the polls of started tasks. `FinishTurnCancellation` then records what they left, and hands each
started task to `CancelToolTask`."""


@dataclass(frozen=True)
class SessionSteps:
    """The Steps of one session Flow type, and their movements.

    Attributes:
        start: `StartAgentSession`.
        others: Every other Step.
        moves: The movements the Steps (and the RPCs that schedule Steps) make.
    """

    start: StartAgentSession
    others: tuple[SessionStep[Any], ...]
    moves: SessionTransitions


def build_session_steps(deps: SessionDeps) -> SessionSteps:
    """Make every Step of a Flow type with its dependencies and its movements."""
    moves = SessionTransitions(deps)
    return SessionSteps(
        start=StartAgentSession(deps, moves),
        others=tuple(step_type(deps, moves) for step_type in _STEP_TYPES),
        moves=moves,
    )


class SessionTransitions:
    """The `Moves` of one session Flow type.

    Args:
        deps: The Flow type's dependencies.
    """

    def __init__(self, deps: SessionDeps) -> None:
        self._deps = deps
        self._steps: dict[str, type[Step[Any]]] = {
            step_type.__name__: step_type for step_type in (StartAgentSession, *_STEP_TYPES)
        }

    def _options(
        self,
        step_type: str,
        loads: MovementLoads = NO_LOADS,
        *,
        effect: ToolEffect | None = None,
        failure_loads: MovementLoads | None = None,
    ) -> StepOptions:
        options = step_options(step_type, loads)
        route = failure_route_of(step_type, effect)
        if route is None:
            return options
        route_loads = failure_loads if failure_loads is not None else loads
        return options.on_execute_failure_proceed_to(self._steps[route], step_options(route, route_loads))

    def _movement(self, step_type: str, step_input: Any, options: StepOptions) -> StepMovement[Any]:
        return StepMovement(self._steps[step_type], step_input, options)

    def _model_input(self, context: Context) -> ChunkLoads:
        """The message chunks a model call reads: those after the summary (all of them without one)."""
        return chunk_loads(context, self._deps.summarized_through(context))

    @property
    def cancelled_with_the_turn(self) -> tuple[type[Step[Any]], ...]:
        """The Step types `cancel_turn` cancels, running attempts included."""
        return _CANCELLED_WITH_THE_TURN

    def options_of(self, step_type: str) -> StepOptions:
        """The options of ``step_type`` for a movement that loads nothing beyond its rule."""
        return self._options(step_type)

    def to_await_user_message(self) -> StepMovement[None]:
        """To `AwaitUserMessage`."""
        return self._movement("AwaitUserMessage", None, self._options("AwaitUserMessage"))

    def to_run_model(self, context: Context) -> StepMovement[CompactContextInput | None]:
        """To `RunModel`, loading the model input as of ``context`` (its own writes included)."""
        loads = MovementLoads(chunks=self._model_input(context))
        return self._movement("RunModel", None, self._options("RunModel", loads))

    def to_compact_context(
        self, context: Context, through_sequence: int
    ) -> StepMovement[CompactContextInput | None]:
        """To `CompactContext`, loading what it summarizes; its failure route loads the model input."""
        summarizes = chunk_loads(context, self._deps.summarized_through(context), through_sequence)
        options = self._options(
            "CompactContext",
            MovementLoads(chunks=summarizes),
            failure_loads=MovementLoads(chunks=self._model_input(context)),
        )
        return self._movement("CompactContext", CompactContextInput(through_sequence), options)

    def to_resume_turn(self, expected_result_count: int) -> StepMovement[int]:
        """To `ResumeTurn`, waiting for ``expected_result_count`` results."""
        return self._movement("ResumeTurn", expected_result_count, self._options("ResumeTurn"))

    def to_apply_turn_control(self, context: Context) -> StepMovement[None]:
        """To `ApplyTurnControl`, loading the model input as of ``context``."""
        loads = MovementLoads(chunks=self._model_input(context))
        return self._movement("ApplyTurnControl", None, self._options("ApplyTurnControl", loads))

    def to_finish_turn_cancellation(self, turn_id: str) -> StepMovement[str]:
        """To `FinishTurnCancellation` for ``turn_id``."""
        return self._movement("FinishTurnCancellation", turn_id, self._options("FinishTurnCancellation"))

    def to_await_tool_approval(self, tool_call_id: str) -> StepMovement[str]:
        """To `AwaitToolApproval` for one call: its own record and answers."""
        loads = MovementLoads(records=(tool_call_id,), answers=(tool_call_id,))
        return self._movement("AwaitToolApproval", tool_call_id, self._options("AwaitToolApproval", loads))

    def to_tool_step(self, record: AgentToolCall) -> StepMovement[str]:
        """To the tool Step that runs an approved call: `CallTool` for an effect that retries."""
        step_type = "CallTool" if record.effect in RETRYING_EFFECTS else "CallSingleAttemptTool"
        loads = MovementLoads(records=(record.tool_call_id,))
        return self._movement(step_type, record.tool_call_id, self._options(step_type, loads))

    def to_await_question_answer(self, record: AgentToolCall) -> StepMovement[str]:
        """To `AwaitQuestionAnswer`: the call's record, the record keyed by its question, and the answers."""
        interrupt_id = question_interrupt_id(self._deps.options, record)
        loads = MovementLoads(
            records=tuple(dict.fromkeys((record.tool_call_id, interrupt_id))), answers=(interrupt_id,)
        )
        return self._movement(
            "AwaitQuestionAnswer", record.tool_call_id, self._options("AwaitQuestionAnswer", loads)
        )

    def to_await_timer(self, tool_call_id: str) -> StepMovement[str]:
        """To `AwaitTimer` for a ``durable_wait`` call."""
        loads = MovementLoads(records=(tool_call_id,))
        return self._movement("AwaitTimer", tool_call_id, self._options("AwaitTimer", loads))

    def to_poll_tool_task(self, record: AgentToolCall) -> StepMovement[str]:
        """To `PollToolTask`, whose failure route follows the call's effect."""
        loads = MovementLoads(records=(record.tool_call_id,))
        options = self._options("PollToolTask", loads, effect=record.effect)
        return self._movement("PollToolTask", record.tool_call_id, options)

    def to_cancel_tool_task(self, record: AgentToolCall) -> StepMovement[str]:
        """To `CancelToolTask` for a started task that `cancel_turn` abandoned."""
        loads = MovementLoads(records=(record.tool_call_id,))
        return self._movement("CancelToolTask", record.tool_call_id, self._options("CancelToolTask", loads))

    def to_waiting_step(self, record: AgentToolCall) -> StepMovement[str]:
        """Back to the Step that waits for a call's answer or Timer, which then applies it.

        Raises:
            ValueError: If the call waits for nothing.
        """
        if record.status is ToolCallStatus.AWAITING_APPROVAL:
            return self.to_await_tool_approval(record.tool_call_id)
        if record.status is ToolCallStatus.AWAITING_ANSWER:
            return self.to_await_question_answer(record)
        if record.status is ToolCallStatus.WAITING_FOR_TIMER:
            return self.to_await_timer(record.tool_call_id)
        raise ValueError(f"tool call {record.tool_call_id!r} is {record.status.value}; no Step waits for it")

    def to_first_step_of(self, record: AgentToolCall) -> StepMovement[str]:
        """To a newly requested call's first Step: its approval, or its tool Step."""
        if record.status is ToolCallStatus.AWAITING_APPROVAL:
            return self.to_await_tool_approval(record.tool_call_id)
        return self.to_tool_step(record)
