"""Step options: the SDK replaces a Step's options with a movement's, so movements carry the full set."""

from datetime import timedelta

from dex import RetryPolicy, StepDurability, StepOptions

from dex_agents import (
    AGENT_MESSAGES,
    AGENT_TOOL_CALLS,
    INTERRUPT_RESOLUTIONS,
    PENDING_INTERRUPTS,
    PENDING_PLAN_EXECUTION,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    AgentSessionFlow,
    AgentToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    TurnCompleted,
)
from dex_agents.runner import AgentTurnContext
from dex_agents.session._control import FinishTurnCancellation
from dex_agents.session._deps import SessionDeps
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._step_options import STEP_RULES, failure_route_of
from dex_agents.session._tool_steps import (
    AwaitToolApproval,
    CallSingleAttemptTool,
    CallTool,
    RecordToolFailure,
    RecordToolOutcomeUnknown,
)
from dex_agents.session._transitions import SessionTransitions, build_session_steps
from dex_agents.session._turn_steps import RecordTurnFailure


class _Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        return TurnCompleted(new_messages=[])

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult("")


def runtime() -> SessionTransitions:
    flow = AgentSessionFlow(_Runner(), flow_type="T")
    deps = SessionDeps.of(flow.runner, AgentSessionOptions(), flow.agent_events, flow.flow_type)
    return build_session_steps(deps).moves


def record(effect: ToolEffect, status: ToolCallStatus = ToolCallStatus.APPROVED) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id="call-7",
        turn_id="turn-1",
        tool_name="t",
        arguments="{}",
        effect=effect,
        requires_approval=False,
        status=status,
    )


def assert_sync(options: StepOptions) -> None:
    assert options.wait_for_durability is StepDurability.SYNC
    assert options.execute_durability is StepDurability.SYNC


def failure_route(options: StepOptions) -> tuple[object, StepOptions]:
    target = options._execute_failure_target  # pyright: ignore[reportPrivateUsage]
    route_options = options._execute_failure_options  # pyright: ignore[reportPrivateUsage]
    assert route_options is not None
    return target, route_options


def test_run_model_movement_has_timeouts_retries_loads_and_failure_route() -> None:
    options = runtime().options_of("RunModel")
    assert_sync(options)
    assert options.execute_method_timeout == timedelta(minutes=15)
    assert options.heartbeat_timeout == timedelta(minutes=2)
    assert options.execute_retry == RetryPolicy(maximum_attempts=3, total_duration=timedelta(minutes=30))
    assert set(options.execute_load_attribute_maps) == {AGENT_MESSAGES, AGENT_TOOL_CALLS}
    assert options.execute_load_channels == (STEERED_USER_MESSAGES,)
    # A model call takes no lock, so cancel_turn never waits for one.
    assert options.execute_lock_attributes == () and options.wait_for_lock_attributes == ()
    target, route = failure_route(options)
    assert target is RecordTurnFailure
    assert_sync(route)
    assert set(route.execute_load_attribute_maps) == {AGENT_MESSAGES, AGENT_TOOL_CALLS}
    assert route.execute_lock_attributes == ()


def test_read_and_idempotent_tools_retry_three_times_and_load_only_their_record() -> None:
    for effect in (ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE):
        movement = runtime().to_first_step_of(record(effect))
        assert movement.step is CallTool
        assert movement.input == "call-7"
        options = movement.options
        assert options is not None
        assert_sync(options)
        assert options.execute_retry == RetryPolicy(maximum_attempts=3)
        assert options.execute_method_timeout == timedelta(hours=2)
        assert options.execute_load_attribute_maps == ()
        assert [load.physical_name for load in options.execute_load_attribute_map_instances] == [
            AGENT_TOOL_CALLS.load("call-7").physical_name
        ]
        assert options.execute_load_channels == (STEERED_USER_MESSAGES,)
        assert options.execute_lock_attributes == ()
        target, route = failure_route(options)
        assert target is RecordToolFailure
        assert_sync(route)
        assert [load.physical_name for load in route.execute_load_attribute_map_instances] == [
            AGENT_TOOL_CALLS.load("call-7").physical_name
        ]


def test_single_attempt_tools_run_once_and_route_to_outcome_unknown() -> None:
    for effect in (ToolEffect.NON_IDEMPOTENT_WRITE, ToolEffect.UNCLASSIFIED):
        movement = runtime().to_first_step_of(record(effect))
        assert movement.step is CallSingleAttemptTool
        options = movement.options
        assert options is not None
        assert_sync(options)
        assert options.execute_retry == RetryPolicy(maximum_attempts=1)
        assert options.execute_method_timeout == timedelta(hours=2)
        target, route = failure_route(options)
        assert target is RecordToolOutcomeUnknown
        assert_sync(route)


def test_approval_locks_interrupts_and_loads_only_its_record() -> None:
    movement = runtime().to_first_step_of(record(ToolEffect.UNCLASSIFIED, ToolCallStatus.AWAITING_APPROVAL))
    assert movement.step is AwaitToolApproval
    options = movement.options
    assert options is not None
    assert_sync(options)
    assert [lock.attribute for lock in options.execute_lock_attributes] == [PENDING_INTERRUPTS]
    assert [load.physical_name for load in options.execute_load_attribute_map_instances] == [
        AGENT_TOOL_CALLS.load("call-7").physical_name
    ]
    assert options.execute_load_channels == (STEERED_USER_MESSAGES,)
    assert [load.physical_name for load in options.execute_load_channel_map_instances] == [
        INTERRUPT_RESOLUTIONS.load_messages("call-7").physical_name
    ]


def test_only_short_steps_take_the_cancellation_and_interrupt_locks() -> None:
    session = runtime()
    waiting = session.to_await_user_message().options
    assert waiting is not None
    assert [lock.attribute for lock in waiting.execute_lock_attributes] == [
        TURN_CANCELLATION_REQUEST,
        PENDING_PLAN_EXECUTION,
    ]
    apply = session.options_of("ApplyTurnControl")
    assert_sync(apply)
    assert [lock.attribute for lock in apply.execute_lock_attributes] == [TURN_CANCELLATION_REQUEST]
    assert set(apply.execute_load_attribute_maps) == {AGENT_MESSAGES, AGENT_TOOL_CALLS}
    finish = session.to_finish_turn_cancellation("turn-3")
    assert (finish.step, finish.input) == (FinishTurnCancellation, "turn-3")
    assert finish.options is not None
    assert_sync(finish.options)
    assert {lock.attribute for lock in finish.options.execute_lock_attributes} == {
        TURN_CANCELLATION_REQUEST,
        PENDING_INTERRUPTS,
    }
    assert finish.options.execute_load_channel_maps == (INTERRUPT_RESOLUTIONS,)
    resume = session.to_resume_turn(2)
    assert resume.options is not None
    assert [lock.attribute for lock in resume.options.execute_lock_attributes] == [PENDING_INTERRUPTS]
    assert resume.options.execute_load_channels == (STEERED_USER_MESSAGES,)


def test_every_step_declares_sync_durability_itself() -> None:
    flow = AgentSessionFlow(_Runner(), flow_type="T")
    for definition in flow.get_steps():
        options = definition.step.get_step_options()
        assert options is not None, definition.step.get_step_type()
        assert_sync(options)


def test_the_table_has_a_rule_for_every_step_and_the_designs_timeouts_and_retries() -> None:
    flow = AgentSessionFlow(_Runner(), flow_type="T")
    assert {definition.step.get_step_type() for definition in flow.get_steps()} == set(STEP_RULES)
    design = {
        # Step type: (execute timeout, heartbeat timeout, attempts, retry window, failure route)
        "RunModel": (
            timedelta(minutes=15),
            timedelta(minutes=2),
            3,
            timedelta(minutes=30),
            "RecordTurnFailure",
        ),
        "CompactContext": (
            timedelta(minutes=15),
            timedelta(minutes=2),
            3,
            timedelta(minutes=30),
            "RecordTurnFailure",
        ),
        "CallTool": (timedelta(hours=2), None, 3, None, "RecordToolFailure"),
        "CallSingleAttemptTool": (timedelta(hours=2), None, 1, None, "RecordToolOutcomeUnknown"),
        "PollToolTask": (timedelta(minutes=10), None, 3, None, "RecordToolFailure"),
        "CancelToolTask": (timedelta(seconds=30), None, 3, timedelta(minutes=2), "RecordToolOutcomeUnknown"),
    }
    for step_type, rule in STEP_RULES.items():
        expected = design.get(step_type, (None, None, None, None, None))
        attempts = None if rule.retry is None else rule.retry.maximum_attempts
        window = None if rule.retry is None else rule.retry.total_duration
        found = (rule.execute_timeout, rule.heartbeat_timeout, attempts, window, failure_route_of(step_type))
        assert found == expected, step_type
    # A started task of a write that may have taken effect ends outcome_unknown when its polls run out.
    assert failure_route_of("PollToolTask", ToolEffect.NON_IDEMPOTENT_WRITE) == "RecordToolOutcomeUnknown"
    assert failure_route_of("PollToolTask", ToolEffect.IDEMPOTENT_WRITE) == "RecordToolFailure"
