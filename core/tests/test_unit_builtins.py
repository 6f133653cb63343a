"""Pure rules of built-in tools, plans, tool questions and tool tasks, without a server."""

from dataclasses import replace
from datetime import timedelta

import pytest

from dex_agents import (
    ASK_USER,
    BUILT_IN_TOOL_DEFINITIONS,
    BUILT_IN_TOOL_NAMES,
    DURABLE_WAIT,
    WRITE_TODOS,
    AgentPlan,
    AgentPlanTask,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentToolCall,
    AgentTurnContext,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    PlanStatus,
    PlanTaskStatus,
    QuestionAnswer,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    TurnCompleted,
    ask_user_input,
    build_plan_note,
    start_tool_task,
    started_tool_task,
)
from dex_agents._plans import replaced_plan, write_todos_result
from dex_agents._tools._builtins import (
    BuiltInArgumentError,
    parse_ask_user_arguments,
    parse_durable_wait_arguments,
    parse_write_todos_arguments,
)
from dex_agents.events import AgentEventWriter
from dex_agents.session._tasks import poll_interval_seconds
from dex_agents.testing import SessionSide


class _Runner:
    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=text, text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> TurnCompleted:
        return TurnCompleted(new_messages=[])

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        return ToolExecutionResult("")


class _PlanningRunner(_Runner):
    supports_plan_mode = True


def test_every_built_in_has_a_json_schema_definition() -> None:
    assert BUILT_IN_TOOL_NAMES == (ASK_USER, DURABLE_WAIT, WRITE_TODOS)
    for name in BUILT_IN_TOOL_NAMES:
        definition = BUILT_IN_TOOL_DEFINITIONS[name]
        schema = definition.parameters_json_schema
        assert definition.name == name and definition.description
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
    todo = BUILT_IN_TOOL_DEFINITIONS[WRITE_TODOS].parameters_json_schema["properties"]["todos"]["items"]
    assert todo["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    # Each read is a fresh copy, so a runner that edits its schema cannot change another's.
    BUILT_IN_TOOL_DEFINITIONS[ASK_USER].parameters_json_schema["properties"].clear()
    assert BUILT_IN_TOOL_DEFINITIONS[ASK_USER].parameters_json_schema["properties"]


def test_ask_user_arguments_are_checked() -> None:
    parsed = parse_ask_user_arguments('{"question":"Which?","choices":["a","b"],"allows_free_text":false}')
    assert (parsed.question, parsed.choices, parsed.allows_free_text) == ("Which?", ("a", "b"), False)
    assert (
        parse_ask_user_arguments('{"question":"Why?","choices":null,"allows_free_text":null}').choices == ()
    )
    for arguments, reason in (
        ("{}", "question is required"),
        ('{"question":"  "}', "a question must not be blank"),
        ('{"question":"q","choices":"a"}', "choices must be a list of texts"),
        ('{"question":"q","choices":["a","a"]}', "the choice 'a' appears twice"),
        ('{"question":"q","zeta":1,"beta":2}', "unknown argument 'beta'"),
        ('{"question":NaN}', "arguments must be a JSON object"),
        ("[1]", "arguments must be a JSON object"),
    ):
        with pytest.raises(BuiltInArgumentError, match=f"^invalid ask_user arguments: .*{reason}"):
            parse_ask_user_arguments(arguments)


def test_durable_wait_arguments_round_up_and_respect_the_longest_wait() -> None:
    longest = timedelta(minutes=1)
    assert parse_durable_wait_arguments('{"seconds":1.2,"reason":"r"}', longest).seconds == 2
    assert parse_durable_wait_arguments('{"seconds":60,"reason":""}', longest).seconds == 60
    for arguments, reason in (
        ('{"seconds":61,"reason":"r"}', "seconds must be at most 60, got 61"),
        ('{"seconds":0,"reason":"r"}', "seconds must be positive"),
        ('{"seconds":true,"reason":"r"}', "seconds must be a number"),
        ('{"seconds":5}', "reason is required"),
    ):
        with pytest.raises(BuiltInArgumentError, match=f"^invalid durable_wait arguments: {reason}"):
            parse_durable_wait_arguments(arguments, longest)


def test_write_todos_arguments_become_tasks() -> None:
    tasks = parse_write_todos_arguments('{"todos":[{"content":"Refund","status":"in_progress"}]}')
    assert tasks == (AgentPlanTask("Refund", PlanTaskStatus.IN_PROGRESS),)
    assert parse_write_todos_arguments('{"todos":[]}') == ()
    for arguments, reason in (
        ('{"todos":{}}', "todos must be a list of tasks"),
        ('{"todos":[{"content":"","status":"pending"}]}', "task 1 needs non-blank content"),
        (
            '{"todos":[{"content":"x","status":"pending","owner":"me"}]}',
            "task 1 has the unknown field 'owner'",
        ),
    ):
        with pytest.raises(BuiltInArgumentError, match=f"^invalid todos: {reason}"):
            parse_write_todos_arguments(arguments)


def test_a_written_plan_gets_the_next_revision_and_its_status() -> None:
    pending, done = AgentPlanTask("a", PlanTaskStatus.PENDING), AgentPlanTask("b", PlanTaskStatus.COMPLETED)
    first = replaced_plan(None, [pending], planning=True, updated_at="t")
    assert (first.revision, first.status) == (1, PlanStatus.DRAFT)
    assert replaced_plan(first, [pending, done], planning=False, updated_at="t").status is PlanStatus.ACTIVE
    assert replaced_plan(first, [done], planning=False, updated_at="t").status is PlanStatus.COMPLETED
    cleared = replaced_plan(first, [], planning=True, updated_at="t")
    assert (cleared.revision, cleared.status) == (2, PlanStatus.CLEARED)
    assert write_todos_result(first) == '{"status":"updated","revision":1,"task_count":1}'
    assert write_todos_result(cleared) == '{"status":"cleared","revision":2}'


def test_the_plan_note_shows_the_plan_and_in_a_planning_turn_says_so() -> None:
    plan = AgentPlan(2, PlanStatus.DRAFT, (AgentPlanTask("Look up A-1", PlanTaskStatus.COMPLETED),), "t")
    assert build_plan_note(plan, InteractionMode.CHAT) == (
        "[Dex] The current plan, revision 2, is draft:\n- [completed] Look up A-1"
    )
    planning = build_plan_note(plan, InteractionMode.PLANNING)
    assert planning is not None and planning.endswith(
        "This turn only plans: write or revise the plan with write_todos, and do not do or claim any of its "
        "tasks. The user reviews the plan before it runs."
    )
    cleared = AgentPlan(3, PlanStatus.CLEARED, (), "t")
    for nothing in (None, cleared):
        assert build_plan_note(nothing, InteractionMode.EXECUTING) is None
        note = build_plan_note(nothing, InteractionMode.PLANNING)
        assert note is not None and note.startswith("[Dex] There is no plan yet.\nThis turn only plans")


def test_options_and_the_flow_refuse_plan_mode_they_cannot_honour() -> None:
    with pytest.raises(ValueError, match="needs the write_todos built-in"):
        AgentSessionOptions(built_in_tools=(ASK_USER,), plan_mode_enabled=True)
    with pytest.raises(ValueError, match=r"unknown built-in tools \['ask_me'\]"):
        AgentSessionOptions(built_in_tools=("ask_me",))
    with pytest.raises(TypeError, match="not one name"):
        AgentSessionOptions(built_in_tools=ASK_USER)
    with pytest.raises(ValueError, match="max_durable_wait must be at least one second"):
        AgentSessionOptions(max_durable_wait=timedelta(0))
    options = AgentSessionOptions(built_in_tools={WRITE_TODOS, ASK_USER}, plan_mode_enabled=True)
    assert options.built_in_tools == (ASK_USER, WRITE_TODOS)
    with pytest.raises(ValueError, match="does not set supports_plan_mode to True"):
        AgentSessionFlow(_Runner(), flow_type="T", options=options)
    AgentSessionFlow(_PlanningRunner(), flow_type="T", options=options)


def test_tool_questions_are_checked_when_they_are_made() -> None:
    assert ToolInputRequested("Which?", ["a", "b"]).choices == ("a", "b")
    with pytest.raises(ValueError, match="needs at least one choice"):
        ToolInputRequested("Which?", allows_free_text=False)
    with pytest.raises(ValueError, match="must not be blank"):
        ToolInputRequested(" ")


def test_poll_intervals_round_up_to_whole_seconds_from_one_to_a_day() -> None:
    assert [poll_interval_seconds(value) for value in (0, 0.2, 1.5, 30, 10**9, float("inf"))] == [
        1,
        1,
        2,
        30,
        86_400,
        86_400,
    ]
    assert poll_interval_seconds(float("nan")) is None
    assert poll_interval_seconds("5") is None
    assert poll_interval_seconds(True) is None


class _AskingRunner(_Runner):
    """A runner whose framework turns every tool exception into an error result, as many frameworks do."""

    def __init__(self, tool: str) -> None:
        self._tool = tool

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        try:
            if self._tool == "ask":
                warehouse = ask_user_input("Which warehouse?", choices=["Berlin", "Lyon"])
                reason = ask_user_input("Why?")
                return ToolExecutionResult(f"refunded to {warehouse}: {reason}")
            task_id = started_tool_task() or "job-1"
            await start_tool_task(task_id, poll_interval_seconds=5)
        except Exception as error:
            return ToolExecutionResult(f"Error: {error}")
        return ToolExecutionResult("unreachable")


def _side() -> SessionSide:
    side = SessionSide()
    side.records["call-1"] = AgentToolCall(
        tool_call_id="call-1",
        turn_id=side.turn_id,
        tool_name="refund",
        arguments="{}",
        effect=ToolEffect.NON_IDEMPOTENT_WRITE,
        requires_approval=False,
        status=ToolCallStatus.APPROVED,
    )
    return side


async def test_ask_user_input_asks_each_question_once_in_order_even_through_a_catching_framework() -> None:
    runner = _AskingRunner("ask")
    side = _side()
    first = await side.execute_outcome(runner, "call-1")
    assert first == ToolInputRequested("Which warehouse?", ("Berlin", "Lyon"))
    warehouse = QuestionAnswer("call-1-input-1", "Which warehouse?", "Lyon")
    side.records["call-1"] = replace(side.records["call-1"], input_answers=(warehouse,))
    assert await side.execute_outcome(runner, "call-1") == ToolInputRequested("Why?")
    reason = QuestionAnswer("call-1-input-2", "Why?", "broken")
    side.records["call-1"] = replace(side.records["call-1"], input_answers=(warehouse, reason))
    assert await side.execute_outcome(runner, "call-1") == ToolExecutionResult("refunded to Lyon: broken")


async def test_start_tool_task_needs_a_runner_that_polls_tasks() -> None:
    runner = _AskingRunner("task")
    side = _side()
    # SessionSide's executions say the runner polls no tasks, so the tool's framework reports the refusal.
    outcome = await side.execute_outcome(runner, "call-1")
    assert isinstance(outcome, ToolExecutionResult) and "does not poll tool tasks" in outcome.output
    with pytest.raises(RuntimeError, match="found no current tool call"):
        ask_user_input("Outside a call?")


async def test_task_handlers_poll_and_cancel_by_tool_name() -> None:
    cancelled: list[str] = []

    async def poll(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        return ToolTaskPending(3, continuation=poll.tool_call.task_id)

    async def cancel(cancellation: ToolTaskCancellation) -> None:
        cancelled.append(cancellation.tool_call.task_id or "")

    handlers = ToolTaskHandlers({"render": ToolTaskHandler(poll=poll, cancel=cancel)})
    record = AgentToolCall(
        tool_call_id="c",
        turn_id="turn-1",
        tool_name="render",
        arguments="{}",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.WAITING_FOR_TASK,
        task_id="job-9",
    )

    async def heartbeat() -> None:
        return None

    writer = AgentEventWriter(lambda event: None, "turn-1", 1)
    polled = ToolTaskPoll("s", record, "s/turn-1/c", 1, (), writer, heartbeat)
    assert await handlers.poll_tool_task(polled) == ToolTaskPending(3, "job-9")
    other = replace(record, tool_name="other")
    with pytest.raises(LookupError, match="has no task handler"):
        await handlers.poll_tool_task(ToolTaskPoll("s", other, "k", 1, (), writer, heartbeat))
    assert handlers.tool_names == frozenset({"render"})
    await handlers.cancel_tool_task(ToolTaskCancellation("s", record, "k", 1, heartbeat))
    await handlers.cancel_tool_task(ToolTaskCancellation("s", other, "k", 1, heartbeat))
    assert cancelled == ["job-9"], "a tool without a handler is left alone"
    with pytest.raises(TypeError, match="must be a ToolTaskHandler"):
        ToolTaskHandlers({"render": poll})  # pyright: ignore[reportArgumentType]
