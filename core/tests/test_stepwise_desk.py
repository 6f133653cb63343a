"""Stepwise's optional capabilities in real sessions: plan mode, tool questions and tasks, MCP tasks, tracing.

One devserver and one Worker child serve the desk agent (`tests.stepwise_desk`) for the module; the kit's
inventory MCP server runs on Streamable HTTP as the agent's ``shipping`` server, and the Worker writes its
spans to the module's span file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dex_agents import (
    BUILT_IN_TOOL_NAMES,
    WRITE_TODOS,
    AgentEventType,
    AgentSessionClient,
    AgentSnapshot,
    InteractionMode,
    InterruptKind,
    PlanStatus,
)
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    start_mcp_inventory_http_server,
    wait_for_turn_end,
    wait_until,
)
from dex_agents.testing.genai_conventions import (
    CONVENTIONS_COMMIT,
    attribute_table,
    conventions_problems,
    load_conventions,
)
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, ExportedSpan, read_exported_spans
from tests.builtin_support import payloads, pending_interrupt
from tests.stepwise_agents import CORE_DIR
from tests.stepwise_desk import (
    MODEL_NAME,
    REPORT_POLLS,
    WAREHOUSE_QUESTION,
    build_desk_flow,
    read_tool_runs,
    shipping_url_path,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

INSTRUCTIONS = "system: You run the order desk."


@dataclass
class Desk:
    stack: AgentTestStack
    sessions: AgentSessionClient
    shipping_log: Path
    span_file: Path

    def script(self, session: str, *turns: Sequence[ScriptedResponse]) -> None:
        self.stack.scripts.set_turns(session, turns)

    def model_inputs(self, session: str, turn_id: str) -> list[list[str]]:
        return [list(call.model_input) for call in self.stack.invocations.model_calls(session, turn_id)]

    async def steps(self, session: str) -> list[str]:
        return executed_step_types(await self.stack.read_step_history(session))

    async def events(self, session: str, event_type: str) -> list[dict[str, Any]]:
        return payloads(await read_agent_events(self.sessions, session), event_type)

    async def a_normal_turn_works(self, session: str, turn_count: int) -> None:
        self.stack.scripts.add_turn(session, ScriptedResponse(text="Still here."))
        assert await self.sessions.send_user_message(session, "Still there?")
        done = await wait_for_turn_end(self.sessions, session, turn_count)
        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].text == "Still here."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def desk(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Desk]:
    state_dir = tmp_path_factory.mktemp("stepwise-desk")
    shipping_log = state_dir / "shipping-requests.log"
    span_file = state_dir / "spans.jsonl"
    async with await start_mcp_inventory_http_server(shipping_log) as shipping:
        shipping_url_path(state_dir).write_text(shipping.url, encoding="utf-8")
        flow = build_desk_flow(state_dir)
        async with AgentTestStack(
            state_dir,
            [flow],
            "tests.stepwise_worker",
            worker_cwd=CORE_DIR,
            worker_env={SPAN_FILE_ENV: str(span_file)},
        ) as stack:
            await stack.start_worker()
            yield Desk(stack, stack.sessions(flow), shipping_log, span_file)


def todos(tool_call_id: str, *tasks: tuple[str, str]) -> ScriptedToolCall:
    items = [{"content": content, "status": status} for content, status in tasks]
    return ScriptedToolCall(WRITE_TODOS, {"todos": items}, tool_call_id)


def tool_outputs(snapshot: AgentSnapshot) -> dict[str, str]:
    return {
        message.tool_call_id: message.tool_output
        for message in snapshot.messages
        if message.tool_call_id and message.tool_output
    }


async def test_a_planning_turn_drafts_the_plan_and_its_approved_execution_keeps_the_todos_current(
    desk: Desk,
) -> None:
    session = desk.stack.new_session_id("plan")
    draft = todos("todos-1", ("Look up A-1", "pending"), ("Render the damage report", "pending"))
    progress = todos("todos-2", ("Look up A-1", "completed"), ("Render the damage report", "in_progress"))
    finished = todos("todos-3", ("Look up A-1", "completed"), ("Render the damage report", "completed"))
    lookup = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "lookup-1")
    desk.script(
        session,
        [
            ScriptedResponse(text="Here is my plan.", tool_calls=(draft,)),
            ScriptedResponse(text="Please review the plan."),
        ],
        [
            ScriptedResponse(tool_calls=(lookup, progress)),
            ScriptedResponse(tool_calls=(finished,)),
            ScriptedResponse(text="Done: A-1 arrived broken and its report is written."),
        ],
    )
    await desk.sessions.start_session(session)
    request = "Plan the damage report of A-1"
    assert await desk.sessions.send_user_message(session, request, plan_mode=True)
    planned = await wait_for_turn_end(desk.sessions, session, 1)

    assert planned.state is not None and planned.state.last_turn_error is None, planned.state
    assert planned.state.interaction_mode is InteractionMode.PLANNING
    assert planned.plan is not None and (planned.plan.revision, planned.plan.status) == (1, PlanStatus.DRAFT)
    first, second = desk.stack.invocations.model_calls(session, "turn-1")
    assert list(first.offered_tools) == [WRITE_TODOS] == list(second.offered_tools)
    # The plan note is user text right before the turn's messages, never stored.
    no_plan = (
        "user: [Dex] There is no plan yet.\nThis turn only plans: write or revise the plan with write_todos, "
        "and do not do or claim any of its tasks. The user reviews the plan before it runs."
    )
    assert list(first.model_input) == [INSTRUCTIONS, no_plan, f"user: {request}"]
    assert second.model_input[1] == (
        "user: [Dex] The current plan, revision 1, is draft:\n- [pending] Look up A-1\n"
        "- [pending] Render the damage report\nThis turn only plans: write or revise the plan with "
        "write_todos, and do not do or claim any of its tasks. The user reviews the plan before it runs."
    )
    assert second.model_input[-1] == (
        'tool write_todos [todos-1]: {"status":"updated","revision":1,"task_count":2}'
    )
    assert "[Dex]" not in " ".join(message.text or "" for message in planned.messages)

    assert await desk.sessions.execute_plan(session, 1)
    executed = await wait_for_turn_end(desk.sessions, session, 2)

    assert executed.state is not None and executed.state.last_turn_error is None, executed.state
    assert executed.state.interaction_mode is InteractionMode.EXECUTING
    assert executed.plan is not None and (executed.plan.revision, executed.plan.status) == (
        3,
        PlanStatus.COMPLETED,
    )
    calls = desk.stack.invocations.model_calls(session, "turn-2")
    offered = list(calls[0].offered_tools)
    assert offered[:3] == ["lookup_order", "cancel_order", "render_report"], offered
    assert offered[-3:] == list(BUILT_IN_TOOL_NAMES), offered
    assert "shipping__ship_order" in offered
    executing = list(calls[0].model_input)
    note = executing.index(
        "user: [Dex] The current plan, revision 1, is active:\n- [pending] Look up A-1\n"
        "- [pending] Render the damage report"
    )
    assert executing[note + 1].startswith("user: [Dex] The user approved plan revision 1."), executing
    assert "tool lookup_order [lookup-1]: A-1 arrived broken" in calls[1].model_input
    # Each model call shows the plan as it is then.
    for call, shown in zip(calls[1:], ("revision 2, is active", "revision 3, is completed"), strict=True):
        assert any(line.startswith(f"user: [Dex] The current plan, {shown}:") for line in call.model_input)
    updates = await desk.events(session, AgentEventType.PLAN_UPDATED)
    assert [(update["revision"], update["status"]) for update in updates] == [
        (1, "draft"),
        (1, "active"),
        (2, "active"),
        (3, "completed"),
    ]
    await desk.a_normal_turn_works(session, 3)


async def test_a_sync_function_tool_asks_before_it_takes_effect_and_runs_once_with_the_answer(
    desk: Desk,
) -> None:
    session = desk.stack.new_session_id("asks")
    cancel = ScriptedToolCall("cancel_order", {"order_id": "A-1"}, "cancel-1")
    desk.script(session, [ScriptedResponse(tool_calls=(cancel,)), ScriptedResponse(text="Cancelled.")])
    await desk.sessions.start_session(session, "Cancel A-1, it arrived broken")
    question = await pending_interrupt(desk.sessions, session, "cancel-1-input-1")

    assert (question.kind, question.question, question.choices, question.allows_free_text) == (
        InterruptKind.QUESTION,
        WAREHOUSE_QUESTION,
        ("Berlin", "Lyon"),
        False,
    )
    assert read_tool_runs(desk.stack.state_dir, session) == [], "the tool took no effect before the answer"
    desk.stack.kill_workers()
    await desk.stack.start_worker()
    assert not await desk.sessions.answer_question(session, "cancel-1-input-1", "Paris"), "only the choices"
    assert await desk.sessions.answer_question(session, "cancel-1-input-1", "Lyon")
    done = await wait_for_turn_end(desk.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    [run] = read_tool_runs(desk.stack.state_dir, session)
    # It ran once, with the answer, in a worker thread that saw its tool call; it has no task handler, so
    # it was told that it cannot start tasks.
    assert (run["kind"], run["warehouse"], run["on_event_loop_thread"], run["supports_tool_tasks"]) == (
        "cancel_order",
        "Lyon",
        False,
        False,
    )
    assert tool_outputs(done) == {"cancel-1": "cancelled A-1; the return goes to Lyon"}
    steps = await desk.steps(session)
    assert steps.count("CallSingleAttemptTool") == 2 and "AwaitQuestionAnswer" in steps, steps
    await desk.a_normal_turn_works(session, 2)


async def test_a_function_tool_hands_its_job_to_the_session_which_polls_it_to_completion_in_steps(
    desk: Desk,
) -> None:
    session = desk.stack.new_session_id("report")
    report = ScriptedToolCall("render_report", {"order_id": "A-1"}, "report-1")
    desk.script(session, [ScriptedResponse(tool_calls=(report,)), ScriptedResponse(text="It is ready.")])
    await desk.sessions.start_session(session, "Write the damage report of A-1")
    done = await wait_for_turn_end(desk.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    job_id = f"{session}-turn-1-report-1"
    assert tool_outputs(done) == {"report-1": f"the damage report of A-1 is ready ({job_id})"}
    [started] = read_tool_runs(desk.stack.state_dir, session)
    assert (started["kind"], started["job_id"], started["supports_tool_tasks"]) == (
        "report_started",
        job_id,
        True,
    )
    assert started["on_event_loop_thread"] is False
    [task] = await desk.events(session, AgentEventType.TOOL_TASK_STARTED)
    assert (task["tool_call_id"], task["task_id"]) == ("report-1", job_id), task
    steps = await desk.steps(session)
    assert steps.count("PollToolTask") == REPORT_POLLS, steps
    assert steps.count("CallTool") == 1, steps


async def test_an_mcp_tool_that_answers_with_a_task_is_polled_as_steps(desk: Desk) -> None:
    session = desk.stack.new_session_id("ship")
    ship = ScriptedToolCall("shipping__ship_order", {"sku": "K-1", "polls": 2}, "ship-1")
    desk.script(session, [ScriptedResponse(tool_calls=(ship,)), ScriptedResponse(text="Shipped.")])
    await desk.sessions.start_session(session, "Ship K-1")
    done = await wait_for_turn_end(desk.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert tool_outputs(done) == {"ship-1": "shipped K-1"}
    requests = desk.shipping_log.read_text(encoding="utf-8").splitlines()
    assert [line for line in requests if line.startswith("tools/call")] == ["tools/call ship_order K-1"]
    assert [line for line in requests if line.startswith("tasks/")] == [
        "tasks/create ship_order K-1",
        "tasks/get ship_order K-1 working",
        "tasks/get ship_order K-1 completed",
    ]
    [task] = await desk.events(session, AgentEventType.TOOL_TASK_STARTED)
    assert task["tool_name"] == "shipping__ship_order", task
    assert (await desk.steps(session)).count("PollToolTask") == 2


async def test_each_chat_span_of_a_traced_turn_carries_the_model_call_metadata(desk: Desk) -> None:
    session = desk.stack.new_session_id("traced")
    lookup = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "lookup-1")
    desk.script(session, [ScriptedResponse(tool_calls=(lookup,)), ScriptedResponse(text="It is broken.")])
    await desk.sessions.start_session(session, "How is A-1?")
    await wait_for_turn_end(desk.sessions, session, 1)

    def chat_spans() -> list[ExportedSpan] | None:
        spans = read_exported_spans(desk.span_file, session)
        spans = [span for span in spans if span.name.startswith("chat")]
        return spans if len(spans) == 2 else None

    spans = await wait_until("the turn's two chat spans", chat_spans)
    conventions = load_conventions()
    every_span = read_exported_spans(desk.span_file, session)
    print(f"\nStepwise, GenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, every_span))

    def streams(span: ExportedSpan) -> bool:
        return span.attribute("gen_ai.operation.name") == "chat"  # Stepwise streams every model call

    assert conventions_problems(conventions, every_span, streams) == []
    assert [span.name for span in spans] == [f"chat {MODEL_NAME}"] * 2
    assert [span.kind for span in spans] == ["CLIENT", "CLIENT"]
    for span in spans:
        # The model as the provider got it (LiteLLM's "dex-scripted/desk" without its provider prefix),
        # the model that answered, and LiteLLM's provider.
        assert span.attribute("gen_ai.request.model") == MODEL_NAME
        assert span.attribute("gen_ai.response.model") == MODEL_NAME
        assert span.attribute("gen_ai.provider.name") == "dex-scripted"
        assert str(span.attribute("gen_ai.response.id")).startswith("chatcmpl-")
    assert spans[0].attribute("gen_ai.response.id") != spans[1].attribute("gen_ai.response.id")
    assert [span.attribute("gen_ai.response.finish_reasons") for span in spans] == [["tool_calls"], ["stop"]]
    assert spans[0].attribute("dex.agent.tool_call_ids") == ["lookup-1"]
    for span in spans:
        # Stepwise always streams, and measures its first chunk.
        assert span.attribute("gen_ai.request.stream") is True
        assert float(str(span.attribute("gen_ai.response.time_to_first_chunk"))) >= 0
        assert json.loads(str(span.attribute("gen_ai.system_instructions")))[0]["type"] == "text"
        offered = json.loads(str(span.attribute("gen_ai.tool.definitions")))
        assert {"type": "function", "name": "lookup_order"}.items() <= offered[0].items()
    asks, answers = spans
    lookup_call = {
        "type": "tool_call",
        "id": "lookup-1",
        "name": "lookup_order",
        "arguments": {"order_id": "A-1"},
    }
    assert [
        part
        for message in json.loads(str(asks.attribute("gen_ai.output.messages")))
        for part in message["parts"]
    ] == [lookup_call]
    # The answering call received the lookup's result and produced only the answer.
    received = json.loads(str(answers.attribute("gen_ai.input.messages")))
    assert received[0] == {"role": "user", "parts": [{"type": "text", "content": "How is A-1?"}]}
    parts = [part for message in received[1:] for part in message["parts"]]
    assert parts[0] == lookup_call
    assert [part["type"] for part in parts[1:]] == ["tool_call_response"]
    assert parts[1]["id"] == "lookup-1"
    assert json.loads(str(answers.attribute("gen_ai.output.messages"))) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It is broken."}],
            "finish_reason": "stop",
        }
    ]
    # The tool Step's span says what kind of tool ran and what it does, from the function's docstring.
    [lookup_span] = [span for span in every_span if span.name == "execute_tool lookup_order"]
    assert lookup_span.attribute("gen_ai.tool.type") == "function"
    assert lookup_span.attribute("gen_ai.tool.description") == "Look up an order's status."
