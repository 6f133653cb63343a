"""Value codecs: every wire type round-trips through the SDK's default codec registry as snake_case JSON."""

import json
from datetime import timedelta

import pytest
from dex import CodecRegistry, FlowDefinitionError, Registry

from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessagesPage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionStartInput,
    AgentSessionStatus,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    DeferredToolExecution,
    FrameworkMessage,
    InterruptKind,
    ListAgentMessagesRequest,
    MessageRole,
    ResolveInterruptRequest,
    ToolCallCompleted,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    agent_codec_registry,
    message_sequence_key,
)
from dex_agents.runner import AgentTurnContext

CODECS = CodecRegistry()

STATE = AgentState(
    status=AgentSessionStatus.RUNNING_TOOLS,
    turn_count=2,
    active_turn_id="turn-3",
    next_message_sequence=9,
    last_turn_error="RuntimeError: boom",
)
MESSAGE = AgentMessage(
    sequence=1,
    turn_id="turn-1",
    role=MessageRole.ASSISTANT,
    text="Hello",
    tool_call_id=None,
    tool_name=None,
    tool_arguments=None,
    tool_output=None,
    framework_item='{"kind":"text"}',
    created_at="2026-11-01T12:00:00.123Z",
)
RECORD = AgentToolCall(
    tool_call_id="call-1",
    turn_id="turn-3",
    tool_name="refund",
    arguments='{"order":7}',
    effect=ToolEffect.NON_IDEMPOTENT_WRITE,
    requires_approval=True,
    status=ToolCallStatus.AWAITING_APPROVAL,
    deferral_order=0,
)
INTERRUPT = AgentInterrupt(
    interrupt_id="call-1",
    kind=InterruptKind.TOOL_APPROVAL,
    tool_call_id="call-1",
    tool_name="refund",
    arguments='{"order":7}',
    created_at="2026-11-01T12:00:00.123Z",
    deadline="2026-11-01T12:05:00.123Z",
)
VALUES: list[object] = [
    AgentSessionStartInput(initial_message="hi"),
    AgentSessionStartInput(),
    STATE,
    MESSAGE,
    RECORD,
    INTERRUPT,
    AgentInterruptResolution(approved=False, rejection_message="no"),
    ToolCallCompleted("call-1"),
    AgentUserMessage("hello"),
    AgentUsage(1, 10, 5, 2, 1),
    AgentEvent(
        type="text_delta", turn_id="turn-1", attempt=2, payload='{"text":"a"}', step_execution_id="RunModel-1"
    ),
    ResolveInterruptRequest("call-1", approved=True),
    ListAgentMessagesRequest(),
    AgentMessagesPage(messages=(MESSAGE,), next_before_sequence=None),
    AgentSnapshot(
        state=STATE,
        messages=(MESSAGE,),
        pending_interrupts=(INTERRUPT,),
        tool_calls=(RECORD,),
        usage=AgentUsage(1, 10, 5, 0, 0),
        queued_message_count=1,
    ),
    AgentSnapshot(
        state=None,
        messages=(),
        pending_interrupts=(),
        tool_calls=(),
        usage=AgentUsage(),
        queued_message_count=0,
    ),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda value: type(value).__name__)
def test_round_trip_through_the_default_codec_registry(value: object) -> None:
    codec = CODECS.resolve(type(value))
    decoded = codec.decode(codec.encode(value))
    assert decoded == value
    assert type(decoded) is type(value)


def test_enums_travel_as_plain_strings_with_snake_case_keys() -> None:
    payload = json.loads(str(CODECS.resolve(AgentToolCall).encode(RECORD).data))
    assert payload["effect"] == "non_idempotent_write"
    assert payload["status"] == "awaiting_approval"
    assert payload["deferral_order"] == 0
    assert payload["input_answers"] == []
    assert payload["input_allows_free_text"] is True


def test_decoded_snapshot_is_fully_typed() -> None:
    codec = CODECS.resolve(AgentSnapshot)
    decoded = codec.decode(codec.encode(VALUES[-2]))
    assert isinstance(decoded.state, AgentState)
    assert decoded.state.status is AgentSessionStatus.RUNNING_TOOLS
    assert isinstance(decoded.tool_calls[0], AgentToolCall)
    assert decoded.tool_calls[0].status is ToolCallStatus.AWAITING_APPROVAL
    assert decoded.pending_interrupts[0].kind is InterruptKind.TOOL_APPROVAL


def test_pending_interrupts_list_round_trips() -> None:
    codec = CODECS.resolve(list[AgentInterrupt])
    assert codec.decode(codec.encode([INTERRUPT])) == [INTERRUPT]


def test_message_sequence_key() -> None:
    assert message_sequence_key(1) == "000000000001"
    assert message_sequence_key(123456789012) == "123456789012"
    assert sorted(message_sequence_key(n) for n in (10, 9, 100)) == [
        message_sequence_key(n) for n in (9, 10, 100)
    ]
    for bad in (0, -1, 10**12):
        with pytest.raises(ValueError):
            message_sequence_key(bad)


def test_final_statuses() -> None:
    final = {status for status in ToolCallStatus if status.is_final}
    assert final == {
        ToolCallStatus.REJECTED,
        ToolCallStatus.SUCCEEDED,
        ToolCallStatus.FAILED,
        ToolCallStatus.OUTCOME_UNKNOWN,
    }


class _Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        return TurnCompleted(new_messages=[])

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("")


def test_flow_registers_with_the_session_codecs_only() -> None:
    flows = [
        AgentSessionFlow(_Runner(), flow_type="Triage"),
        AgentSessionFlow(
            _Runner(),
            flow_type="Refunds",
            options=AgentSessionOptions(
                tool_policies={"lookup": ToolPolicy(ToolEffect.READ)},
                agent_events_capacity_bytes=1024,
                interrupt_deadline=timedelta(minutes=5),
            ),
        ),
    ]
    # The Steps' CompactContextInput | None input needs the session's codecs; the SDK derives none for it.
    with pytest.raises(FlowDefinitionError, match=r"no codec for .*CompactContextInput \| None"):
        Registry(flows, allow_async_handlers=True)
    registry = Registry(flows, codec_registry=agent_codec_registry(), allow_async_handlers=True)
    assert [flow.get_flow_type() for flow in registry.flows] == ["Triage", "Refunds"]
    assert flows[0].agent_events is not flows[1].agent_events
    assert flows[1].agent_events.name == "AgentEvents"
    assert flows[1].agent_events.stream_capacity_bytes == 1024
    steps = [definition.step.get_step_type() for definition in flows[0].get_steps()]
    assert steps == [
        "StartAgentSession",
        "AwaitUserMessage",
        "RunModel",
        "CompactContext",
        "AwaitToolApproval",
        "AwaitQuestionAnswer",
        "AwaitTimer",
        "CallTool",
        "CallSingleAttemptTool",
        "RecordToolFailure",
        "RecordToolOutcomeUnknown",
        "PollToolTask",
        "CancelToolTask",
        "ResumeTurn",
        "RecordTurnFailure",
        "ApplyTurnControl",
        "FinishTurnCancellation",
    ]


def test_bad_options_are_refused_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="interrupt_deadline"):
        AgentSessionOptions(interrupt_deadline=timedelta(0))
    with pytest.raises(ValueError, match="capacity"):
        AgentSessionOptions(agent_events_capacity_bytes=0)
    with pytest.raises(ValueError, match="flow_type"):
        AgentSessionFlow(_Runner(), flow_type="")
