"""Pins the public API: an accidental export or removal fails here."""

import subprocess
import sys

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
    "server_endpoint",
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
    "policy_from_mcp_annotations",
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
    "ToolDescriber",
    "UnfinishedTurnMessageBuilder",
    "build_turn_control_note",
    "cancellation_rejection_message",
    "TurnContinued",
    # the Worker entry point and the client's waits (issues 19 and 22)
    "AgentWorker",
    "ClientOnlyFlowError",
    "SessionWaitTimeoutError",
    "TurnEnd",
    "TurnOutcome",
    "agent_worker_task_slots",
    "serve_agent_worker",
    # built-in tools, plan mode, tool questions and tool tasks
    "AGENT_PLAN",
    "ASK_USER",
    "BUILT_IN_TOOL_DEFINITIONS",
    "BUILT_IN_TOOL_NAMES",
    "DEFAULT_MAX_DURABLE_WAIT",
    "DURABLE_WAIT",
    "PENDING_PLAN_EXECUTION",
    "PLANNING_TURN_REJECTION_MESSAGE",
    "PLAN_EXECUTIONS",
    "QUESTION_DEADLINE_PASSED",
    "QUESTION_DECLINED_TOOL_RESULT",
    "TOOL_TASK_CANCELLED_ERROR",
    "WRITE_TODOS",
    "WRITE_TODOS_CALLED_TWICE_ERROR",
    "AgentPlan",
    "AgentPlanTask",
    "AnswerQuestionRequest",
    "BuiltInToolDefinition",
    "DeferredToolOutcome",
    "ExecutePlanRequest",
    "InteractionMode",
    "PlanExecutionRequest",
    "PlanModeRunner",
    "PlanStatus",
    "PlanTaskStatus",
    "QuestionAnswer",
    "QuestionResolution",
    "ToolCallSuspended",
    "ToolInputRequested",
    "ToolInputRequired",
    "ToolTaskCancellation",
    "ToolTaskCanceller",
    "ToolTaskHandler",
    "ToolTaskHandlers",
    "ToolTaskPending",
    "ToolTaskPoll",
    "ToolTaskPollOutcome",
    "ToolTaskPoller",
    "ToolTaskRouter",
    "ToolTaskRunning",
    "ToolTaskSource",
    "ToolTaskStarted",
    "ask_user_input",
    "build_plan_note",
    "plan_revision_key",
    "start_tool_task",
    "started_tool_task",
    # long sessions: message storage, compaction, session settings
    "AGENT_MESSAGE_CHUNKS",
    "AGENT_MESSAGE_INDEX",
    "CONTEXT_SUMMARY",
    "SESSION_SETTINGS",
    "TURN_REPLY_SEQUENCE",
    "TURN_SESSION_SETTINGS",
    "MAX_MESSAGE_CHUNK_BYTES",
    "MAX_SESSION_SETTINGS_BYTES",
    "MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT",
    "MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT",
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    "DEFAULT_DECODED_VALUE_CACHE_BYTES",
    "set_decoded_value_cache_bytes",
    "AgentMessageChunk",
    "AgentMessageChunkRange",
    "AgentMessageIndex",
    "CompactContextInput",
    "CompactionPolicy",
    "ContextCompactionRunner",
    "ContextSummary",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "TurnReplySequence",
    "TurnSessionSettings",
    "UpdateSessionSettingsRequest",
    # OpenTelemetry GenAI tracing (issue 17)
    "AGENT_TRACE_CONTEXT",
    "ModelCallMetadata",
    "ModelRequestParameters",
    "ModelToolDescription",
    # the texts every compacting runner shows its model
    "CONTEXT_SUMMARY_HEADER",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "build_summary_prompt",
    "context_summary_text",
    "left_out_messages_note",
    # sessions at realistic sizes (issue 26): byte budgets and tool outputs stored apart
    "AGENT_TOOL_OUTPUTS",
    "DEFAULT_CONTEXT_WINDOW_BYTES",
    "DEFAULT_INLINE_TOOL_OUTPUT_BYTES",
    "DEFAULT_MESSAGE_WINDOW_MAX_BYTES",
    "MAX_CONTEXT_SUMMARY_BYTES",
    "MAX_RPC_OUTPUT_BYTES",
    "MAX_TOOL_OUTPUT_BYTES",
    "TOOL_OUTPUT_CUT_NOTE",
    "GetToolOutputRequest",
    "StoredToolOutput",
    "tool_output_key",
    "tool_output_view",
    # provider faults (issue 31): what a provider's error means for the turn
    "CONTEXT_WINDOW_EXCEEDED_ERROR",
    "MAX_PROVIDER_RETRY_AFTER_SECONDS",
    "ContextWindowExceeded",
    "UnfinishedModelResponse",
    "is_context_window_refusal",
    "provider_refusal",
    "provider_retry_after",
    # tool policies checked against the agent's tools (issue 32)
    "ToolNamesRunner",
    "UnknownToolPolicyError",
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
        "DEFAULT_INLINE_TOOL_OUTPUT_BYTES",
        "DEFAULT_MESSAGE_WINDOW_MAX_BYTES",
        "MAX_CONTEXT_SUMMARY_BYTES",
        "MAX_JSON_NESTING_DEPTH",
        "MAX_MESSAGE_CHUNK_BYTES",
        "MAX_NOTE_TEXT_BYTES",
        "MAX_PLAN_TASKS",
        "MAX_PLAN_TASK_BYTES",
        "MAX_QUESTION_BYTES",
        "MAX_QUESTION_CHOICES",
        "MAX_RPC_OUTPUT_BYTES",
        "MAX_SESSION_SETTINGS_BYTES",
        "MAX_STORED_VALUE_BYTES",
        "MAX_TOOL_OUTPUT_BYTES",
        "MAX_TURN_FAILURE_NOTE_BYTES",
        "MAX_USER_MESSAGE_BYTES",
        "MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT",
        "MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT",
        "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
        "TURN_FAILURE_NOTE_CUT_MARKER",
        "bounded_text",
        "nests_deeper_than",
        "unencodable_index",
        "utf8_size",
    ]
    assert limits.MAX_TURN_FAILURE_NOTE_BYTES == 64 * 1024
    assert limits.TURN_FAILURE_NOTE_CUT_MARKER == " [... cut by dex-agents]"


def test_a_client_process_imports_no_runner_framework_or_test_kit() -> None:
    code = (
        "import sys\n"
        "from dex_agents import AgentSessionClient, AgentSessionFlow\n"
        "flow = AgentSessionFlow.for_client(flow_type='OrderDesk')\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in "
        "('litellm', 'mcp', 'starlette', 'dex_devserver', 'pydantic_ai', 'agents', 'langgraph')"
        " or name.startswith('dex_agents.testing')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_the_release_is_the_installed_distributions_version() -> None:
    import importlib.metadata

    import dex_agents

    assert dex_agents.__version__ == importlib.metadata.version("dex-agents")
    assert "__version__" not in dex_agents.__all__
