"""Wire value types of an agent session.

Every type here crosses the wire as JSON with snake_case keys, through the SDK's automatic dataclass and
enum codecs, so a UI or a session written in another language reads the same fields. Enumerated fields are
``StrEnum`` types in Python and plain strings on the wire.

The SDK's automatic decoder builds nested dataclasses only when a field's type is a dataclass or a
parameterised container of them; an optional nested value (``AgentState | None``) arrives as a plain
mapping. ``__post_init__`` hooks below turn such mappings back into their value types, so a decoded value
is always fully typed.

This module deliberately has no ``from __future__ import annotations``: the SDK's decoder calls
``typing.get_type_hints`` on every decode, and string annotations make it compile each field's annotation
again every time (2-9x slower per type, the largest share of the session's own CPU per Step).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, TypeVar, cast

__all__ = [
    "AgentEvent",
    "AgentInterrupt",
    "AgentInterruptResolution",
    "AgentMessage",
    "AgentMessageChunk",
    "AgentMessageChunkRange",
    "AgentMessageIndex",
    "AgentMessagesPage",
    "AgentPlan",
    "AgentPlanTask",
    "AgentSessionStartInput",
    "AgentSessionStatus",
    "AgentSnapshot",
    "AgentState",
    "AgentToolCall",
    "AgentUsage",
    "AgentUserMessage",
    "AnswerQuestionRequest",
    "CancelTurnRequest",
    "CancellationReason",
    "CompactContextInput",
    "ContextSummary",
    "DeleteQueuedMessageRequest",
    "ExecutePlanRequest",
    "FrameworkMessage",
    "GetToolOutputRequest",
    "InteractionMode",
    "InterruptKind",
    "ListAgentMessagesRequest",
    "MessageRole",
    "PendingUserMessage",
    "PlanExecutionRequest",
    "PlanStatus",
    "PlanTaskStatus",
    "QuestionAnswer",
    "QuestionResolution",
    "ResolveInterruptRequest",
    "SteerUserMessageRequest",
    "StoredToolOutput",
    "ToolCallCancellation",
    "ToolCallCompleted",
    "ToolCallStatus",
    "ToolEffect",
    "TurnCancellationRequest",
    "TurnControlKind",
    "TurnControlRequest",
    "TurnReplySequence",
    "TurnSessionSettings",
    "UpdateSessionSettingsRequest",
]

_ValueT = TypeVar("_ValueT")


class AgentSessionStatus(StrEnum):
    """What a session is doing, as stored in `AgentState.status`."""

    WAITING_FOR_USER_MESSAGE = "waiting_for_user_message"
    RUNNING_MODEL = "running_model"
    RUNNING_TOOLS = "running_tools"
    COMPACTING_CONTEXT = "compacting_context"
    FAILED = "failed"


class MessageRole(StrEnum):
    """Who produced a stored message."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class ToolEffect(StrEnum):
    """What running a tool may change, which decides its Step, retries and default approval."""

    READ = "read"
    IDEMPOTENT_WRITE = "idempotent_write"
    NON_IDEMPOTENT_WRITE = "non_idempotent_write"
    UNCLASSIFIED = "unclassified"


class ToolCallStatus(StrEnum):
    """The state of one tool call record.

    `rejected`, `succeeded`, `failed` and `outcome_unknown` are final; the others mean the call still waits.
    """

    AWAITING_APPROVAL = "awaiting_approval"
    APPROVED = "approved"
    AWAITING_ANSWER = "awaiting_answer"
    WAITING_FOR_TIMER = "waiting_for_timer"
    WAITING_FOR_TASK = "waiting_for_task"
    REJECTED = "rejected"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def is_final(self) -> bool:
        """Whether the call has its result and will not change again."""
        return self in _FINAL_STATUSES


_FINAL_STATUSES = frozenset(
    {
        ToolCallStatus.REJECTED,
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.OUTCOME_UNKNOWN,
    }
)


class InterruptKind(StrEnum):
    """What an interrupt asks the user for."""

    TOOL_APPROVAL = "tool_approval"
    QUESTION = "question"


class CancellationReason(StrEnum):
    """Why steering or `cancel_turn` abandoned a tool call that had not started."""

    STEERED = "steered"
    TURN_CANCELLED = "turn_cancelled"


class TurnControlKind(StrEnum):
    """What a `TurnControlRequest` wakes a waiting Step for."""

    STEER = "steer"
    CANCEL_TURN = "cancel_turn"


class InteractionMode(StrEnum):
    """The mode of a turn.

    `planning` turns may only write the plan with `write_todos`; `execute_plan` starts an `executing` turn;
    every other turn is `chat`.
    """

    CHAT = "chat"
    PLANNING = "planning"
    EXECUTING = "executing"


class PlanStatus(StrEnum):
    """Where a session's plan stands.

    `draft` waits for the user's approval, `active` is being executed, `completed` has every task done,
    and `cleared` holds no tasks.
    """

    DRAFT = "draft"
    ACTIVE = "active"
    COMPLETED = "completed"
    CLEARED = "cleared"


class PlanTaskStatus(StrEnum):
    """Where one task of a plan stands."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class QuestionResolution(StrEnum):
    """How a question ended: the user answered or declined it, or its deadline passed."""

    ANSWERED = "answered"
    DECLINED = "declined"
    DEADLINE_PASSED = "deadline_passed"


def _coerce(value: object, value_type: type[_ValueT]) -> _ValueT:
    """Return ``value`` as ``value_type``, building it from a decoded JSON mapping when needed."""
    if isinstance(value, value_type):
        return value
    if isinstance(value, Mapping):
        data = cast(Mapping[str, Any], value)
        names = {definition.name for definition in fields(cast(Any, value_type))}
        return value_type(**{key: item for key, item in data.items() if key in names})
    raise TypeError(f"expected {value_type.__name__} or a JSON object, got {type(value).__name__}")


def _coerce_optional(value: object, value_type: type[_ValueT]) -> _ValueT | None:
    return None if value is None else _coerce(value, value_type)


def _coerce_tuple(values: object, value_type: type[_ValueT]) -> tuple[_ValueT, ...]:
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(f"expected a list of {value_type.__name__}, got {type(values).__name__}")
    return tuple(_coerce(item, value_type) for item in cast(Sequence[object], values))


def _coerce_strings(values: object) -> tuple[str, ...]:
    if not isinstance(values, Sequence) or isinstance(values, str):
        raise TypeError(f"expected a list of strings, got {type(values).__name__}")
    return tuple(str(item) for item in cast(Sequence[object], values))


def _set(instance: object, name: str, value: object) -> None:
    # Frozen dataclasses forbid assignment; normalising decoded fields in __post_init__ is the one
    # place where replacing a field is intended.
    object.__setattr__(instance, name, value)


@dataclass(frozen=True)
class AgentUsage:
    """Token usage of one model call, or the running total of a session.

    Attributes:
        model_calls: Number of model calls counted.
        input_tokens: Input tokens, cached ones included.
        output_tokens: Output tokens, reasoning ones included.
        cached_input_tokens: Input tokens served from a provider cache.
        reasoning_tokens: Output tokens spent on reasoning.
    """

    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0

    def plus(self, other: "AgentUsage") -> "AgentUsage":
        """Return the field-by-field sum of this usage and ``other``."""
        return AgentUsage(
            model_calls=self.model_calls + other.model_calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


@dataclass(frozen=True)
class AgentSessionStartInput:
    """Input of the `StartAgentSession` Step.

    Attributes:
        initial_message: The first user message; `None` or blank starts the session without a turn.
        session_settings: A JSON object of settings that every turn starts with, such as the model or the
            instructions a runner chooses; `None` or ``{}`` means none. Settings the session refuses (not a
            JSON object, or larger than `MAX_SESSION_SETTINGS_BYTES` plus its tolerance) fail the session.
    """

    initial_message: str | None = None
    session_settings: dict[str, object] | None = None


@dataclass(frozen=True)
class AgentState:
    """The session's own state, stored in the `AgentState` Attribute.

    Attributes:
        status: What the session is doing.
        turn_count: Turns that completed or failed.
        active_turn_id: `"turn-<n>"` while a turn runs, else `None`.
        next_message_sequence: The sequence the next stored message gets; sequences start at 1.
        last_turn_error: Why the last failed turn failed; cleared when a later turn completes.
        interaction_mode: The mode of the active or last turn.
        accepts_turn_control: Whether the active turn was started by a Worker that steers and cancels
            turns, so its waits listen for steering; every turn end clears it, and a Worker of an earlier
            release drops it whenever it writes the state. `steer_user_message` and `cancel_turn` refuse
            a turn without it.
        active_turn_release: The `dex_agents` release (`dex_agents.__version__`) of the Worker that
            started the active turn, so a rollout can see which turns the previous release began; `None`
            when no turn runs or a Worker of 0.1.0 started it.
    """

    status: AgentSessionStatus
    turn_count: int
    active_turn_id: str | None
    next_message_sequence: int
    last_turn_error: str | None
    interaction_mode: InteractionMode = InteractionMode.CHAT
    accepts_turn_control: bool = False
    active_turn_release: str | None = None

    def __post_init__(self) -> None:
        _set(self, "status", AgentSessionStatus(self.status))
        _set(self, "interaction_mode", InteractionMode(self.interaction_mode))


@dataclass(frozen=True)
class FrameworkMessage:
    """A message as a runner produces it: the stored projection plus the framework's own item.

    Attributes:
        role: Who produced the message.
        framework_item: Framework-native JSON text, replayed to the framework unchanged.
        text: Display text.
        tool_call_id: The tool call a tool request or result belongs to.
        tool_name: The tool's name, for tool requests and results.
        tool_arguments: The call's arguments as JSON text.
        tool_output: The tool's result text.
    """

    role: MessageRole
    framework_item: str
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_arguments: str | None = None
    tool_output: str | None = None


@dataclass(frozen=True)
class AgentMessage:
    """One stored message of the conversation, an instance of the `AgentMessages` map.

    Attributes:
        sequence: Position in the conversation, starting at 1.
        turn_id: The turn that stored it.
        role: Who produced it.
        text: Display text.
        tool_call_id: The tool call a tool request or result belongs to.
        tool_name: The tool's name.
        tool_arguments: The call's arguments as JSON text.
        tool_output: The tool's result text.
        framework_item: Framework-native JSON text, replayed to the framework unchanged.
        created_at: When it was stored, RFC 3339 in UTC.
    """

    sequence: int
    turn_id: str
    role: MessageRole
    text: str | None
    tool_call_id: str | None
    tool_name: str | None
    tool_arguments: str | None
    tool_output: str | None
    framework_item: str
    created_at: str

    def __post_init__(self) -> None:
        _set(self, "role", MessageRole(self.role))


@dataclass(frozen=True)
class QuestionAnswer:
    """How one question of a tool call ended, kept in `AgentToolCall.input_answers`.

    A tool that asks before it takes effect only ever sees `answered` entries: a declined or expired
    question ends its call. A started task's questions also record `declined` and `deadline_passed`, so
    the task learns how each of its questions ended.

    Attributes:
        interrupt_id: The question's interrupt, ``<tool_call_id>-input-<n>``.
        question: The question text.
        answer: The answer; for a decline the user's message or ``The user declined to answer.``; for a
            passed deadline ``question deadline passed``.
        resolution: `answered`, `declined` or `deadline_passed`.
    """

    interrupt_id: str
    question: str
    answer: str
    resolution: QuestionResolution = QuestionResolution.ANSWERED

    def __post_init__(self) -> None:
        _set(self, "resolution", QuestionResolution(self.resolution))


@dataclass(frozen=True)
class AgentToolCall:
    """The durable record of one tool call, an instance of the `AgentToolCalls` map.

    Attributes:
        tool_call_id: The call's ID, unique within its turn.
        turn_id: The turn that requested it.
        tool_name: The tool's name.
        arguments: The call's arguments as JSON text.
        effect: The tool's effect class.
        requires_approval: Whether the call waits for an approval before it runs.
        status: Where the call stands.
        output: The tool's result when it succeeded.
        error: The `ToolExecutionError` message, or the recovery detail of a failed Step.
        rejection_message: Why the user rejected the call, if they said, or the structured text of a call
            that steering or `cancel_turn` abandoned.
        deferral_order: Zero-based position of the call within its turn, in model order.
        tool_source_reference: Opaque text a tool source keeps with the call.
        trace_context: The W3C traceparent of the activation root whose trace the call's ``execute_tool``
            spans join: `RunModel` copies the session's root onto the record and an approval replaces it
            with its own. `None` while tracing is off.
        wait_until: When a `durable_wait` call's wait ends, RFC 3339 in UTC.
        input_continuation: Opaque text from the tool's last `ToolInputRequested`, or from a task's last
            `ToolTaskPending`; the tool or the task's poll reads it back.
        input_answers: How each question the call asked ended, oldest first.
        input_question: The question the call waits on while it is `awaiting_answer`.
        input_choices: That question's choices.
        input_allows_free_text: Whether that question accepts an answer outside its choices.
        cancellation_reason: Set on a `rejected` record that steering (`steered`) or `cancel_turn`
            (`turn_cancelled`) abandoned before it started, and on a started task that `cancel_turn`
            abandoned (`outcome_unknown`).
        task_id: The remote task the tool started (`ToolTaskStarted`); kept after the task ends.
        task_poll_interval_seconds: Whole seconds, at least 1, until the task's next poll.
        task_answer_pending: The last entry of ``input_answers`` has not reached the task yet.
        stored_output_bytes: The size, in UTF-8 bytes, of a succeeded call's whole output when it was
            larger than the session keeps inline: the whole output is stored apart in `AgentToolOutputs`
            (read it with `AgentSessionClient.get_tool_output`), and ``output`` holds the part the model
            reads, with a note (`tool_output_view`). `None` when ``output`` is the whole output.
        resumes_turn: The call is its model response's only call and went straight to its tool Step, so
            no `ResumeTurn` waits for it: the Step that makes it final moves the turn on to `RunModel`
            itself, and publishes no `ToolCallResults` message. Cleared when the call starts to wait (a
            question, a task), from when `ResumeTurn` waits for it as for any other call.
    """

    tool_call_id: str
    turn_id: str
    tool_name: str
    arguments: str
    effect: ToolEffect
    requires_approval: bool
    status: ToolCallStatus
    output: str | None = None
    error: str | None = None
    rejection_message: str | None = None
    deferral_order: int = 0
    tool_source_reference: str | None = None
    trace_context: str | None = None
    wait_until: str | None = None
    input_continuation: str | None = None
    input_answers: tuple[QuestionAnswer, ...] = ()
    input_question: str | None = None
    input_choices: tuple[str, ...] = ()
    input_allows_free_text: bool = True
    cancellation_reason: CancellationReason | None = None
    task_id: str | None = None
    task_poll_interval_seconds: int | None = None
    task_answer_pending: bool = False
    stored_output_bytes: int | None = None
    resumes_turn: bool = False

    def __post_init__(self) -> None:
        _set(self, "effect", ToolEffect(self.effect))
        _set(self, "status", ToolCallStatus(self.status))
        _set(self, "input_answers", _coerce_tuple(self.input_answers, QuestionAnswer))
        _set(self, "input_choices", _coerce_strings(self.input_choices))
        if self.cancellation_reason is not None:
            _set(self, "cancellation_reason", CancellationReason(self.cancellation_reason))

    @property
    def is_final(self) -> bool:
        """Whether the call has its result and will not change again."""
        return self.status.is_final


@dataclass(frozen=True)
class AgentInterrupt:
    """A pending request for the user, stored in the `PendingInterrupts` Attribute.

    Attributes:
        interrupt_id: The interrupt's ID; for an approval, the tool call ID.
        kind: What the interrupt asks for.
        tool_call_id: The tool call it belongs to.
        tool_name: The tool's name.
        arguments: The call's arguments as JSON text.
        created_at: When it was raised, RFC 3339 in UTC.
        deadline: When it expires, RFC 3339 in UTC, or `None` for never.
        question: The question, for a `question` interrupt.
        choices: The answers a question offers; empty for free text only.
        allows_free_text: Whether a question accepts an answer outside ``choices``.
    """

    interrupt_id: str
    kind: InterruptKind
    tool_call_id: str
    tool_name: str
    arguments: str
    created_at: str
    deadline: str | None
    question: str | None = None
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True

    def __post_init__(self) -> None:
        _set(self, "kind", InterruptKind(self.kind))
        _set(self, "choices", _coerce_strings(self.choices))


@dataclass(frozen=True)
class AgentInterruptResolution:
    """The answer to an interrupt, published on `InterruptResolutions[<interrupt ID>]`.

    Attributes:
        approved: Whether the call may run; for a question, `True` when it was answered and `False` when
            it was declined.
        rejection_message: Why it was rejected or declined; always `None` on approval.
        answer: The answer to a question; `None` for approvals and declines.
    """

    approved: bool
    rejection_message: str | None = None
    answer: str | None = None


@dataclass(frozen=True)
class ToolCallCompleted:
    """Published on `ToolCallResults` when a tool call's record becomes final.

    Attributes:
        tool_call_id: The call whose record became final.
    """

    tool_call_id: str


@dataclass(frozen=True)
class AgentUserMessage:
    """A user message sent to a session.

    Attributes:
        text: The message text.
        plan_mode: Start a planning turn, which may only write the plan with `write_todos`.
            `send_user_message` refuses it unless `AgentSessionOptions.plan_mode_enabled` is set; a queued
            message keeps it when it is steered.
    """

    text: str
    plan_mode: bool = False


@dataclass(frozen=True)
class PendingUserMessage:
    """A user message waiting in a Channel, with the message ID the Channel gave it.

    Attributes:
        message_id: The Channel message ID; pass it to `steer_user_message` or `delete_queued_message`.
        message: The message.
    """

    message_id: str
    message: AgentUserMessage

    def __post_init__(self) -> None:
        _set(self, "message", _coerce(self.message, AgentUserMessage))


@dataclass(frozen=True)
class AgentPlanTask:
    """One task of a plan.

    Attributes:
        content: What the task is.
        status: `pending`, `in_progress` or `completed`.
    """

    content: str
    status: PlanTaskStatus

    def __post_init__(self) -> None:
        _set(self, "status", PlanTaskStatus(self.status))


@dataclass(frozen=True)
class AgentPlan:
    """A session's plan, stored in the `AgentPlan` Attribute; `write_todos` replaces it.

    Attributes:
        revision: Starts at 1 and increases with every change.
        status: `draft`, `active`, `completed` or `cleared`.
        tasks: The plan's tasks, in order.
        updated_at: When it last changed, RFC 3339 in UTC.
    """

    revision: int
    status: PlanStatus
    tasks: tuple[AgentPlanTask, ...]
    updated_at: str

    def __post_init__(self) -> None:
        _set(self, "status", PlanStatus(self.status))
        _set(self, "tasks", _coerce_tuple(self.tasks, AgentPlanTask))


@dataclass(frozen=True)
class ContextSummary:
    """The summary of a session's earlier messages, stored in the `ContextSummary` Attribute.

    Only `CompactContext` writes it. Each summary folds in the one before, so it always covers the
    conversation from its first message.

    Attributes:
        generation: Summaries written so far, starting at 1.
        first_sequence: Always 1.
        last_sequence: The last summarized message.
        text: The summary.
        created_at: When it was written, RFC 3339 in UTC.
    """

    generation: int
    first_sequence: int
    last_sequence: int
    text: str
    created_at: str


@dataclass(frozen=True)
class CompactContextInput:
    """Input of the `CompactContext` Step, and of `RunModel` and `RecordTurnFailure`, which share its type.

    Attributes:
        through_sequence: The last message the new summary covers.
    """

    through_sequence: int


@dataclass(frozen=True)
class AgentMessageChunk:
    """Consecutive stored messages, one immutable instance of the `AgentMessageChunks` map.

    Attributes:
        messages: The messages, in sequence order and without gaps.
    """

    messages: tuple[AgentMessage, ...]

    def __post_init__(self) -> None:
        messages = _coerce_tuple(self.messages, AgentMessage)
        if not messages:
            raise ValueError("a message chunk holds at least one message")
        first = messages[0].sequence
        if any(message.sequence != first + offset for offset, message in enumerate(messages)):
            sequences = [message.sequence for message in messages]
            raise ValueError(f"a message chunk holds consecutive messages, got {sequences}")
        _set(self, "messages", messages)


@dataclass(frozen=True)
class AgentMessageChunkRange:
    """The sequences one message chunk holds.

    Attributes:
        first_sequence: Its first message, also its instance key.
        last_sequence: Its last message.
        stored_bytes: The chunk's stored size in bytes, so a reader knows what loading it costs; 0 for a
            chunk an earlier release wrote.
    """

    first_sequence: int
    last_sequence: int
    stored_bytes: int = 0


@dataclass(frozen=True)
class StoredToolOutput:
    """A tool output stored apart in `AgentToolOutputs`, listed in the index so retention can delete it.

    Attributes:
        turn_id: The call's turn.
        tool_call_id: The call.
        last_sequence: The last message of its turn: retention deletes the output once it deletes the
            messages through this one.
    """

    turn_id: str
    tool_call_id: str
    last_sequence: int


@dataclass(frozen=True)
class AgentMessageIndex:
    """Where a session's messages are stored, in the `AgentMessageIndex` Attribute.

    A session without an index keeps every message in the `AgentMessages` window from sequence 1.

    Attributes:
        chunks: Every kept chunk in sequence order: the archived ones, consecutive, then the single
            oversized messages that sit among the window's sequences.
        first_sequence: The oldest stored message; retention deleted the ones before it.
        window_first_sequence: The oldest message in `AgentMessages`.
        tool_outputs: The tool outputs of ended turns that are stored apart, for a session with retention
            (compaction and a ``retained_message_limit``); retention deletes each with its turn's messages.
            A session without retention keeps every output, as it keeps every message, and lists none.
    """

    chunks: tuple[AgentMessageChunkRange, ...]
    first_sequence: int
    window_first_sequence: int
    tool_outputs: tuple[StoredToolOutput, ...] = ()

    def __post_init__(self) -> None:
        _set(self, "chunks", _coerce_tuple(self.chunks, AgentMessageChunkRange))
        _set(self, "tool_outputs", _coerce_tuple(self.tool_outputs, StoredToolOutput))


@dataclass(frozen=True)
class TurnReplySequence:
    """Where a turn's replies start, in the `TurnReplySequence` Attribute, written by the Step that starts it.

    Attributes:
        turn_id: The turn.
        sequence: The first sequence after the turn's user messages.
    """

    turn_id: str
    sequence: int


@dataclass(frozen=True)
class TurnSessionSettings:
    """The settings a turn started with, in the `TurnSessionSettings` Attribute.

    A copy whose ``turn_id`` is not the active turn reads as no settings.

    Attributes:
        turn_id: The turn that started with them.
        session_settings: The settings, a JSON object.
    """

    turn_id: str
    session_settings: dict[str, object]


@dataclass(frozen=True)
class UpdateSessionSettingsRequest:
    """Input of the `update_session_settings` RPC.

    Attributes:
        session_settings: The settings the next turn starts with; they replace the current ones, ``{}``
            clears them, and `None` is refused.
    """

    session_settings: dict[str, object] | None = None


@dataclass(frozen=True)
class AgentEvent:
    """One live event on a session's `AgentEvents` Stream.

    Attributes:
        type: The event type, an `AgentEventType` value or an adapter-prefixed name.
        turn_id: The turn the event belongs to.
        attempt: The one-based attempt of the Step that wrote it.
        payload: A JSON object as compact text with sorted keys.
        step_execution_id: The Step execution that wrote it, shared by all of its attempts.
    """

    type: str
    turn_id: str | None
    attempt: int
    payload: str
    step_execution_id: str = ""


@dataclass(frozen=True)
class ResolveInterruptRequest:
    """Input of the `resolve_interrupt` RPC.

    Attributes:
        interrupt_id: The interrupt to resolve.
        approved: Whether the tool call may run.
        rejection_message: Shown to the model on rejection; dropped on approval.
    """

    interrupt_id: str
    approved: bool
    rejection_message: str | None = None


@dataclass(frozen=True)
class AnswerQuestionRequest:
    """Input of the `answer_question` RPC.

    Attributes:
        interrupt_id: The pending question.
        answer: The answer: not blank, and one of the question's choices unless it allows free text.
    """

    interrupt_id: str
    answer: str


@dataclass(frozen=True)
class ExecutePlanRequest:
    """Input of the `execute_plan` RPC.

    Attributes:
        revision: The plan revision the user approves; a stale revision is refused.
    """

    revision: int


@dataclass(frozen=True)
class PlanExecutionRequest:
    """An approval that `execute_plan` accepted.

    It is published on `PlanExecutions[<revision>]` and kept in `PendingPlanExecution` until
    `AwaitUserMessage` starts the executing turn.

    Attributes:
        revision: The approved plan revision.
    """

    revision: int


@dataclass(frozen=True)
class SteerUserMessageRequest:
    """Input of the `steer_user_message` RPC; exactly one field is set.

    Attributes:
        message_id: Steer this queued message (a `PendingUserMessage.message_id`) instead of queueing it.
        text: Steer with a new message.
    """

    message_id: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class DeleteQueuedMessageRequest:
    """Input of the `delete_queued_message` RPC.

    Attributes:
        message_id: The queued message to delete (a `PendingUserMessage.message_id`).
    """

    message_id: str


@dataclass(frozen=True)
class CancelTurnRequest:
    """Input of the `cancel_turn` RPC.

    Attributes:
        turn_id: The turn to cancel; `None` cancels the active turn, whichever it is.
    """

    turn_id: str | None = None


@dataclass(frozen=True)
class TurnControlRequest:
    """Internal: published on `TurnControlRequests` to wake `ResumeTurn` or `AwaitUserMessage`.

    Attributes:
        kind: Always `steer`; `cancel_turn` no longer publishes one.
    """

    kind: TurnControlKind

    def __post_init__(self) -> None:
        _set(self, "kind", TurnControlKind(self.kind))


@dataclass(frozen=True)
class TurnCancellationRequest:
    """The last turn `cancel_turn` cancelled, stored in the `TurnCancellationRequest` Attribute.

    A turn is cancelled while this names the active turn; turn IDs never repeat.

    Attributes:
        turn_id: The cancelled turn.
        requested_at: When `cancel_turn` recorded it, RFC 3339 in UTC.
    """

    turn_id: str
    requested_at: str


@dataclass(frozen=True)
class ToolCallCancellation:
    """Internal: published on `ToolCallCancellations[<tool call ID>]` to wake the call's waiting Step.

    The wake decides nothing by itself: the woken Step reads the turn's steering and cancellation state.

    Attributes:
        reason: Why the call's wait was abandoned.
    """

    reason: CancellationReason

    def __post_init__(self) -> None:
        _set(self, "reason", CancellationReason(self.reason))


@dataclass(frozen=True)
class AgentSnapshot:
    """Everything needed to draw a session, returned by `get_agent_snapshot`.

    A snapshot is one stored value, so it is bounded by bytes (`MAX_RPC_OUTPUT_BYTES`) as well as by count:
    it holds the newest messages that fit, and the rest is read page by page with `list_agent_messages`
    from ``next_before_sequence``. Its messages carry no ``framework_item`` (an empty string): that is the
    runner's copy of the same message, which only the session's Steps read.

    Attributes:
        state: The session state; `None` until `StartAgentSession` commits.
        messages: The newest stored messages, in sequence order: at most 200, and as many as fit the
            snapshot's byte budget beside everything else it holds.
        pending_interrupts: Interrupts waiting for the user.
        tool_calls: The active turn's tool call records, in deferral order. When they would not fit beside
            the rest, their long texts are cut, each with a marker (`bounded_text`).
        usage: Token usage of the whole session.
        queued_message_count: User messages waiting for the current turn to end.
        plan: The session's plan, or `None` before `write_todos` first wrote one.
        queued_messages: The queued user messages with their IDs, oldest first: as many as fit a quarter of
            the snapshot's budget; ``queued_message_count`` counts them all.
        steered_messages: Steered user messages not applied yet, oldest first, within the same quarter;
            ``steered_message_count`` counts them all.
        context_summary: The summary of the earlier messages, once the session compacted.
        session_settings: The settings the next turn starts with; `None` when there are none.
        next_before_sequence: Pass as ``before_sequence`` to `list_agent_messages` for the messages before
            ``messages``; `None` when ``messages`` starts at the oldest stored message.
        missing_chunks: Non-empty when the call did not load message chunks the snapshot needed: the first
            sequences of those `AgentMessageChunks` instances. ``messages`` then holds only the newest
            messages the call could read; calling again with the instances loaded
            (``RPCInvokeOptions(load_attribute_map_instances=...)``) returns the whole snapshot.
            `AgentSessionClient` does this itself.
        steered_message_count: Steered user messages not applied yet.
    """

    state: AgentState | None
    messages: tuple[AgentMessage, ...]
    pending_interrupts: tuple[AgentInterrupt, ...]
    tool_calls: tuple[AgentToolCall, ...]
    usage: AgentUsage
    queued_message_count: int
    plan: AgentPlan | None = None
    queued_messages: tuple[PendingUserMessage, ...] = ()
    steered_messages: tuple[PendingUserMessage, ...] = ()
    context_summary: ContextSummary | None = None
    session_settings: dict[str, object] | None = None
    next_before_sequence: int | None = None
    missing_chunks: tuple[int, ...] = ()
    steered_message_count: int = 0

    def __post_init__(self) -> None:
        _set(self, "state", _coerce_optional(self.state, AgentState))
        _set(self, "messages", _coerce_tuple(self.messages, AgentMessage))
        _set(self, "pending_interrupts", _coerce_tuple(self.pending_interrupts, AgentInterrupt))
        _set(self, "tool_calls", _coerce_tuple(self.tool_calls, AgentToolCall))
        _set(self, "usage", _coerce(self.usage, AgentUsage))
        _set(self, "plan", _coerce_optional(self.plan, AgentPlan))
        _set(self, "queued_messages", _coerce_tuple(self.queued_messages, PendingUserMessage))
        _set(self, "steered_messages", _coerce_tuple(self.steered_messages, PendingUserMessage))
        _set(self, "context_summary", _coerce_optional(self.context_summary, ContextSummary))
        _set(self, "missing_chunks", tuple(int(sequence) for sequence in self.missing_chunks))


@dataclass(frozen=True)
class ListAgentMessagesRequest:
    """Input of the `list_agent_messages` RPC.

    Attributes:
        before_sequence: Return messages before this sequence; `None` starts after the newest message.
        limit: The most messages to return, clamped to 1..200.
        include_framework_items: Return each message's ``framework_item``, the runner's copy of it, which
            roughly doubles a page's bytes; without it the field is an empty string.
    """

    before_sequence: int | None = None
    limit: int = 50
    include_framework_items: bool = False


@dataclass(frozen=True)
class AgentMessagesPage:
    """One page of stored messages, oldest first.

    A page is one stored value, so it ends early when its next message would take it past
    `MAX_RPC_OUTPUT_BYTES`; it always holds at least one message when one is left to read.

    Attributes:
        messages: The page's messages in sequence order.
        next_before_sequence: Pass as `before_sequence` for the previous page; `None` when the page starts
            at the oldest stored message, or holds nothing because of ``missing_chunks``.
        deleted_before_sequence: The oldest stored message once retention deleted the ones before it;
            `None` while every message since the first is stored.
        missing_chunks: Non-empty when the call did not load message chunks the page needed: the first
            sequences of those `AgentMessageChunks` instances. ``messages`` then holds only the newest
            part the call could read (perhaps none); calling again with the instances loaded
            (``RPCInvokeOptions(load_attribute_map_instances=...)``) returns the whole page.
            `AgentSessionClient` does this itself.
    """

    messages: tuple[AgentMessage, ...] = ()
    next_before_sequence: int | None = None
    deleted_before_sequence: int | None = None
    missing_chunks: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _set(self, "messages", _coerce_tuple(self.messages, AgentMessage))
        _set(self, "missing_chunks", tuple(int(sequence) for sequence in self.missing_chunks))


@dataclass(frozen=True)
class GetToolOutputRequest:
    """Input of the `get_tool_output` RPC.

    Attributes:
        turn_id: The call's turn.
        tool_call_id: The call.
    """

    turn_id: str
    tool_call_id: str
