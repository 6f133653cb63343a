"""What every Step of one session Flow type shares: the runner, the options, and the Step options.

The SDK replaces a Step's own options with the options of the movement that schedules it, so every
movement here carries the complete set: durability, timeouts, retries, failure route, locks and loads.
Building them in one place keeps each Step's options identical however it is reached.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from dex import (
    AsyncContext,
    AttributeMap,
    Channel,
    Context,
    RetryPolicy,
    Step,
    StepDurability,
    StepMovement,
    StepOptions,
    Stream,
)

from dex_agents.compaction import is_compaction_runner
from dex_agents.events import DEFAULT_DELTA_COALESCING, AgentEventWriter
from dex_agents.persistence import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
)
from dex_agents.runner import AgentFrameworkRunner
from dex_agents.session._compaction import CompactContext
from dex_agents.session._control import ApplyTurnControl, FinishTurnCancellation
from dex_agents.session._durable_wait import AwaitTimer
from dex_agents.session._questions import AwaitQuestionAnswer
from dex_agents.session._records import question_interrupt_id
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._state import read_context_summary
from dex_agents.session._storage import ChunkLoads, chunk_loads
from dex_agents.session._tasks import CancelToolTask, PollToolTask
from dex_agents.session._tool_steps import (
    AwaitToolApproval,
    CallSingleAttemptTool,
    CallTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents.session._tracing import SessionTracing
from dex_agents.session._turn_steps import AwaitUserMessage, RecordTurnFailure, ResumeTurn, RunModel
from dex_agents.values import AgentEvent, AgentToolCall, CompactContextInput, ToolCallStatus, ToolEffect

__all__ = [
    "CANCEL_TOOL_TASK_ATTEMPTS",
    "CANCEL_TOOL_TASK_RETRY_WINDOW",
    "CANCEL_TOOL_TASK_TIMEOUT",
    "POLL_TOOL_TASK_TIMEOUT",
    "RUN_MODEL_ATTEMPTS",
    "RUN_MODEL_HEARTBEAT_TIMEOUT",
    "RUN_MODEL_RETRY_WINDOW",
    "RUN_MODEL_TIMEOUT",
    "SINGLE_ATTEMPT_TOOL_ATTEMPTS",
    "TOOL_ATTEMPTS",
    "TOOL_CALL_TIMEOUT",
    "SessionRuntime",
]

RUN_MODEL_TIMEOUT = timedelta(minutes=15)
RUN_MODEL_HEARTBEAT_TIMEOUT = timedelta(minutes=2)
RUN_MODEL_ATTEMPTS = 3
RUN_MODEL_RETRY_WINDOW = timedelta(minutes=30)
TOOL_ATTEMPTS = 3
# The SDK documents two hours as the default method timeout, but servers apply their own default when the
# option is unset (older Dex Servers use 30 seconds), so tool Steps state it.
TOOL_CALL_TIMEOUT = timedelta(hours=2)
SINGLE_ATTEMPT_TOOL_ATTEMPTS = 1
# A poll only reads the task, so it is bounded far below a tool call.
POLL_TOOL_TASK_TIMEOUT = timedelta(minutes=10)
CANCEL_TOOL_TASK_TIMEOUT = timedelta(seconds=30)
CANCEL_TOOL_TASK_ATTEMPTS = 3
CANCEL_TOOL_TASK_RETRY_WINDOW = timedelta(minutes=2)

_SYNC = StepDurability.SYNC
_RETRYING_EFFECTS = frozenset({ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE})


class SessionRuntime:
    """The runner, options and Step options of one session Flow type."""

    def __init__(
        self,
        runner: AgentFrameworkRunner,
        options: AgentSessionOptions,
        agent_events: Stream[AgentEvent],
        *,
        flow_type: str,
    ) -> None:
        """Create the runtime of one Flow type."""
        self.runner = runner
        self.options = options
        self.agent_events = agent_events
        self.flow_type = flow_type
        #: Whether the runner compacts: it then sees only the messages after the summary.
        self.compacts = is_compaction_runner(runner)
        #: The Steps' tracing calls; pass-throughs without `AgentSessionOptions.tracing`.
        self.tracing = SessionTracing(options.tracing, flow_type)

    def summarized_through(self, context: Context) -> int:
        """The last message the runner no longer receives: the summary's, for a runner that compacts."""
        if not self.compacts:
            return 0
        summary = read_context_summary(context)
        return 0 if summary is None else summary.last_sequence

    def model_input_loads(self, context: Context | None) -> ChunkLoads:
        """The message chunks a model call reads: those after the summary (all of them without one)."""
        if context is None:
            return ChunkLoads()
        return chunk_loads(context, self.summarized_through(context))

    @staticmethod
    def _message_maps(chunks: ChunkLoads, *others: AttributeMap[Any]) -> tuple[AttributeMap[Any], ...]:
        """The whole maps a Step loads: the window, every chunk when it reads them all, and ``others``."""
        if chunks.whole_map:
            return (AGENT_MESSAGES, AGENT_MESSAGE_CHUNKS, *others)
        return (AGENT_MESSAGES, *others)

    def event_writer(self, context: AsyncContext, turn_id: str | None) -> AgentEventWriter:
        """Return a writer stamped with ``turn_id`` and the current Step execution and attempt."""
        stream = self.agent_events

        def write(event: AgentEvent) -> None:
            stream.write(context, event)

        return AgentEventWriter(
            write, turn_id, context.attempt, context.step_execution_id, coalescing=DEFAULT_DELTA_COALESCING
        )

    # Step options. Each Step's get_step_options returns the same value, for a movement without options.

    @staticmethod
    def plain_options() -> StepOptions:
        """Options of Steps that need nothing beyond SYNC durability."""
        return StepOptions(wait_for_durability=_SYNC, execute_durability=_SYNC)

    @staticmethod
    def start_options() -> StepOptions:
        """Options of `StartAgentSession`, which stores the first message: SYNC and the window."""
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_load_attribute_maps=(AGENT_MESSAGES,),
        )

    @staticmethod
    def await_user_message_options() -> StepOptions:
        """Options of `AwaitUserMessage`: the window it stores the message in, and two locks.

        It starts no turn while `cancel_turn` decides (`TurnCancellationRequest`), and `execute_plan` cannot
        accept a second approval while this Step consumes the first (`PendingPlanExecution`).
        """
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_PLAN_EXECUTION.lock()),
            execute_load_attribute_maps=(AGENT_MESSAGES,),
        )

    def apply_turn_control_options(self, context: Context | None = None) -> StepOptions:
        """Options of `ApplyTurnControl`: the cancellation lock, the messages and the turn's records.

        Its retry is the server's default, like the other Steps that end a turn: it must not give up.
        """
        chunks = self.model_input_loads(context)
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(),),
            execute_load_attribute_maps=self._message_maps(chunks, AGENT_TOOL_CALLS),
            execute_load_attribute_map_instances=chunks.instances,
        )

    @staticmethod
    def finish_turn_cancellation_options() -> StepOptions:
        """Options of `FinishTurnCancellation`: both locks `cancel_turn` holds, records and answers."""
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_lock_attributes=(TURN_CANCELLATION_REQUEST.lock(), PENDING_INTERRUPTS.lock()),
            execute_load_attribute_maps=(AGENT_TOOL_CALLS,),
            execute_load_channel_maps=(INTERRUPT_RESOLUTIONS,),
        )

    def run_model_options(self, context: Context | None = None) -> StepOptions:
        """Options of `RunModel`: one model call with a timeout, three attempts, and a failure route.

        It loads the window, the chunks after the summary, the turn's records and the steered messages.
        """
        chunks = self.model_input_loads(context)
        return self._model_call_options(
            chunks, (AGENT_TOOL_CALLS,), (STEERED_USER_MESSAGES,), failure_route_chunks=chunks
        )

    def compact_context_options(
        self, context: Context | None = None, through_sequence: int = 0
    ) -> StepOptions:
        """Options of `CompactContext`: `RunModel`'s, loading only the messages it summarizes.

        Its failure route is `RunModel`'s, with the loads of the turn's model input.
        """
        summarizes = (
            ChunkLoads()
            if context is None
            else chunk_loads(context, self.summarized_through(context), through_sequence)
        )
        return self._model_call_options(
            summarizes, (), (), failure_route_chunks=self.model_input_loads(context)
        )

    def _model_call_options(
        self,
        chunks: ChunkLoads,
        maps: tuple[AttributeMap[Any], ...],
        channels: tuple[Channel[Any], ...],
        *,
        failure_route_chunks: ChunkLoads,
    ) -> StepOptions:
        """Options of a Step that calls the model: its timeouts, retries, loads and failure route."""
        return StepOptions(
            execute_method_timeout=RUN_MODEL_TIMEOUT,
            heartbeat_timeout=RUN_MODEL_HEARTBEAT_TIMEOUT,
            execute_retry=RetryPolicy(
                maximum_attempts=RUN_MODEL_ATTEMPTS, total_duration=RUN_MODEL_RETRY_WINDOW
            ),
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_load_attribute_maps=self._message_maps(chunks, *maps),
            execute_load_attribute_map_instances=chunks.instances,
            execute_load_channels=channels,
        ).on_execute_failure_proceed_to(
            RecordTurnFailure, self.record_turn_failure_options(failure_route_chunks)
        )

    def record_turn_failure_options(self, chunks: ChunkLoads | None = None) -> StepOptions:
        """Options of `RecordTurnFailure`, which keeps the turn's unstored items and writes the note."""
        loads = chunks or ChunkLoads()
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_load_attribute_maps=self._message_maps(loads, AGENT_TOOL_CALLS),
            execute_load_attribute_map_instances=loads.instances,
        )

    @staticmethod
    def resume_turn_options() -> StepOptions:
        """Options of `ResumeTurn`: the interrupt lock, the turn's records and the steered messages."""
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_lock_attributes=(PENDING_INTERRUPTS.lock(),),
            execute_load_attribute_maps=(AGENT_TOOL_CALLS,),
            execute_load_channels=(STEERED_USER_MESSAGES,),
        )

    @staticmethod
    def await_tool_approval_options(tool_call_id: str | None = None) -> StepOptions:
        """Options of `AwaitToolApproval`: the interrupt lock, the call's own record and its answers."""
        own = () if tool_call_id is None else (AGENT_TOOL_CALLS.load(tool_call_id),)
        answers = () if tool_call_id is None else (INTERRUPT_RESOLUTIONS.load_messages(tool_call_id),)
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_lock_attributes=(PENDING_INTERRUPTS.lock(),),
            execute_load_attribute_map_instances=own,
            execute_load_channels=(STEERED_USER_MESSAGES,),
            execute_load_channel_map_instances=answers,
        )

    @staticmethod
    def tool_failure_options(tool_call_id: str | None = None) -> StepOptions:
        """Options of `RecordToolFailure` and `RecordToolOutcomeUnknown`: only the call's own record."""
        own = () if tool_call_id is None else (AGENT_TOOL_CALLS.load(tool_call_id),)
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_load_attribute_map_instances=own,
        )

    def await_question_answer_options(self, record: AgentToolCall | None = None) -> StepOptions:
        """Options of `AwaitQuestionAnswer`: the interrupt lock, the call's record, and its answers.

        Its Execute also loads the record keyed by the question's interrupt ID, if any, to find a
        collision with another call of the turn.
        """
        if record is None:
            return StepOptions(
                wait_for_durability=_SYNC,
                execute_durability=_SYNC,
                execute_lock_attributes=(PENDING_INTERRUPTS.lock(),),
                execute_load_channels=(STEERED_USER_MESSAGES,),
            )
        interrupt_id = question_interrupt_id(self, record)
        records = tuple(
            AGENT_TOOL_CALLS.load(key) for key in dict.fromkeys((record.tool_call_id, interrupt_id))
        )
        answers = (INTERRUPT_RESOLUTIONS.load_messages(interrupt_id),)
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_lock_attributes=(PENDING_INTERRUPTS.lock(),),
            wait_for_load_attribute_map_instances=records,
            wait_for_load_channel_map_instances=answers,
            execute_load_attribute_map_instances=records,
            execute_load_channels=(STEERED_USER_MESSAGES,),
            execute_load_channel_map_instances=answers,
        )

    @staticmethod
    def await_timer_options(tool_call_id: str | None = None) -> StepOptions:
        """Options of `AwaitTimer`: the call's own record, for both methods, and the steered messages."""
        own = () if tool_call_id is None else (AGENT_TOOL_CALLS.load(tool_call_id),)
        return StepOptions(
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            wait_for_load_attribute_map_instances=own,
            execute_load_attribute_map_instances=own,
            execute_load_channels=(STEERED_USER_MESSAGES,),
        )

    def poll_tool_task_options(
        self, effect: ToolEffect = ToolEffect.READ, tool_call_id: str | None = None
    ) -> StepOptions:
        """Options of `PollToolTask`: three attempts, its timeout, and the failure route of ``effect``.

        It takes no lock and loads no steering, so steering never abandons a started task.
        """
        own = () if tool_call_id is None else (AGENT_TOOL_CALLS.load(tool_call_id),)
        options = StepOptions(
            execute_method_timeout=POLL_TOOL_TASK_TIMEOUT,
            execute_retry=RetryPolicy(maximum_attempts=TOOL_ATTEMPTS),
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            wait_for_load_attribute_map_instances=own,
            execute_load_attribute_map_instances=own,
        )
        route: type[Step[str]] = (
            RecordToolFailure if effect in _RETRYING_EFFECTS else RecordToolOutcomeUnknown
        )
        return options.on_execute_failure_proceed_to(route, self.tool_failure_options(tool_call_id))

    def cancel_tool_task_options(self, tool_call_id: str | None = None) -> StepOptions:
        """Options of `CancelToolTask`: 30 seconds, three attempts within two minutes, then the failure route.

        `RecordToolOutcomeUnknown` keeps the cancellation, so a cancellation that keeps failing still ends
        the call, and the turn.
        """
        own = () if tool_call_id is None else (AGENT_TOOL_CALLS.load(tool_call_id),)
        return StepOptions(
            execute_method_timeout=CANCEL_TOOL_TASK_TIMEOUT,
            execute_retry=RetryPolicy(
                maximum_attempts=CANCEL_TOOL_TASK_ATTEMPTS, total_duration=CANCEL_TOOL_TASK_RETRY_WINDOW
            ),
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_load_attribute_map_instances=own,
        ).on_execute_failure_proceed_to(RecordToolOutcomeUnknown, self.tool_failure_options(tool_call_id))

    def tool_step_options(self, effect: ToolEffect, tool_call_id: str | None = None) -> StepOptions:
        """Options of the tool Step for ``effect``: its retries, its failure route, and its own record."""
        own = () if tool_call_id is None else (AGENT_TOOL_CALLS.load(tool_call_id),)
        retries = effect in _RETRYING_EFFECTS
        options = StepOptions(
            execute_method_timeout=TOOL_CALL_TIMEOUT,
            execute_retry=RetryPolicy(
                maximum_attempts=TOOL_ATTEMPTS if retries else SINGLE_ATTEMPT_TOOL_ATTEMPTS
            ),
            wait_for_durability=_SYNC,
            execute_durability=_SYNC,
            execute_load_attribute_map_instances=own,
            execute_load_channels=(STEERED_USER_MESSAGES,),
        )
        route: type[Step[str]] = RecordToolFailure if retries else RecordToolOutcomeUnknown
        return options.on_execute_failure_proceed_to(route, self.tool_failure_options(tool_call_id))

    # Movements.

    def to_await_user_message(self) -> StepMovement[None]:
        """The movement to `AwaitUserMessage`."""
        return StepMovement(AwaitUserMessage, None, self.await_user_message_options())

    def to_apply_turn_control(self, context: Context) -> StepMovement[None]:
        """The movement to `ApplyTurnControl`, loading the model input as of ``context``."""
        return StepMovement(ApplyTurnControl, None, self.apply_turn_control_options(context))

    def to_finish_turn_cancellation(self, turn_id: str) -> StepMovement[str]:
        """The movement `cancel_turn` schedules for ``turn_id``."""
        return StepMovement(FinishTurnCancellation, turn_id, self.finish_turn_cancellation_options())

    def to_run_model(self, context: Context) -> StepMovement[CompactContextInput | None]:
        """The movement to `RunModel`, loading the model input as of ``context`` (its own writes included)."""
        return StepMovement(RunModel, None, self.run_model_options(context))

    def to_compact_context(
        self, context: Context, through_sequence: int
    ) -> StepMovement[CompactContextInput | None]:
        """The movement to `CompactContext`, summarizing through ``through_sequence``."""
        return StepMovement(
            CompactContext,
            CompactContextInput(through_sequence),
            self.compact_context_options(context, through_sequence),
        )

    def to_resume_turn(self, expected_result_count: int) -> StepMovement[int]:
        """The movement to `ResumeTurn`, waiting for ``expected_result_count`` results."""
        return StepMovement(ResumeTurn, expected_result_count, self.resume_turn_options())

    def to_await_tool_approval(self, tool_call_id: str) -> StepMovement[str]:
        """The movement to `AwaitToolApproval` for one call."""
        return StepMovement(AwaitToolApproval, tool_call_id, self.await_tool_approval_options(tool_call_id))

    def to_tool_step(self, record: AgentToolCall) -> StepMovement[str]:
        """The movement to the tool Step that runs an approved call, chosen by its effect."""
        step: type[Step[str]] = CallTool if record.effect in _RETRYING_EFFECTS else CallSingleAttemptTool
        return StepMovement(
            step, record.tool_call_id, self.tool_step_options(record.effect, record.tool_call_id)
        )

    def to_await_question_answer(self, record: AgentToolCall) -> StepMovement[str]:
        """The movement to `AwaitQuestionAnswer` for a call that is `awaiting_answer`."""
        return StepMovement(
            AwaitQuestionAnswer, record.tool_call_id, self.await_question_answer_options(record)
        )

    def to_await_timer(self, tool_call_id: str) -> StepMovement[str]:
        """The movement to `AwaitTimer` for a ``durable_wait`` call."""
        return StepMovement(AwaitTimer, tool_call_id, self.await_timer_options(tool_call_id))

    def to_poll_tool_task(self, record: AgentToolCall) -> StepMovement[str]:
        """The movement to `PollToolTask` for a call that is `waiting_for_task`."""
        return StepMovement(
            PollToolTask, record.tool_call_id, self.poll_tool_task_options(record.effect, record.tool_call_id)
        )

    def to_cancel_tool_task(self, record: AgentToolCall) -> StepMovement[str]:
        """The movement to `CancelToolTask` for a started task that `cancel_turn` abandoned."""
        return StepMovement(
            CancelToolTask, record.tool_call_id, self.cancel_tool_task_options(record.tool_call_id)
        )

    def to_waiting_step(self, record: AgentToolCall) -> StepMovement[str]:
        """The movement back to the Step that waits for a call's answer or Timer, which then applies it."""
        if record.status is ToolCallStatus.AWAITING_APPROVAL:
            return self.to_await_tool_approval(record.tool_call_id)
        if record.status is ToolCallStatus.AWAITING_ANSWER:
            return self.to_await_question_answer(record)
        if record.status is ToolCallStatus.WAITING_FOR_TIMER:
            return self.to_await_timer(record.tool_call_id)
        raise ValueError(f"tool call {record.tool_call_id!r} is {record.status.value}; no Step waits for it")

    def to_first_step_of(self, record: AgentToolCall) -> StepMovement[str]:
        """The movement that starts a newly requested call: its approval, or its tool Step."""
        if record.status is ToolCallStatus.AWAITING_APPROVAL:
            return self.to_await_tool_approval(record.tool_call_id)
        return self.to_tool_step(record)
