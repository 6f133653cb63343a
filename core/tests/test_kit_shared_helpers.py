"""The adapters' shared test helpers: the in-process session side and reading events back."""

import json

from dex_agents import (
    AgentEvent,
    AgentEventType,
    AgentTurnContext,
    AgentTurnOutcome,
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
from dex_agents.testing import SessionSide, recorded_usage, text_by_model_step, text_chunks


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
