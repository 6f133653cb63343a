"""`agent_codec_registry`: JSON that omits fields with defaults decodes; encoding matches the SDK's codec."""

import json
from dataclasses import asdict, is_dataclass, replace
from enum import Enum
from typing import Any, cast

import pytest
from dex import CodecRegistry, Registry, Value, WireKind

from dex_agents import (
    AgentEvent,
    AgentInterrupt,
    AgentInterruptResolution,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    AgentMessagesPage,
    AgentSessionFlow,
    AgentSessionStartInput,
    AgentSessionStatus,
    AgentSnapshot,
    AgentState,
    AgentToolCall,
    AgentUsage,
    AgentUserMessage,
    CancellationReason,
    CancelTurnRequest,
    CompactContextInput,
    DeleteQueuedMessageRequest,
    FrameworkMessage,
    GetToolOutputRequest,
    InterruptKind,
    ListAgentMessagesRequest,
    MessageRole,
    ResolveInterruptRequest,
    SteerUserMessageRequest,
    StoredToolOutput,
    ToolCallCancellation,
    ToolCallCompleted,
    ToolCallStatus,
    ToolEffect,
    TurnCancellationRequest,
    TurnControlKind,
    TurnControlRequest,
    TurnReplySequence,
    TurnSessionSettings,
    UpdateSessionSettingsRequest,
    agent_codec_registry,
)
from dex_agents._codecs import STEP_INPUT_UNIONS, wire_value_types
from dex_agents.session._state import json_size
from dex_agents.values import (
    AgentPlan,
    AgentPlanTask,
    AnswerQuestionRequest,
    ContextSummary,
    ExecutePlanRequest,
    InteractionMode,
    PendingUserMessage,
    PlanExecutionRequest,
    PlanStatus,
    PlanTaskStatus,
    QuestionAnswer,
    QuestionResolution,
)
from tests.test_unit_values import (
    INTERRUPT,
    MESSAGE,
    RECORD,
    STATE,
    _Runner,  # pyright: ignore[reportPrivateUsage]
)

AGENT_CODECS = agent_codec_registry()
SDK_CODECS = CodecRegistry()


def _decode(registry: CodecRegistry, type_hint: object, payload: object) -> Any:
    return registry.resolve(type_hint).decode(Value(WireKind.JSON, json.dumps(payload)))


# JSON as a writer that knows only the fields without defaults (or an older release's fields) sends it.
PARTIAL: list[tuple[object, object, object]] = [
    (AgentSessionStartInput, {"initial_message": "Refund order 7"}, AgentSessionStartInput("Refund order 7")),
    (AgentSessionStartInput, {}, AgentSessionStartInput()),
    (AgentUserMessage, {"text": "hello"}, AgentUserMessage("hello")),
    (
        ResolveInterruptRequest,
        {"interrupt_id": "call-1", "approved": True},
        ResolveInterruptRequest("call-1", approved=True),
    ),
    (ListAgentMessagesRequest, {}, ListAgentMessagesRequest()),
    (ListAgentMessagesRequest, {"limit": 5}, ListAgentMessagesRequest(limit=5)),
    (
        AgentState,
        {
            "status": "waiting_for_user_message",
            "turn_count": 0,
            "active_turn_id": None,
            "next_message_sequence": 1,
            "last_turn_error": None,
        },
        AgentState(AgentSessionStatus.WAITING_FOR_USER_MESSAGE, 0, None, 1, None),
    ),
    (
        AgentToolCall,
        {
            "tool_call_id": "call-1",
            "turn_id": "turn-3",
            "tool_name": "refund",
            "arguments": '{"order":7}',
            "effect": "non_idempotent_write",
            "requires_approval": True,
            "status": "awaiting_approval",
        },
        RECORD,
    ),
    (
        AgentEvent,
        {"type": "text_delta", "turn_id": "turn-1", "attempt": 1, "payload": "{}"},
        AgentEvent("text_delta", "turn-1", 1, "{}"),
    ),
    (AgentInterruptResolution, {"approved": False}, AgentInterruptResolution(approved=False)),
    (AgentMessagesPage, {}, AgentMessagesPage()),
    (AgentUsage, {"model_calls": 2}, AgentUsage(model_calls=2)),
    (SteerUserMessageRequest, {"text": "Stop"}, SteerUserMessageRequest(text="Stop")),
    (SteerUserMessageRequest, {"message_id": "m-1"}, SteerUserMessageRequest(message_id="m-1")),
    (CancelTurnRequest, {}, CancelTurnRequest()),
    (
        AgentToolCall,
        {**{"tool_call_id": "c", "turn_id": "turn-1", "tool_name": "t", "arguments": "{}"}}
        | {
            "effect": "read",
            "requires_approval": False,
            "status": "rejected",
            "cancellation_reason": "steered",
        },
        AgentToolCall(
            "c",
            "turn-1",
            "t",
            "{}",
            ToolEffect.READ,
            False,
            ToolCallStatus.REJECTED,
            cancellation_reason=CancellationReason.STEERED,
        ),
    ),
]


@pytest.mark.parametrize(("type_hint", "payload", "expected"), PARTIAL, ids=lambda item: str(item)[:40])
def test_partial_json_decodes_with_defaults(type_hint: object, payload: object, expected: object) -> None:
    decoded = _decode(AGENT_CODECS, type_hint, payload)
    assert decoded == expected
    assert type(decoded) is type(expected)


@pytest.mark.parametrize(
    ("type_hint", "payload", "expected"), PARTIAL[:4], ids=["start", "empty", "user", "resolve"]
)
def test_the_sdk_default_codec_refuses_the_same_json(
    type_hint: object, payload: object, expected: object
) -> None:
    # The reason agent_codec_registry exists: the SDK's automatic codec reads every field.
    with pytest.raises(KeyError):
        _decode(SDK_CODECS, type_hint, payload)


def test_nested_values_decode_with_defaults() -> None:
    record = {
        "tool_call_id": "call-1",
        "turn_id": "turn-3",
        "tool_name": "refund",
        "arguments": "{}",
        "effect": "read",
        "requires_approval": False,
        "status": "succeeded",
        "input_answers": [{"interrupt_id": "q-1", "question": "Why?", "answer": "Because"}],
    }
    interrupt = {
        "interrupt_id": "call-1",
        "kind": "tool_approval",
        "tool_call_id": "call-1",
        "tool_name": "refund",
        "arguments": "{}",
        "created_at": "2026-11-01T12:00:00.123Z",
        "deadline": None,
    }
    snapshot = _decode(
        AGENT_CODECS,
        AgentSnapshot,
        {
            "state": {
                "status": "running_tools",
                "turn_count": 2,
                "active_turn_id": "turn-3",
                "next_message_sequence": 9,
                "last_turn_error": None,
            },
            "messages": [],
            "pending_interrupts": [interrupt],
            "tool_calls": [record],
            "usage": {},
            "queued_message_count": 0,
            "queued_messages": [{"message_id": "m-1", "message": {"text": "next"}}],
        },
    )
    assert snapshot.state == AgentState(AgentSessionStatus.RUNNING_TOOLS, 2, "turn-3", 9, None)
    assert snapshot.state.interaction_mode is InteractionMode.CHAT
    assert snapshot.tool_calls[0].input_answers == (QuestionAnswer("q-1", "Why?", "Because"),)
    assert snapshot.tool_calls[0].tool_source_reference is None
    assert snapshot.pending_interrupts[0].choices == ()
    assert snapshot.usage == AgentUsage()
    assert snapshot.queued_messages == (PendingUserMessage("m-1", AgentUserMessage("next")),)
    assert snapshot.session_settings is None
    interrupts = _decode(AGENT_CODECS, list[AgentInterrupt], [interrupt])
    assert interrupts[0].allows_free_text is True


def test_unknown_keys_are_ignored_as_the_sdk_ignores_them() -> None:
    payload = {"text": "hello", "plan_mode": False, "from_the_future": {"x": 1}}
    assert _decode(AGENT_CODECS, AgentUserMessage, payload) == AgentUserMessage("hello")
    assert _decode(SDK_CODECS, AgentUserMessage, payload) == AgentUserMessage("hello")


def test_a_missing_field_without_a_default_names_the_type_and_the_field() -> None:
    with pytest.raises(TypeError, match=r"^AgentUserMessage requires field 'text'$"):
        _decode(AGENT_CODECS, AgentUserMessage, {"plan_mode": False})
    with pytest.raises(TypeError, match=r"^ResolveInterruptRequest requires field 'approved'$"):
        _decode(AGENT_CODECS, ResolveInterruptRequest, {"interrupt_id": "call-1"})
    with pytest.raises(TypeError, match=r"^AgentMessage requires field 'turn_id'$"):
        _decode(AGENT_CODECS, AgentMessagesPage, {"messages": [{"sequence": 1}]})
    with pytest.raises(TypeError, match=r"^AgentUserMessage requires a JSON object$"):
        _decode(AGENT_CODECS, AgentUserMessage, ["hello"])


def test_field_values_are_checked_as_the_sdk_checks_them() -> None:
    for registry in (AGENT_CODECS, SDK_CODECS):
        with pytest.raises(TypeError, match="expected str"):
            _decode(registry, AgentUserMessage, {"text": 7, "plan_mode": False})
        with pytest.raises(ValueError):
            _decode(registry, MessageRole, "narrator")


PLAN = AgentPlan(
    revision=2,
    status=PlanStatus.ACTIVE,
    tasks=(AgentPlanTask("Refund", PlanTaskStatus.PENDING),),
    updated_at="t",
)
SUMMARY = ContextSummary(generation=1, first_sequence=1, last_sequence=4, text="Earlier", created_at="t")
FULL_RECORD = AgentToolCall(
    tool_call_id="call-2",
    turn_id="turn-3",
    tool_name="ask",
    arguments="{}",
    effect=ToolEffect.READ,
    requires_approval=False,
    status=ToolCallStatus.SUCCEEDED,
    output="ok",
    tool_source_reference="mcp:1",
    input_answers=(QuestionAnswer("q-1", "Why?", "Because", QuestionResolution.ANSWERED),),
    input_choices=("a", "b"),
    task_poll_interval_seconds=5,
)
SAMPLES: dict[object, list[object]] = {
    AgentEvent: [AgentEvent("text_delta", None, 2, '{"text":"a"}', "RunModel-1")],
    AgentInterrupt: [
        INTERRUPT,
        AgentInterrupt("q-1", InterruptKind.QUESTION, "c", "t", "{}", "t", None, "Why?", ("a",)),
    ],
    AgentInterruptResolution: [AgentInterruptResolution(False, "no"), AgentInterruptResolution(True)],
    AgentMessage: [MESSAGE],
    AgentMessagesPage: [
        AgentMessagesPage((MESSAGE,), 3, None),
        AgentMessagesPage(),
        AgentMessagesPage((), None, 4, (1,)),
    ],
    AgentPlan: [PLAN],
    AgentPlanTask: [AgentPlanTask("Refund", PlanTaskStatus.COMPLETED)],
    AgentSessionStartInput: [
        AgentSessionStartInput(),
        AgentSessionStartInput("hi", {"tone": "terse", "n": [1, 2.5, None, True], "nested": {"é": "ü"}}),
    ],
    AgentSessionStatus: list(AgentSessionStatus),
    AgentSnapshot: [
        AgentSnapshot(
            state=STATE,
            messages=(MESSAGE,),
            pending_interrupts=(INTERRUPT,),
            tool_calls=(RECORD, FULL_RECORD),
            usage=AgentUsage(1, 10, 5, 2, 1),
            queued_message_count=1,
            plan=PLAN,
            queued_messages=(PendingUserMessage("m-1", AgentUserMessage("next")),),
            steered_messages=(PendingUserMessage("m-2", AgentUserMessage("now", plan_mode=True)),),
            context_summary=SUMMARY,
            session_settings={"b": 1, "a": "x"},
            next_before_sequence=4,
            missing_chunks=(1, 3),
            steered_message_count=1,
        ),
        AgentSnapshot(None, (), (), (), AgentUsage(), 0),
    ],
    AgentState: [
        STATE,
        AgentState(
            AgentSessionStatus.WAITING_FOR_USER_MESSAGE, 1, None, 3, None, InteractionMode.PLANNING, True
        ),
    ],
    AgentToolCall: [RECORD, FULL_RECORD],
    AgentUsage: [AgentUsage(), AgentUsage(1, 2, 3, 4, 5)],
    AgentUserMessage: [AgentUserMessage("hello"), AgentUserMessage("plan", plan_mode=True)],
    ContextSummary: [SUMMARY],
    FrameworkMessage: [FrameworkMessage(MessageRole.TOOL, "{}", "t", "c", "n", "{}", "o")],
    InteractionMode: list(InteractionMode),
    InterruptKind: list(InterruptKind),
    ListAgentMessagesRequest: [ListAgentMessagesRequest(), ListAgentMessagesRequest(9, 20, True)],
    GetToolOutputRequest: [GetToolOutputRequest("turn-2", "call-1")],
    StoredToolOutput: [StoredToolOutput("turn-2", "call-1", 9)],
    MessageRole: list(MessageRole),
    PendingUserMessage: [PendingUserMessage("m-1", AgentUserMessage("next"))],
    QuestionAnswer: [QuestionAnswer("q-1", "Why?", "No", QuestionResolution.DECLINED)],
    QuestionResolution: list(QuestionResolution),
    PlanStatus: list(PlanStatus),
    PlanTaskStatus: list(PlanTaskStatus),
    AnswerQuestionRequest: [AnswerQuestionRequest("call-1-input-1", "Berlin")],
    ExecutePlanRequest: [ExecutePlanRequest(3)],
    PlanExecutionRequest: [PlanExecutionRequest(3)],
    ResolveInterruptRequest: [
        ResolveInterruptRequest("call-1", False, "no"),
        ResolveInterruptRequest("c", True),
    ],
    ToolCallCompleted: [ToolCallCompleted("call-1")],
    CancellationReason: list(CancellationReason),
    TurnControlKind: list(TurnControlKind),
    SteerUserMessageRequest: [SteerUserMessageRequest(text="Stop"), SteerUserMessageRequest("m-1")],
    DeleteQueuedMessageRequest: [DeleteQueuedMessageRequest("m-1")],
    CancelTurnRequest: [CancelTurnRequest(), CancelTurnRequest("turn-2")],
    TurnControlRequest: [TurnControlRequest(TurnControlKind.STEER)],
    TurnCancellationRequest: [TurnCancellationRequest("turn-2", "2026-11-01T12:00:00.123Z")],
    ToolCallCancellation: [ToolCallCancellation(CancellationReason.TURN_CANCELLED)],
    ToolCallStatus: list(ToolCallStatus),
    ToolEffect: list(ToolEffect),
    list[AgentInterrupt]: [[], [INTERRUPT]],
    AgentMessageChunk: [AgentMessageChunk((MESSAGE,))],
    AgentMessageChunkRange: [AgentMessageChunkRange(1, 32), AgentMessageChunkRange(1, 32, 4096)],
    AgentMessageIndex: [
        AgentMessageIndex((AgentMessageChunkRange(1, 2), AgentMessageChunkRange(5, 5)), 1, 3),
        AgentMessageIndex((), 9, 9),
        AgentMessageIndex((AgentMessageChunkRange(1, 2, 900),), 1, 3, (StoredToolOutput("turn-1", "c", 2),)),
    ],
    TurnReplySequence: [TurnReplySequence("turn-2", 7)],
    CompactContextInput: [CompactContextInput(12)],
    TurnSessionSettings: [TurnSessionSettings("turn-2", {"model": "small", "n": [1, 2.5]})],
    UpdateSessionSettingsRequest: [
        UpdateSessionSettingsRequest({"model": "big"}),
        UpdateSessionSettingsRequest(),
    ],
    dict[str, object]: [{"model": "big", "nested": {"é": None}}],
}


def test_samples_cover_every_wire_type() -> None:
    assert set(SAMPLES) == set(wire_value_types())


@pytest.mark.parametrize("type_hint", list(SAMPLES), ids=str)
def test_encoding_is_byte_identical_to_the_sdk_codec(type_hint: object) -> None:
    ours = AGENT_CODECS.resolve(type_hint)
    sdks = SDK_CODECS.resolve(type_hint)
    assert (ours.type_name, ours.wire_kind) == (sdks.type_name, sdks.wire_kind)
    for sample in SAMPLES[type_hint]:
        encoded = ours.encode(sample)
        if type_hint == dict[str, object]:
            # The SDK's codec refuses to encode any dict[str, object]; its encoding would be this one.
            with pytest.raises(TypeError, match="requires"):
                sdks.encode(sample)
            assert encoded == Value(WireKind.JSON, json.dumps(sample, separators=(",", ":"), sort_keys=True))
        else:
            assert encoded == sdks.encode(sample)
        assert ours.decode(encoded) == sample == sdks.decode(encoded)


def test_json_size_is_the_size_of_the_asdict_json_it_replaced() -> None:
    # Message sizes count toward the stored-value and window limits, so the walk that replaced
    # `dataclasses.asdict` must measure every dataclass sample as before, non-ASCII text included.
    samples = [sample for values in SAMPLES.values() for sample in values if is_dataclass(sample)]
    samples.append(replace(MESSAGE, text="Réponse ✓", framework_item='{"é":1}'))
    assert len(samples) > 40
    for sample in samples:
        expected = json.dumps(asdict(cast(Any, sample)), separators=(",", ":"), sort_keys=True)
        assert json_size(sample) == len(expected.encode())


@pytest.mark.parametrize("type_hint", [AgentUserMessage, list[AgentInterrupt], ToolEffect], ids=str)
def test_encoding_refuses_the_wrong_type_as_the_sdk_codec_does(type_hint: object) -> None:
    for registry in (AGENT_CODECS, SDK_CODECS):
        with pytest.raises(TypeError):
            registry.resolve(type_hint).encode("not a value")


class _RecordingCodecs(CodecRegistry):
    def __init__(self) -> None:
        super().__init__()
        self.resolved: list[object] = []

    def resolve(self, type_hint: object) -> Any:
        self.resolved.append(type_hint)
        return AGENT_CODECS.resolve(type_hint)


def _json_coded(type_hint: object) -> bool:
    if isinstance(type_hint, type):
        return is_dataclass(type_hint) or issubclass(type_hint, Enum)
    return True  # parameterised containers


def test_every_json_type_of_the_flow_has_a_tolerant_codec() -> None:
    flow = AgentSessionFlow(_Runner(), flow_type="Codecs")
    recording = _RecordingCodecs()
    Registry([flow], codec_registry=recording, allow_async_handlers=True)  # resolves Step and RPC types
    schema = flow.get_persistence_schema()
    persisted = [
        definition.value_type for definition in (*schema.attributes, *schema.channels, *schema.streams)
    ]
    used = [hint for hint in (*recording.resolved, *persisted) if _json_coded(hint)]
    assert AgentSessionStartInput in used and list[AgentInterrupt] in used
    covered = {*wire_value_types(), *STEP_INPUT_UNIONS}
    assert [hint for hint in used if hint not in covered] == []
    for hint in covered:
        # Explicit registrations resolve to one codec object; derived ones are built anew on each call.
        assert AGENT_CODECS.resolve(hint) is AGENT_CODECS.resolve(hint)


def test_registries_with_the_codecs_accept_the_session_flow() -> None:
    registry = Registry(
        [AgentSessionFlow(_Runner(), flow_type="Codecs")],
        codec_registry=agent_codec_registry(),
        allow_async_handlers=True,
    )
    assert [flow.get_flow_type() for flow in registry.flows] == ["Codecs"]


def test_the_step_input_union_decodes_its_dataclass_and_the_sdk_has_no_codec_for_it() -> None:
    union = CompactContextInput | None
    codec = AGENT_CODECS.resolve(union)
    assert codec.decode(codec.encode(CompactContextInput(12))) == CompactContextInput(12)
    assert _decode(AGENT_CODECS, union, {"through_sequence": 3}) == CompactContextInput(3)
    with pytest.raises(TypeError, match="no codec"):
        SDK_CODECS.resolve(union)


def test_a_chunk_holds_consecutive_messages() -> None:
    with pytest.raises(ValueError, match=r"consecutive messages, got \[1, 3\]"):
        AgentMessageChunk((replace(MESSAGE, sequence=1), replace(MESSAGE, sequence=3)))
    with pytest.raises(ValueError, match="at least one message"):
        AgentMessageChunk(())
