"""Stepwise's optional capabilities in process, through LiteLLM's real code path: built-in tools, plan mode
and its forced ``write_todos``, tool questions and tasks, and the model call metadata of tracing.

The model is a LiteLLM custom provider that streams given chunks and keeps what each call sent
(`tests.stepwise_litellm`), so a test reads the request's tools and tool choice as a provider gets them.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Awaitable, Mapping
from typing import Any, NoReturn

import pytest

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BUILT_IN_TOOL_NAMES,
    UNKNOWN_TOOL_POLICY,
    AgentPlan,
    AgentPlanTask,
    AgentToolCall,
    AgentTurnContext,
    AgentUsage,
    DeferredToolCall,
    DeferredToolOutcome,
    InteractionMode,
    ModelCallMetadata,
    ModelRequestParameters,
    ModelToolDescription,
    PlanModeRunner,
    PlanStatus,
    QuestionAnswer,
    ToolCallsRequested,
    ToolCallStatus,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskCanceller,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPoller,
    ToolTaskPollOutcome,
    ToolTaskStarted,
    TurnCompleted,
    TurnContinued,
    ask_user_input,
    current_tool_execution,
    start_tool_task,
    started_tool_task,
)
from dex_agents._tools._context import running_tool_execution
from dex_agents.stepwise import (
    AgentDefinition,
    LiteLLMModelClient,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StepwiseRunner,
    ToolDefinition,
    ToolDefinitionError,
    TurnContinuation,
    TurnContinuationContext,
    function_tool,
)
from dex_agents.stepwise._model import model_call_metadata
from dex_agents.testing import SessionSide
from tests.stepwise_litellm import CHUNK_MODEL, chunk, chunk_model, tool_delta, usage_chunk

SESSION = "session-1"  # SessionSide's flow ID
PLAN_NOTE_NO_PLAN = (
    "[Dex] There is no plan yet.\nThis turn only plans: write or revise the plan with write_todos, and do "
    "not do or claim any of its tasks. The user reviews the plan before it runs."
)


async def lookup_order(order_id: str) -> str:
    """Look up an order's status.

    Args:
        order_id: The order to look up.
    """
    return f"{order_id} has shipped"


def offered_names(options: dict[str, Any]) -> list[str]:
    tools: list[dict[str, Any]] = options.get("tools") or []
    return [tool["function"]["name"] for tool in tools]


def turn_of(side: SessionSide, **changes: Any) -> AgentTurnContext:
    return dataclasses.replace(side.context(), **changes)


def text_answer(text: str) -> list[object]:
    return [chunk(content=text), usage_chunk(10, 3)]


def call_answer(tool_call_id: str, name: str, arguments: Mapping[str, object]) -> list[object]:
    return [tool_delta(0, tool_call_id, name, json.dumps(arguments)), usage_chunk(10, 3, finish="tool_calls")]


def draft_plan(*tasks: str) -> AgentPlan:
    return AgentPlan(
        revision=1,
        status=PlanStatus.DRAFT,
        tasks=tuple(AgentPlanTask(task, "pending") for task in tasks),  # pyright: ignore[reportArgumentType]
        updated_at="2026-11-29T00:00:00Z",
    )


async def test_a_planning_turn_offers_only_write_todos_after_the_plan_note_and_forces_it_without_draft() -> (
    None
):
    todos = {"todos": [{"content": "Refund A-1", "status": "pending"}]}
    model = chunk_model(
        "planner",
        answers=[
            text_answer("A-1 shipped."),
            call_answer("todos-1", "write_todos", todos),
            text_answer("Review the plan, please."),
            text_answer("Anything else to plan?"),
        ],
        forced_tool_choice=True,
    )
    runner = StepwiseRunner(
        AgentDefinition(
            name="planner",
            model=model,
            instructions="Plan well.",
            tools=[lookup_order],
            planning_tool_choice="required",
        )
    )
    assert isinstance(runner, PlanModeRunner) and runner.supports_plan_mode
    side = SessionSide()
    side.start_turn(runner.build_user_message("How is A-1?"))
    chat = await runner.run_model_step(turn_of(side, enabled_built_in_tools=BUILT_IN_TOOL_NAMES))
    side.store(chat.new_messages)

    side.start_turn(runner.build_user_message("Plan the refund of A-1"))
    planning = {"enabled_built_in_tools": BUILT_IN_TOOL_NAMES, "interaction_mode": InteractionMode.PLANNING}
    drafted = await runner.run_model_step(turn_of(side, **planning))
    assert isinstance(drafted, ToolCallsRequested)
    # The session carries out a built-in's call; Stepwise defers it with no source and no policy of its own.
    assert list(drafted.tool_calls) == [
        DeferredToolCall("todos-1", "write_todos", json.dumps(todos), UNKNOWN_TOOL_POLICY)
    ]
    side.defer(drafted)
    side.finish(
        "todos-1", ToolCallStatus.SUCCEEDED, output='{"status":"updated","revision":1,"task_count":1}'
    )
    plan = draft_plan("Refund A-1")
    reviewed = await runner.run_model_step(turn_of(side, **planning, plan=plan))
    assert isinstance(reviewed, TurnCompleted) and reviewed.turn_error is None
    side.store(reviewed.new_messages)
    side.start_turn(runner.build_user_message("Also plan A-2"))
    again = await runner.run_model_step(turn_of(side, **planning, plan=plan))
    assert isinstance(again, TurnCompleted) and again.turn_error is None

    chat_options, forced, resumed, with_draft = CHUNK_MODEL.options["planner"]
    assert offered_names(chat_options) == ["lookup_order", *BUILT_IN_TOOL_NAMES]
    assert chat_options.get("tool_choice") is None
    # Only the first model call of a planning turn without a draft forces write_todos.
    assert offered_names(forced) == ["write_todos"] and forced["tool_choice"] == "required"
    assert offered_names(resumed) == ["write_todos"] and resumed.get("tool_choice") is None
    assert offered_names(with_draft) == ["write_todos"] and with_draft.get("tool_choice") is None
    first, second = CHUNK_MODEL.requests["planner"][1:3]
    # The plan note comes right before the turn's own messages, after the earlier turns.
    assert [(message["role"], message["content"]) for message in first] == [
        ("system", "Plan well."),
        ("user", "How is A-1?"),
        ("assistant", "A-1 shipped."),
        ("user", PLAN_NOTE_NO_PLAN),
        ("user", "Plan the refund of A-1"),
    ]
    assert second[3]["content"].startswith(
        "[Dex] The current plan, revision 1, is draft:\n- [pending] Refund A-1"
    )
    assert second[4]["content"] == "Plan the refund of A-1"
    # The note is never stored.
    assert "[Dex]" not in json.dumps([message.framework_item for message in side.messages])


async def test_auto_never_forces_and_an_executing_turn_offers_every_tool_with_the_active_plan_first() -> None:
    chunk_model("executor", answers=[text_answer("On it.")])
    runner = StepwiseRunner(
        AgentDefinition(
            name="executor", model=LiteLLMModelClient("dex-test-chunks/executor"), tools=[lookup_order]
        )
    )
    side = SessionSide()
    side.start_turn(runner.build_user_message("[Dex] The user approved plan revision 1."))
    active = dataclasses.replace(draft_plan("Refund A-1"), status=PlanStatus.ACTIVE)
    for mode in (InteractionMode.PLANNING, InteractionMode.EXECUTING):
        await runner.run_model_step(
            turn_of(side, enabled_built_in_tools=("write_todos",), interaction_mode=mode, plan=active)
        )
    planning, executing = CHUNK_MODEL.options["executor"]
    assert planning.get("tool_choice") is None and offered_names(planning) == ["write_todos"]
    assert executing.get("tool_choice") is None and offered_names(executing) == [
        "lookup_order",
        "write_todos",
    ]
    request = CHUNK_MODEL.requests["executor"][1]
    assert [message["content"] for message in request] == [
        "[Dex] The current plan, revision 1, is active:\n- [pending] Refund A-1",
        "[Dex] The user approved plan revision 1.",
    ]


async def test_a_forced_planning_tool_choice_is_refused_for_a_model_that_cannot_be_forced() -> None:
    chunk_model("stubborn", *text_answer("Hello."))
    stubborn = LiteLLMModelClient("dex-test-chunks/stubborn", forced_tool_choice=False)
    with pytest.raises(ValueError, match="planning_tool_choice='required' must force write_todos, but model"):
        AgentDefinition(name="planner", model=stubborn, planning_tool_choice="required")
    with pytest.raises(ValueError, match="planning_tool_choice must be 'auto' or 'required', got 'always'"):
        AgentDefinition(name="planner", model="openai/gpt-4.1-mini", planning_tool_choice="always")  # pyright: ignore[reportArgumentType]
    assert AgentDefinition(name="planner", model=stubborn).planning_tool_choice == "auto"

    # A model resolved per turn is checked when a planning turn would force it: the turn fails before any
    # model call, and a chat turn of the same agent works.
    runner = StepwiseRunner(
        AgentDefinition(
            name="planner", resolve_model=lambda settings: stubborn, planning_tool_choice="required"
        )
    )
    side = SessionSide()
    side.start_turn(runner.build_user_message("Plan the refund"))
    refused = await runner.run_model_step(
        turn_of(side, enabled_built_in_tools=("write_todos",), interaction_mode=InteractionMode.PLANNING)
    )
    assert isinstance(refused, TurnCompleted) and refused.model_call_metadata is None
    assert (
        refused.turn_error is not None
        and "'dex-test-chunks/stubborn' does not accept a forced tool choice" in (refused.turn_error)
    )
    assert refused.usage == AgentUsage() and CHUNK_MODEL.requests["stubborn"] == []
    side.start_turn(runner.build_user_message("Hi"))
    answered = await runner.run_model_step(side.context())
    assert isinstance(answered, TurnCompleted) and answered.turn_error is None
    assert [message.text for message in answered.new_messages] == ["Hello."]


async def ask_user(question: str) -> str:
    """Ask the help desk a question.

    Args:
        question: The question.
    """
    return "the help desk says hi"


async def test_enabled_built_ins_are_offered_after_the_agents_tools_and_take_their_names() -> None:
    chunk_model("offers", *text_answer("Hi."))
    runner = StepwiseRunner(
        AgentDefinition(
            name="offers", model=LiteLLMModelClient("dex-test-chunks/offers"), tools=[lookup_order, ask_user]
        )
    )
    side = SessionSide()
    side.start_turn(runner.build_user_message("Hi"))
    await runner.run_model_step(side.context())
    await runner.run_model_step(turn_of(side, enabled_built_in_tools=("ask_user", "durable_wait")))
    without, with_built_ins = CHUNK_MODEL.options["offers"]
    assert offered_names(without) == ["lookup_order", "ask_user"]
    assert without["tools"][1]["function"]["description"] == "Ask the help desk a question."
    # An enabled built-in's name is the built-in's: the function of that name is not offered meanwhile.
    assert offered_names(with_built_ins) == ["lookup_order", "ask_user", "durable_wait"]
    built_in = BUILT_IN_TOOL_DEFINITIONS["ask_user"]
    assert with_built_ins["tools"][1]["function"] == {
        "name": "ask_user",
        "description": built_in.description,
        "parameters": built_in.parameters_json_schema,
    }


def continue_once(context: TurnContinuationContext) -> TurnContinuation | None:
    first_answer = not context.asks_for_tools and context.consecutive_continuations == 0
    return TurnContinuation("Check once more.") if first_answer else None


async def test_every_model_call_reports_its_metadata_and_so_does_the_summary_call() -> None:
    chunk_model(
        "meta",
        answers=[
            call_answer("c1", "lookup_order", {"order_id": "A-1"}),
            text_answer("A-1 has shipped."),
            text_answer("Checked: A-1 has shipped."),
            text_answer("The user asked about A-1, which has shipped."),
        ],
    )
    client = LiteLLMModelClient("dex-test-chunks/meta")
    runner = StepwiseRunner(
        AgentDefinition(
            name="meta", model=client, tools=[lookup_order], decide_turn_continuation=continue_once
        )
    )
    side = SessionSide()
    side.start_turn(runner.build_user_message("How is A-1?"))
    requested = await runner.run_model_step(side.context())
    assert isinstance(requested, ToolCallsRequested)
    side.defer(requested)
    side.finish("c1", ToolCallStatus.SUCCEEDED, output="A-1 has shipped")
    continued = await runner.run_model_step(side.context())
    assert isinstance(continued, TurnContinued)
    side.store(continued.new_messages)
    side.framework_run_state = continued.framework_run_state
    completed = await runner.run_model_step(side.context())
    assert isinstance(completed, TurnCompleted)
    side.store(completed.new_messages)
    summary = await runner.summarize_context(side.summary_request(len(side.messages)))

    metadata = [outcome.model_call_metadata for outcome in (requested, continued, completed, summary)]
    assert all(item is not None for item in metadata)
    # The model as the provider gets it (without LiteLLM's provider prefix) and as it answered.
    assert {(item.request_model, item.response_model, item.provider_name) for item in metadata if item} == {
        ("meta", "meta", "dex-test-chunks")
    }
    assert [item.finish_reasons for item in metadata if item] == [
        ("tool_calls",),
        ("stop",),
        ("stop",),
        ("stop",),
    ]
    ids = [item.response_id for item in metadata if item]
    assert all(str(response_id).startswith("chatcmpl-") for response_id in ids) and len(set(ids)) == 4


def test_the_provider_is_named_as_the_genai_conventions_name_it() -> None:
    client = LiteLLMModelClient("gemini/gemini-2.5-pro")

    def provider(name: str | None) -> str | None:
        response = ModelResponse(
            message={}, text="", reasoning=None, tool_calls=(), usage=AgentUsage(), provider_name=name
        )
        return model_call_metadata(client, response).provider_name

    assert [
        provider(name) for name in ("gemini", "bedrock", "azure", "vertex_ai", "xai", "openai", None)
    ] == [
        "gcp.gemini",
        "aws.bedrock",
        "azure.ai.openai",
        "gcp.vertex_ai",
        "x_ai",
        "openai",
        None,
    ]
    bare = ModelResponse(message={}, text="", reasoning=None, tool_calls=(), usage=AgentUsage())
    # Stepwise always streams.
    assert model_call_metadata(client, bare) == ModelCallMetadata(
        request_model="gemini/gemini-2.5-pro", is_streaming=True
    )


def test_the_model_call_metadata_has_the_request_parameters_instructions_tools_and_endpoint() -> None:
    client = LiteLLMModelClient("openai/gpt-test")
    response = ModelResponse(
        message={},
        text="",
        reasoning=None,
        tool_calls=(),
        usage=AgentUsage(),
        time_to_first_chunk_seconds=0.5,
        cache_creation_input_tokens=12,
        server_address="llm.example.com",
        server_port=443,
    )
    lookup = ToolDefinition("lookup", "Look an order up.", {"type": "object"})
    request = ModelRequest(
        messages=[{"role": "system", "content": "You run the desk."}, {"role": "user", "content": "Hi"}],
        tools=[lookup],
        settings=ModelSettings(max_output_tokens=64, temperature=0.1, top_p=0.9),
    )
    metadata = model_call_metadata(client, response, request)
    assert metadata.request_parameters == ModelRequestParameters(max_tokens=64, temperature=0.1, top_p=0.9)
    assert metadata.is_streaming and metadata.time_to_first_chunk_seconds == 0.5
    assert (metadata.server_address, metadata.server_port) == ("llm.example.com", 443)
    assert metadata.cache_creation_input_tokens == 12
    assert metadata.system_instructions == "You run the desk."
    assert metadata.tool_definitions == (
        ModelToolDescription("lookup", "Look an order up.", '{"type":"object"}'),
    )


RUNS: list[tuple[str, str, bool]] = []


def cancel_order(order_id: str) -> str:
    """Cancel an order; asks where the return goes first.

    Args:
        order_id: The order.
    """
    warehouse = ask_user_input("Which warehouse takes the return?", choices=["Berlin", "Lyon"])
    RUNS.append(("cancel_order", warehouse, threading.current_thread() is threading.main_thread()))
    return f"cancelled {order_id} to {warehouse}"


async def refund_order(order_id: str) -> str:
    """Refund an order; asks why first.

    Args:
        order_id: The order.
    """
    reason = ask_user_input("Why is it refunded?")
    RUNS.append(("refund_order", reason, threading.current_thread() is threading.main_thread()))
    return f"refunded {order_id}: {reason}"


def defer_calls(runner: StepwiseRunner, side: SessionSide, *tool_names: str) -> None:
    """Record one approved call of each tool on order A-1, as `RunModel` does."""
    side.start_turn(runner.build_user_message("Go"))
    calls = [
        DeferredToolCall(f"{name}-1", name, '{"order_id": "A-1"}', UNKNOWN_TOOL_POLICY) for name in tool_names
    ]
    side.defer(ToolCallsRequested(framework_run_state="{}", tool_calls=calls))


async def test_sync_and_async_function_tools_ask_before_they_take_effect_then_run_once_with_the_answer() -> (
    None
):
    RUNS.clear()
    runner = StepwiseRunner(
        AgentDefinition(name="desk", model="openai/gpt-4.1-mini", tools=[cancel_order, refund_order])
    )
    side = SessionSide()
    defer_calls(runner, side, "cancel_order", "refund_order")
    asked = [await side.execute_outcome(runner, f"{name}-1") for name in ("cancel_order", "refund_order")]
    assert asked == [
        ToolInputRequested("Which warehouse takes the return?", ("Berlin", "Lyon")),
        ToolInputRequested("Why is it refunded?"),
    ]
    assert RUNS == [], "neither took effect before its answer"
    for name, question, answer in (
        ("cancel_order", "Which warehouse takes the return?", "Lyon"),
        ("refund_order", "Why is it refunded?", "It broke"),
    ):
        record = side.records[f"{name}-1"]
        answered = QuestionAnswer(f"{name}-1-input-1", question, answer)
        side.records[f"{name}-1"] = dataclasses.replace(record, input_answers=(answered,))
    outputs = [await side.execute(runner, f"{name}-1") for name in ("cancel_order", "refund_order")]
    assert outputs == ["cancelled A-1 to Lyon", "refunded A-1: It broke"]
    # The sync tool ran in a worker thread that saw its call, the async one on the event loop.
    assert RUNS == [("cancel_order", "Lyon", False), ("refund_order", "It broke", True)]


SEEN: list[tuple[str, bool]] = []
CANCELLED: list[str] = []


def render_report(order_id: str) -> Awaitable[NoReturn]:
    """Render an order's report, a long job.

    Args:
        order_id: The order.
    """
    execution = current_tool_execution()
    assert execution is not None
    SEEN.append(("render_report", execution.supports_tool_tasks))
    return start_tool_task(started_tool_task() or f"job-{order_id}", poll_interval_seconds=5)


async def archive_order(order_id: str) -> NoReturn:
    """Archive an order, a long job whose handler the agent gives.

    Args:
        order_id: The order.
    """
    await start_tool_task(f"archive-{order_id}", poll_interval_seconds=2)


def note_order(order_id: str) -> str:
    """Note an order, at once.

    Args:
        order_id: The order.
    """
    execution = current_tool_execution()
    assert execution is not None
    SEEN.append(("note_order", execution.supports_tool_tasks))
    return f"noted {order_id}"


def eager_order(order_id: str) -> Awaitable[NoReturn]:
    """Start a job though nothing polls it.

    Args:
        order_id: The order.
    """
    return start_tool_task(f"eager-{order_id}", poll_interval_seconds=1)


async def poll_report(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    return ToolExecutionResult(f"report {poll.tool_call.task_id} ready")


async def poll_archive(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    return ToolTaskPending(poll_interval_seconds=30)


async def cancel_report(cancellation: ToolTaskCancellation) -> None:
    CANCELLED.append(cancellation.tool_call.task_id or "")


async def run_with_tasks(
    runner: StepwiseRunner, side: SessionSide, tool_call_id: str
) -> tuple[DeferredToolOutcome | Exception, list[str]]:
    """Run a call as the tool Step of a session that polls tasks: its outcome and the checkpoints it saved."""
    saved: list[str] = []

    async def save(checkpoint: str) -> None:
        saved.append(checkpoint)

    execution = dataclasses.replace(
        side.execution(tool_call_id), supports_tool_tasks=True, checkpoint_function=save
    )
    with running_tool_execution(execution) as requests:
        try:
            result = await runner.execute_deferred_tool_call(execution)
        except Exception as error:
            return requests.outcome or error, saved
    return requests.outcome or result, saved


async def no_heartbeat() -> None:
    return None


def poll_of(side: SessionSide, record: AgentToolCall, task_id: str) -> ToolTaskPoll:
    task = dataclasses.replace(record, status=ToolCallStatus.WAITING_FOR_TASK, task_id=task_id)
    key = f"{SESSION}/{side.turn_id}/{record.tool_call_id}"
    return ToolTaskPoll(SESSION, task, key, 1, (), side.context().events, no_heartbeat)


async def test_only_function_tools_with_a_task_handler_may_start_tasks_and_polls_reach_their_handler() -> (
    None
):
    SEEN.clear()
    CANCELLED.clear()
    report = function_tool(
        render_report,
        effect="idempotent_write",
        task_handler=ToolTaskHandler(poll=poll_report, cancel=cancel_report),
    )
    definition = AgentDefinition(
        name="desk",
        model="openai/gpt-4.1-mini",
        tools=[report, archive_order, note_order, eager_order],
        task_handlers=ToolTaskHandlers({"archive_order": ToolTaskHandler(poll=poll_archive)}),
    )
    runner = StepwiseRunner(definition)
    assert isinstance(runner, ToolTaskPoller) and isinstance(runner, ToolTaskCanceller)
    side = SessionSide()
    defer_calls(runner, side, "render_report", "archive_order", "note_order", "eager_order")

    started, saved = await run_with_tasks(runner, side, "render_report-1")
    assert started == ToolTaskStarted("job-A-1", 5) and [item[-7:] for item in saved] == ["job-A-1"]
    archived, _ = await run_with_tasks(runner, side, "archive_order-1")
    assert archived == ToolTaskStarted("archive-A-1", 2)
    noted, _ = await run_with_tasks(runner, side, "note_order-1")
    assert noted == ToolExecutionResult("noted A-1")
    refused, _ = await run_with_tasks(runner, side, "eager_order-1")
    assert isinstance(refused, RuntimeError) and "does not poll tool tasks" in str(refused)
    # A tool without a handler is told that it cannot start tasks.
    assert SEEN == [("render_report", True), ("note_order", False)]

    assert await runner.poll_tool_task(poll_of(side, side.records["render_report-1"], "job-A-1")) == (
        ToolExecutionResult("report job-A-1 ready")
    )
    assert await runner.poll_tool_task(poll_of(side, side.records["archive_order-1"], "archive-A-1")) == (
        ToolTaskPending(poll_interval_seconds=30)
    )
    with pytest.raises(LookupError, match="'note_order' started task 'x-1', but it has no task handler"):
        await runner.poll_tool_task(poll_of(side, side.records["note_order-1"], "x-1"))
    ghost = dataclasses.replace(side.records["note_order-1"], tool_name="ghost_order")
    with pytest.raises(LookupError, match="'ghost_order' started task 'x-2', but no tool source owns it"):
        await runner.poll_tool_task(poll_of(side, ghost, "x-2"))
    for record, task_id in (
        (side.records["render_report-1"], "job-A-1"),
        (side.records["archive_order-1"], "a"),
    ):
        task = dataclasses.replace(record, task_id=task_id)
        await runner.cancel_tool_task(ToolTaskCancellation(SESSION, task, "key", 1, no_heartbeat))
    assert CANCELLED == ["job-A-1"], "only the handler with a cancel is called"


def test_task_handlers_must_name_function_tools_once() -> None:
    handler = ToolTaskHandler(poll=poll_report)
    with pytest.raises(
        ToolDefinitionError, match="a handler for 'ghost_order', which is not a function tool"
    ):
        AgentDefinition(
            name="desk",
            model="openai/gpt-4.1-mini",
            tools=[note_order],
            task_handlers=ToolTaskHandlers({"ghost_order": handler}),
        )
    with pytest.raises(ToolDefinitionError, match="'render_report' has a task_handler of its own and one in"):
        AgentDefinition(
            name="desk",
            model="openai/gpt-4.1-mini",
            tools=[function_tool(render_report, task_handler=handler)],
            task_handlers=ToolTaskHandlers({"render_report": handler}),
        )
    with pytest.raises(ToolDefinitionError, match="task_handler must be ToolTaskHandler, got function"):
        function_tool(render_report, task_handler=poll_report)  # pyright: ignore[reportArgumentType, reportCallIssue]
