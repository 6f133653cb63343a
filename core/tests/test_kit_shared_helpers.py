"""The adapters' shared test helpers: the in-process session side and reading events back."""

import json
from pathlib import Path

import pytest

from dex_agents import (
    STEERED_REJECTION_MESSAGE,
    AgentEvent,
    AgentEventType,
    AgentTurnContext,
    AgentTurnOutcome,
    CancellationReason,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    current_tool_execution,
)
from dex_agents.testing import (
    ScriptedResponse,
    ScriptedRunner,
    ScriptedToolCall,
    ScriptStore,
    SessionSide,
    matrix_session_options,
    recorded_usage,
    render_message,
    stored_calls_without_result,
    text_by_model_step,
    text_chunks,
)


class TwoCallRunner:
    """Defers one call per model step, streams a word, and answers a call with its idempotency key."""

    def __init__(self) -> None:
        self.deferred = 0

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=json.dumps(text), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        self.deferred += 1
        turn.events.write_event(AgentEventType.REASONING_DELTA, {"text": f"thinking {self.deferred}"})
        turn.events.write_event(AgentEventType.TEXT_DELTA, {"text": f"step {self.deferred}"})
        call_id = f"call-{self.deferred}"
        return ToolCallsRequested(
            framework_run_state=f"state-{self.deferred}",
            tool_calls=[
                DeferredToolCall(
                    call_id,
                    "refund",
                    "{}",
                    turn.resolve_tool_policy("refund", None),
                    tool_source_reference=f"source-{call_id}",
                )
            ],
        )

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        current = current_tool_execution()
        assert current is call, "the tool Step makes its call current around the runner"
        return ToolExecutionResult(output=call.idempotency_key)


async def test_session_side_keeps_records_in_model_order_and_runs_them_as_a_tool_step() -> None:
    runner = TwoCallRunner()
    session = SessionSide(tool_policies={"refund": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)})
    session.start_turn(runner.build_user_message("refund it"))
    for _ in range(2):
        outcome = await runner.run_model_step(session.context())
        assert isinstance(outcome, ToolCallsRequested)
        session.defer(outcome)

    assert session.turn_id == "turn-1" and session.framework_run_state == "state-2"
    assert [(record.deferral_order, record.status) for record in session.records.values()] == [
        (0, ToolCallStatus.AWAITING_APPROVAL),
        (1, ToolCallStatus.AWAITING_APPROVAL),
    ]
    assert session.records["call-2"].tool_source_reference == "source-call-2"
    assert session.text_deltas() == ["step 1", "step 2"]
    assert session.reasoning_deltas() == ["thinking 1", "thinking 2"]
    session.finish("call-1", ToolCallStatus.APPROVED)
    assert await session.execute(runner, "call-1") == "session-1/turn-1/call-1"


async def test_session_side_uses_the_default_effect_and_starts_each_turn_afresh() -> None:
    runner = TwoCallRunner()
    session = SessionSide(default_tool_effect=ToolEffect.READ)
    session.start_turn(runner.build_user_message("one"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)
    assert session.records["call-1"].status is ToolCallStatus.APPROVED

    session.start_turn(runner.build_user_message("two"))
    assert session.turn_id == "turn-2" and session.records == {} and session.framework_run_state is None
    assert [(message.sequence, message.turn_id) for message in session.messages] == [
        (1, "turn-1"),
        (2, "turn-2"),
    ]


@pytest.mark.parametrize("stores_incrementally", [False, True])
async def test_session_side_ends_a_turn_early_with_a_result_for_every_call(
    tmp_path: Path, stores_incrementally: bool
) -> None:
    calls = (
        ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1"),
        ScriptedToolCall("refund_order", {"order_id": "A-1"}, "refund-1"),
    )
    store = ScriptStore(tmp_path, [[ScriptedResponse(text="Checking.", tool_calls=calls)]])
    runner = ScriptedRunner(store=store, stores_incrementally=stores_incrementally)
    session = SessionSide(tool_policies=matrix_session_options().tool_policies)
    session.start_turn(runner.build_user_message("Refund A-1 if it shipped"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)
    requests = [
        "assistant: Checking.",
        'assistant calls lookup_order {"order_id":"A-1"} [read-1]',
        'assistant calls refund_order {"order_id":"A-1"} [refund-1]',
    ]
    assert [render_message(message) for message in session.messages[1:]] == (
        requests if stores_incrementally else []
    )
    session.finish("read-1", ToolCallStatus.SUCCEEDED, output="shipped")
    session.abandon("refund-1", CancellationReason.STEERED)

    items = await session.end_turn_early(runner)
    results = [
        "tool lookup_order [read-1]: shipped",
        f"tool refund_order [refund-1]: {STEERED_REJECTION_MESSAGE}",
    ]
    assert [render_message(item) for item in items] == (
        results if stores_incrementally else requests + results
    )
    assert [render_message(message) for message in session.messages[1:]] == requests + results
    assert stored_calls_without_result(session.messages) == []


def event(event_type: str, step: str, payload: dict[str, object], attempt: int = 1) -> AgentEvent:
    return AgentEvent(event_type, "turn-1", attempt, json.dumps(payload), step)


def test_text_is_joined_per_model_step_in_arrival_order_and_usage_is_read_per_event() -> None:
    events = [
        event(AgentEventType.TEXT_DELTA, "RunModel-1", {"text": "Let me "}),
        event(AgentEventType.USAGE_RECORDED, "RunModel-1", {"recorded": {"model_calls": 1}}),
        event(AgentEventType.TEXT_DELTA, "RunModel-2", {"text": "Done"}),
        event(AgentEventType.TEXT_DELTA, "RunModel-1", {"text": "check."}),
        event(AgentEventType.USAGE_RECORDED, "RunModel-2", {"recorded": {"model_calls": 2}}),
    ]
    assert text_by_model_step(events) == {"RunModel-1": "Let me check.", "RunModel-2": "Done"}
    assert recorded_usage(events) == [{"model_calls": 1}, {"model_calls": 2}]


def test_text_chunks_add_up_to_the_text_word_by_word() -> None:
    assert text_chunks("Order A-17 has  shipped.\n") == ["Order ", "A-17 ", "has  ", "shipped.\n"]
    assert text_chunks("  leading space") == ["  ", "leading ", "space"]
    assert text_chunks("") == []
    text = " Refunded 40 EUR\tfor order A-17. "
    assert "".join(text_chunks(text)) == text
