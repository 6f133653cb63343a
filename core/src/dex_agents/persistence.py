"""Persistence definitions shared by every agent session Flow type.

The names are a wire contract: a UI, Dex Web, or a session core in another language reads the same
Attributes and Channels. Every `AgentSessionFlow` registers these same objects, except the `AgentEvents`
Stream, which the SDK lets only one Flow type own, so each Flow creates its own (see `agent_events_stream`).
"""

from __future__ import annotations

from dex import Attribute, AttributeMap, Channel, ChannelMap, Stream

from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    AgentPlan,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    ContextSummary,
    PlanExecutionRequest,
    ToolCallCancellation,
    ToolCallCompleted,
    TurnCancellationRequest,
    TurnControlRequest,
    TurnReplySequence,
    TurnSessionSettings,
)

__all__ = [
    "AGENT_EVENTS_STREAM_NAME",
    "AGENT_MESSAGES",
    "AGENT_MESSAGE_CHUNKS",
    "AGENT_MESSAGE_INDEX",
    "AGENT_PLAN",
    "AGENT_STATE",
    "AGENT_TOOL_CALLS",
    "AGENT_TOOL_OUTPUTS",
    "AGENT_TRACE_CONTEXT",
    "AGENT_USAGE",
    "CONTEXT_SUMMARY",
    "DEFAULT_AGENT_EVENTS_CAPACITY_BYTES",
    "FRAMEWORK_RUN_STATE",
    "INTERRUPT_RESOLUTIONS",
    "PENDING_INTERRUPTS",
    "PENDING_PLAN_EXECUTION",
    "PLAN_EXECUTIONS",
    "QUEUED_USER_MESSAGES",
    "SESSION_SETTINGS",
    "STEERED_USER_MESSAGES",
    "TOOL_CALL_CANCELLATIONS",
    "TOOL_CALL_RESULTS",
    "TURN_CANCELLATION_REQUEST",
    "TURN_CONTROL_REQUESTS",
    "TURN_REPLY_SEQUENCE",
    "TURN_SESSION_SETTINGS",
    "agent_events_stream",
    "message_sequence_key",
    "plan_revision_key",
    "tool_output_key",
]

#: Default byte budget of a Flow type's `AgentEvents` Stream: 10 MiB.
DEFAULT_AGENT_EVENTS_CAPACITY_BYTES = 10 * 1024 * 1024

#: Wire name of the per-Flow-type event Stream.
AGENT_EVENTS_STREAM_NAME = "AgentEvents"

#: The session state.
AGENT_STATE: Attribute[AgentState] = Attribute("AgentState", AgentState)
#: The window: the newest messages, one instance per message, keyed by `message_sequence_key`.
AGENT_MESSAGES: AttributeMap[AgentMessage] = AttributeMap("AgentMessages", AgentMessage)
#: Older messages in immutable chunks, keyed by `message_sequence_key` of each chunk's first message.
AGENT_MESSAGE_CHUNKS: AttributeMap[AgentMessageChunk] = AttributeMap("AgentMessageChunks", AgentMessageChunk)
#: Which messages are in chunks and which in the window; unset until a Step first writes a chunk.
AGENT_MESSAGE_INDEX: Attribute[AgentMessageIndex] = Attribute("AgentMessageIndex", AgentMessageIndex)
#: Where the active turn's replies start; the Step that starts a turn writes it.
TURN_REPLY_SEQUENCE: Attribute[TurnReplySequence] = Attribute("TurnReplySequence", TurnReplySequence)
#: The summary of the earlier messages; only `CompactContext` writes it.
CONTEXT_SUMMARY: Attribute[ContextSummary] = Attribute("ContextSummary", ContextSummary)
#: The settings the next turn starts with (a JSON object); unset when there are none.
SESSION_SETTINGS: Attribute[dict[str, object]] = Attribute("SessionSettings", dict[str, object])
#: The settings the active turn started with, tagged with its turn.
TURN_SESSION_SETTINGS: Attribute[TurnSessionSettings] = Attribute("TurnSessionSettings", TurnSessionSettings)
#: The framework's run state, set only while a turn waits for tool calls.
FRAMEWORK_RUN_STATE: Attribute[str] = Attribute("FrameworkRunState", str)
#: The active turn's tool call records, keyed by tool call ID and deleted when the turn ends.
AGENT_TOOL_CALLS: AttributeMap[AgentToolCall] = AttributeMap("AgentToolCalls", AgentToolCall)
#: Tool outputs larger than the session keeps inline, keyed by `tool_output_key`; each is written once, by the
#: Step that records the call's result, and read only by `get_tool_output`, so no Step loads them.
AGENT_TOOL_OUTPUTS: AttributeMap[str] = AttributeMap("AgentToolOutputs", str)
#: The W3C traceparent of the current activation's root span, sampled or not; written only with tracing on.
AGENT_TRACE_CONTEXT: Attribute[str] = Attribute("AgentTraceContext", str)
#: Interrupts waiting for the user.
PENDING_INTERRUPTS: Attribute[list[AgentInterrupt]] = Attribute("PendingInterrupts", list[AgentInterrupt])
#: Token usage of the whole session.
AGENT_USAGE: Attribute[AgentUsage] = Attribute("AgentUsage", AgentUsage)
#: User messages waiting for their turn.
QUEUED_USER_MESSAGES: Channel[AgentUserMessage] = Channel("QueuedUserMessages", AgentUserMessage)
#: Answers to interrupts, keyed by interrupt ID.
INTERRUPT_RESOLUTIONS: ChannelMap[AgentInterruptResolution] = ChannelMap(
    "InterruptResolutions", AgentInterruptResolution
)
#: Internal: one message per tool call when its record becomes final; `ResumeTurn` waits for them.
TOOL_CALL_RESULTS: Channel[ToolCallCompleted] = Channel("ToolCallResults", ToolCallCompleted)
#: User messages that steer the active turn; `steer_user_message` publishes, `ApplyTurnControl` consumes.
STEERED_USER_MESSAGES: Channel[AgentUserMessage] = Channel("SteeredUserMessages", AgentUserMessage)
#: Internal: wakes `ResumeTurn` or `AwaitUserMessage` when a steer arrives.
TURN_CONTROL_REQUESTS: Channel[TurnControlRequest] = Channel("TurnControlRequests", TurnControlRequest)
#: The last cancelled turn; only `cancel_turn` writes it.
TURN_CANCELLATION_REQUEST: Attribute[TurnCancellationRequest] = Attribute(
    "TurnCancellationRequest", TurnCancellationRequest
)
#: Internal: wakes a tool call's waiting Step when steering abandons the call, keyed by tool call ID.
TOOL_CALL_CANCELLATIONS: ChannelMap[ToolCallCancellation] = ChannelMap(
    "ToolCallCancellations", ToolCallCancellation
)
#: The session's plan; unset until `write_todos` first succeeds. `RunModel` and `AwaitUserMessage` write it.
AGENT_PLAN: Attribute[AgentPlan] = Attribute("AgentPlan", AgentPlan)
#: Plan approvals that `execute_plan` accepted, keyed by `plan_revision_key`.
PLAN_EXECUTIONS: ChannelMap[PlanExecutionRequest] = ChannelMap("PlanExecutions", PlanExecutionRequest)
#: The approval `execute_plan` accepted that `AwaitUserMessage` has not consumed yet; both lock it.
PENDING_PLAN_EXECUTION: Attribute[PlanExecutionRequest] = Attribute(
    "PendingPlanExecution", PlanExecutionRequest
)


def plan_revision_key(revision: int) -> str:
    """Return the `PlanExecutions` instance key of a plan revision: the revision as a decimal.

    Args:
        revision: A plan revision, starting at 1.

    Returns:
        The instance key, such as ``"3"``.
    """
    return str(int(revision))


def tool_output_key(turn_id: str, tool_call_id: str) -> str:
    """Return the `AgentToolOutputs` instance key of a call's output: ``<turn_id>:<tool_call_id>``.

    Tool call IDs are unique within a turn only, and turn IDs never repeat in a session.

    Args:
        turn_id: The call's turn.
        tool_call_id: The call.

    Returns:
        The instance key, such as ``"turn-3:call_1"``.
    """
    return f"{turn_id}:{tool_call_id}"


def message_sequence_key(sequence: int) -> str:
    """Return the `AgentMessages` instance key of a message: its sequence as 12 zero-padded digits.

    Zero padding makes the keys sort in sequence order.

    Args:
        sequence: A message sequence, starting at 1.

    Returns:
        The instance key, such as ``"000000000001"``.

    Raises:
        ValueError: If ``sequence`` is not positive or has more than 12 digits.
    """
    if isinstance(sequence, bool) or not isinstance(sequence, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError(f"a message sequence must be an int, got {type(sequence).__name__}")
    if sequence <= 0:
        raise ValueError(f"a message sequence must be positive, got {sequence}")
    if sequence >= 10**12:
        raise ValueError(f"a message sequence must have at most 12 digits, got {sequence}")
    return f"{sequence:012d}"


def agent_events_stream(capacity_bytes: int = DEFAULT_AGENT_EVENTS_CAPACITY_BYTES) -> Stream[AgentEvent]:
    """Create the `AgentEvents` Stream for one Flow type.

    Args:
        capacity_bytes: The Stream's approximate byte budget, shared by every session of the Flow type.

    Returns:
        A new Stream definition; register it with exactly one Flow.

    Raises:
        ValueError: If ``capacity_bytes`` is not positive.
    """
    if capacity_bytes <= 0:
        raise ValueError(f"the AgentEvents capacity must be positive, got {capacity_bytes} bytes")
    return Stream(AGENT_EVENTS_STREAM_NAME, AgentEvent, capacity_bytes)
