"""Pure session rules: tool call ID validation, deadline rounding, recovery details, "did not run"."""

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from dex_agents import (
    AgentMessage,
    AgentSessionFlow,
    AgentToolCall,
    AgentTurnContext,
    AgentUsage,
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
    TurnCompleted,
    build_turn_failure_note,
)
from dex_agents.limits import MAX_STORED_VALUE_BYTES, MAX_TURN_FAILURE_NOTE_BYTES, bounded_text, utf8_size
from dex_agents.session._control import TurnControlState, may_abandon_waiting_call
from dex_agents.session._errors import describe_exception, plain_recovery_detail
from dex_agents.session._interrupts import whole_seconds
from dex_agents.session._state import format_time, parse_time, stored_size, to_agent_message
from dex_agents.session._tool_steps import _never_ran  # pyright: ignore[reportPrivateUsage]
from dex_agents.session._turn_lifecycle import storable_note
from dex_agents.session._turn_steps import _check_tool_calls  # pyright: ignore[reportPrivateUsage]
from dex_agents.testing import stored_calls_without_result

READ = ToolPolicy(ToolEffect.READ)


def request(*ids: str) -> ToolCallsRequested:
    return ToolCallsRequested(
        framework_run_state="state",
        tool_calls=[DeferredToolCall(tool_call_id, "lookup", "{}", READ) for tool_call_id in ids],
        usage=AgentUsage(1),
    )


def record(tool_call_id: str, effect: ToolEffect = ToolEffect.READ) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=tool_call_id,
        turn_id="turn-1",
        tool_name="lookup",
        arguments="{}",
        effect=effect,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
    )


def test_valid_tool_calls_pass() -> None:
    assert _check_tool_calls(request("a", "b"), []) is None


@pytest.mark.parametrize(
    ("ids", "earlier", "expected"),
    [
        (("",), (), "empty tool call ID"),
        (("a/b",), (), "contains '/'"),
        (("a", "a"), (), "reuses the tool call ID 'a'"),
        (("a",), ("a",), "reuses the tool call ID 'a'"),
    ],
)
def test_invalid_tool_call_ids_are_named(
    ids: tuple[str, ...], earlier: tuple[str, ...], expected: str
) -> None:
    problem = _check_tool_calls(request(*ids), [record(tool_call_id) for tool_call_id in earlier])
    assert problem is not None
    assert expected in problem
    assert "unique within a turn" in problem


def test_other_invalid_requests_are_named() -> None:
    empty_state = ToolCallsRequested("", [DeferredToolCall("a", "lookup", "{}", READ)])
    assert "framework_run_state" in (_check_tool_calls(empty_state, []) or "")
    no_calls = ToolCallsRequested("state", [])
    assert "at least one tool call" in (_check_tool_calls(no_calls, []) or "")
    incremental = ToolCallsRequested(
        "state",
        [DeferredToolCall("a", "lookup", "{}", READ)],
        new_messages=[FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}")],
    )
    assert "build_unfinished_turn_messages" in (_check_tool_calls(incremental, []) or "")
    assert _check_tool_calls(incremental, [], stores_incrementally=True) is None
    huge = ToolCallsRequested("x" * (2 * 1024 * 1024), [DeferredToolCall("a", "lookup", "{}", READ)])
    assert "framework run state is" in (_check_tool_calls(huge, []) or "")


def test_deadlines_round_up_to_whole_seconds() -> None:
    assert whole_seconds(timedelta(seconds=2)) == timedelta(seconds=2)
    assert whole_seconds(timedelta(seconds=2, milliseconds=1)) == timedelta(seconds=3)
    assert whole_seconds(timedelta(milliseconds=300)) == timedelta(seconds=1)


def test_times_are_utc_with_milliseconds_and_z() -> None:
    moment = parse_time("2026-11-01T12:00:00.123456+00:00")
    assert format_time(moment) == "2026-11-01T12:00:00.123Z"
    assert parse_time("2026-11-01T12:00:00.123Z") == parse_time("2026-11-01T12:00:00.123+00:00")


def test_exceptions_are_named_plainly() -> None:
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"
    assert describe_exception(KeyError("k")) == "KeyError: 'k'"
    assert describe_exception(RuntimeError()) == "RuntimeError"


def test_the_sdk_invalid_result_wrapper_is_removed() -> None:
    wrapped = "Flow Triage Step RunModel execute returned an invalid result: bad value"
    assert plain_recovery_detail(wrapped) == "bad value"
    assert plain_recovery_detail("heartbeat timeout") == "heartbeat timeout"


def test_no_worker_means_not_run_only_when_certain() -> None:
    no_worker = "NO_WORKER_AVAILABLE"
    assert _never_ran(record("a", ToolEffect.NON_IDEMPOTENT_WRITE), no_worker, single_attempt=True)
    assert _never_ran(record("a", ToolEffect.READ), no_worker, single_attempt=False)
    # An earlier attempt of a retried write may have run before the last one found no Worker.
    assert not _never_ran(record("a", ToolEffect.IDEMPOTENT_WRITE), no_worker, single_attempt=False)
    crashed = "builtins.RuntimeError"
    assert not _never_ran(record("a", ToolEffect.NON_IDEMPOTENT_WRITE), crashed, single_attempt=True)


def test_long_error_texts_are_cut_with_a_marker() -> None:
    assert bounded_text("short") == "short"
    cut = bounded_text("é" * 20_000, limit=1000)
    assert len(cut.encode()) <= 1000
    assert cut.endswith("[... cut by dex-agents]")


class _WordyRunner:
    """Puts the text into its framework item thirty times, as a verbose framework format might."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=json.dumps([text] * 30), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        return TurnCompleted(new_messages=[])

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("")


def test_a_note_the_runner_stores_verbosely_is_shortened_until_it_can_be_stored() -> None:
    flow = AgentSessionFlow(_WordyRunner(), flow_type="T")
    big = replace(record("read-1"), status=ToolCallStatus.SUCCEEDED, output="x" * 600_000)
    write = replace(record("write-1"), status=ToolCallStatus.SUCCEEDED, output="sent", deferral_order=1)

    note = storable_note(
        flow.runner, lambda budget: build_turn_failure_note([big, write], max_bytes=budget), 7, "turn-3"
    )

    # 64 KiB of note thirty-one times over is too large to store; a quarter of it is not.
    assert note.text is not None and utf8_size(note.text) <= MAX_TURN_FAILURE_NOTE_BYTES // 4
    assert note.text.split("\n")[2] == "- lookup {} -> succeeded: sent"
    stored = to_agent_message(note, 7, "turn-3", "2026-11-29T00:00:00.000Z")
    assert stored_size(stored) <= MAX_STORED_VALUE_BYTES


@pytest.mark.parametrize(
    ("status", "task_id", "abandonable"),
    [
        (ToolCallStatus.AWAITING_APPROVAL, None, True),
        (ToolCallStatus.AWAITING_ANSWER, None, True),
        (ToolCallStatus.WAITING_FOR_TIMER, None, True),
        # Remote work started: steering and cancellation wait for its result.
        (ToolCallStatus.AWAITING_ANSWER, "task-1", False),
        (ToolCallStatus.WAITING_FOR_TASK, "task-1", False),
        # An approved call belongs to its tool Step, which checks the flags before it starts the tool.
        (ToolCallStatus.APPROVED, None, False),
        (ToolCallStatus.SUCCEEDED, None, False),
    ],
)
def test_steering_abandons_only_calls_that_took_no_effect(
    status: ToolCallStatus, task_id: str | None, abandonable: bool
) -> None:
    waiting = replace(record("a"), status=status, task_id=task_id)
    assert may_abandon_waiting_call(waiting) is abandonable


def test_cancellation_wins_over_steering() -> None:
    assert (
        TurnControlState(is_cancelled=True, steered_message_count=2).reason
        is CancellationReason.TURN_CANCELLED
    )
    assert TurnControlState(is_cancelled=False, steered_message_count=1).reason is CancellationReason.STEERED
    assert TurnControlState(is_cancelled=False, steered_message_count=0).reason is None


def test_a_transcript_with_a_call_but_no_result_is_found() -> None:
    def message(
        sequence: int, role: MessageRole, tool_call_id: str | None, turn_id: str = "turn-1"
    ) -> AgentMessage:
        return AgentMessage(sequence, turn_id, role, None, tool_call_id, None, None, None, "{}", "")

    complete = [
        message(1, MessageRole.USER, None),
        message(2, MessageRole.ASSISTANT, "a"),
        message(3, MessageRole.TOOL, "a"),
        message(4, MessageRole.ASSISTANT, "a", "turn-2"),  # an ID reused by a later turn is another call
    ]
    assert stored_calls_without_result(complete[:3]) == []
    assert stored_calls_without_result(complete) == ["a"]
