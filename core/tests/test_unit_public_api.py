"""Pins the public API: an accidental export or removal fails here."""

import dex_agents

EXPECTED_EXPORTS = {
    # dex-agents 0.1.0
    "AGENT_MESSAGES",
    "AGENT_STATE",
    "AGENT_TOOL_CALLS",
    "AGENT_USAGE",
    "APPROVAL_DEADLINE_PASSED",
    "DEFAULT_AGENT_EVENTS_CAPACITY_BYTES",
    "DEFAULT_REJECTION_TOOL_RESULT",
    "FRAMEWORK_RUN_STATE",
    "INTERRUPT_RESOLUTIONS",
    "OUTCOME_UNKNOWN_TOOL_RESULT",
    "PENDING_INTERRUPTS",
    "QUEUED_USER_MESSAGES",
    "TOOL_CALL_RESULTS",
    "TURN_FAILURE_NOTE_FOOTER",
    "TURN_FAILURE_NOTE_HEADER",
    "AgentEvent",
    "AgentEventType",
    "AgentEventWriter",
    "AgentFrameworkRunner",
    "AgentInterrupt",
    "AgentInterruptResolution",
    "AgentMessage",
    "AgentMessagesPage",
    "AgentSessionClient",
    "AgentSessionFlow",
    "AgentSessionOptions",
    "AgentSessionStartInput",
    "AgentSessionStatus",
    "AgentSnapshot",
    "AgentState",
    "AgentToolCall",
    "AgentTurnContext",
    "AgentTurnOutcome",
    "AgentUsage",
    "AgentUserMessage",
    "DeferredToolCall",
    "DeferredToolExecution",
    "FrameworkMessage",
    "InterruptKind",
    "ListAgentMessagesRequest",
    "MessageRole",
    "ResolveInterruptRequest",
    "ToolCallCompleted",
    "ToolCallStatus",
    "ToolCallsRequested",
    "ToolEffect",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolPolicy",
    "TurnCompleted",
    "build_turn_failure_note",
    "describe_tool_call_outcome",
    "message_sequence_key",
    "resolve_tool_policy",
    # additions of this release
    "MAX_USER_MESSAGE_BYTES",
    "TOOL_CALL_NOT_RUN_ERROR_PREFIX",
    "current_tool_execution",
    "agent_codec_registry",
    "UNKNOWN_TOOL_POLICY",
    "RunStateFormat",
    "RunStateFormatError",
    "effect_from_mcp_annotations",
    "parse_tool_arguments",
    # steering and turn cancellation
    "CancelTurnRequest",
    "CancellationReason",
    "DeleteQueuedMessageRequest",
    "PendingUserMessage",
    "STEERED_REJECTION_MESSAGE",
    "STEERED_USER_MESSAGES",
    "SteerUserMessageRequest",
    "TOOL_CALL_CANCELLATIONS",
    "TURN_CANCELLATION_REQUEST",
    "TURN_CANCELLED_NOTE_HEADER",
    "TURN_CANCELLED_REJECTION_MESSAGE",
    "TURN_CONTROL_REQUESTS",
    "TURN_STEERED_NOTE_HEADER",
    "ToolCallCancellation",
    "TurnCancellationRequest",
    "TurnControlKind",
    "TurnControlRequest",
    "UnfinishedTurnMessageBuilder",
    "build_turn_control_note",
    "cancellation_rejection_message",
    "TurnContinued",
}


def test_exports_exactly_the_pinned_names() -> None:
    assert set(dex_agents.__all__) == EXPECTED_EXPORTS
    assert len(dex_agents.__all__) == len(EXPECTED_EXPORTS)


def test_every_export_exists() -> None:
    missing = [name for name in dex_agents.__all__ if not hasattr(dex_agents, name)]
    assert missing == []


def test_0_1_0_module_locations_still_import() -> None:
    from dex_agents.client import AgentSessionClient
    from dex_agents.events import AgentEventType, AgentEventWriter
    from dex_agents.persistence import DEFAULT_AGENT_EVENTS_CAPACITY_BYTES, message_sequence_key
    from dex_agents.runner import ToolPolicy, resolve_tool_policy
    from dex_agents.session_flow import AgentSessionFlow, AgentSessionOptions
    from dex_agents.values import AgentSessionStatus, ToolEffect

    assert AgentSessionClient is dex_agents.AgentSessionClient
    assert AgentEventType is dex_agents.AgentEventType
    assert AgentEventWriter is dex_agents.AgentEventWriter
    assert DEFAULT_AGENT_EVENTS_CAPACITY_BYTES == 10 * 1024 * 1024
    assert message_sequence_key is dex_agents.message_sequence_key
    assert ToolPolicy is dex_agents.ToolPolicy
    assert resolve_tool_policy is dex_agents.resolve_tool_policy
    assert AgentSessionFlow is dex_agents.AgentSessionFlow
    assert AgentSessionOptions is dex_agents.AgentSessionOptions
    assert AgentSessionStatus is dex_agents.AgentSessionStatus
    assert ToolEffect is dex_agents.ToolEffect


def test_turn_failure_note_limits_live_in_limits() -> None:
    from dex_agents import limits

    assert limits.__all__ == [
        "MAX_NOTE_TEXT_BYTES",
        "MAX_STORED_VALUE_BYTES",
        "MAX_TURN_FAILURE_NOTE_BYTES",
        "MAX_USER_MESSAGE_BYTES",
        "TURN_FAILURE_NOTE_CUT_MARKER",
        "bounded_text",
        "unencodable_index",
        "utf8_size",
    ]
    assert limits.MAX_TURN_FAILURE_NOTE_BYTES == 64 * 1024
    assert limits.TURN_FAILURE_NOTE_CUT_MARKER == " [... cut by dex-agents]"
