"""Questions, plan mode, durable waits and tool tasks through the web app, over the built-in tool Flows.

The page (headless Chromium) answers and declines questions, approves a plan and follows its executing
turn, and shows durable waits and tool tasks; the routes name why they refuse an answer or an approval;
the AI SDK stream asks questions as tool parts and carries the plan as a data part.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Page, Route, expect

from dex_agents import (
    ASK_USER,
    DURABLE_WAIT,
    QUESTION_DECLINED_TOOL_RESULT,
    WRITE_TODOS,
    InteractionMode,
    PlanStatus,
    ToolCallStatus,
)
from dex_agents.testing import (
    ScriptedQuestion,
    ScriptedResponse,
    ScriptedTask,
    ScriptedToolCall,
    wait_for_turn_end,
)
from dex_agents.web import EventStreamTimings, create_agent_web_app
from tests.builtin_support import (
    CANCEL,
    READ,
    RECEIPT,
    BuiltIns,
    a_normal_turn_works,
    call,
    pending_interrupt,
    tool_call_record,
)
from tests.web_support import (
    answered_message,
    api,
    chat,
    chunk_types,
    save_screenshot,
    serve,
    user_message,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMINGS = EventStreamTimings(long_poll_seconds=2, settle_seconds=1)
WAREHOUSE = ScriptedQuestion("Which warehouse takes the return?", ("Berlin", "Lyon"), allows_free_text=False)


def ask(tool_call_id: str, question: str, **arguments: object) -> ScriptedToolCall:
    return ScriptedToolCall(ASK_USER, {"question": question, **arguments}, tool_call_id)


def todos(tool_call_id: str, *tasks: tuple[str, str]) -> ScriptedToolCall:
    items = [{"content": content, "status": status} for content, status in tasks]
    return ScriptedToolCall(WRITE_TODOS, {"todos": items}, tool_call_id)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def base_url(built_ins_stack: BuiltIns) -> AsyncIterator[str]:
    async with serve(
        create_agent_web_app(built_ins_stack.sessions, allow_any_session=True, timings=TIMINGS)
    ) as url:
        yield url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def web(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        yield http


async def test_questions_are_answered_and_declined_from_the_page_and_the_answers_reach_the_model(
    built_ins: BuiltIns, base_url: str, page: Page
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("page-questions")
    questions = (
        ask("ask-1", "Which warehouse?", choices=["Berlin", "Lyon"]),
        call(CANCEL, "cancel-1", asks=(WAREHOUSE,)),
        ask("ask-2", "Gift wrap it?"),
    )
    built_ins.script(
        session,
        [
            ScriptedResponse(text="Three questions first.", tool_calls=questions),
            ScriptedResponse(text="Done."),
        ],
    )
    await sessions.start_session(session, "Return A-1")
    await page.goto(f"{base_url}/sessions/{session}")

    # The model's ask_user: its choices, and a text box since it allows free text.
    asked = page.locator('[data-interrupt-id="ask-1"]')
    await expect(asked.locator(".question")).to_have_text("Which warehouse?")
    await expect(asked.locator('[data-action="choose"]')).to_have_text(["Berlin", "Lyon"])
    await expect(page.locator('[data-tool-call-id="ask-1"]')).to_have_attribute(
        "data-status", "awaiting_answer"
    )
    # The tool's question, on the asking call's card: choices only, so no text box.
    tool_question = page.locator('[data-tool-call-id="cancel-1"] [data-interrupt-id="cancel-1-input-1"]')
    await expect(tool_question.locator('[data-action="choose"]')).to_have_text(["Berlin", "Lyon"])
    await expect(tool_question.locator('[data-field="answer"]')).to_have_count(0)

    # A blank answer is refused with the server's reason; the card stays and takes the next answer.
    await asked.locator('[data-action="answer"]').click()
    await expect(asked.locator("[data-error]")).to_have_text("the answer must not be blank")
    await save_screenshot(page, "web-questions")
    await asked.locator('[data-field="answer"]').fill("Hamburg")
    await asked.locator('[data-action="answer"]').click()
    await tool_question.locator('[data-action="choose"]', has_text="Lyon").click()
    await page.locator('[data-interrupt-id="ask-2"] [data-action="decline"]').click()

    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text("Done.")
    await expect(page.locator('[data-tool-call-id="ask-1"] [data-output]')).to_contain_text("Hamburg")
    done = await wait_for_turn_end(sessions, session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    last = built_ins.model_calls(session)[-1].model_input_text
    for expected in (
        '{"status":"answered","answer":"Hamburg"}',
        'with answers ["Lyon"]',
        QUESTION_DECLINED_TOOL_RESULT,
    ):
        assert expected in last, (expected, last)
    assert len(built_ins.runs(session, CANCEL)) == 1, "the tool took effect once, with its answer"


async def test_a_plan_is_drafted_approved_from_the_page_and_its_tasks_update_as_it_runs(
    built_ins: BuiltIns, base_url: str, page: Page
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("page-plan")
    tasks = ("Look up A-1", "Refund A-1")
    built_ins.script(
        session,
        [
            ScriptedResponse(
                text="Here is my plan.", tool_calls=(todos("todos-1", *((t, "pending") for t in tasks)),)
            ),
            ScriptedResponse(text="Review the plan, please.", gate="review"),
        ],
        [
            ScriptedResponse(
                tool_calls=(
                    todos("todos-2", (tasks[0], "completed"), (tasks[1], "in_progress")),
                    call(READ, "read-1"),
                )
            ),
            ScriptedResponse(
                tool_calls=(todos("todos-3", *((t, "completed") for t in tasks)),), gate="finish"
            ),
            ScriptedResponse(text="Done: A-1 is refunded."),
        ],
    )
    await sessions.start_session(session)
    await page.goto(f"{base_url}/sessions/{session}")
    await expect(page.locator("#connection")).to_have_attribute("data-state", "live")
    await page.check("#plan-mode")
    await page.fill("#message", "Plan the refund of A-1")
    await page.click("#send")

    # The planning turn drafts the plan; it cannot be approved while the turn runs.
    plan = page.locator("#plan")
    approve = plan.locator('[data-action="execute-plan"]')
    await expect(page.locator("#mode")).to_have_text("planning")
    await expect(plan).to_have_attribute("data-status", "draft")
    await expect(plan.locator(".tasks .content")).to_have_text(list(tasks))
    await expect(plan.locator(".tasks .task-status")).to_have_text(["pending", "pending"])
    await expect(approve).to_have_text("Approve plan")
    await expect(approve).to_be_disabled()
    await built_ins.stack.gate(session, "review").wait_until_reached()
    built_ins.stack.gate(session, "review").release()
    await wait_for_turn_end(sessions, session, 1)
    await expect(approve).to_be_enabled()
    await expect(page.locator("#plan-mode")).not_to_be_checked()

    # A refused approval shows the server's reason: here the request names a revision the plan left behind.
    async def stale_revision(route: Route) -> None:
        await route.continue_(post_data=json.dumps({"revision": 7}))

    await page.route("**/plan/execute", stale_revision)
    await approve.click()
    await expect(plan.locator("[data-plan-error]")).to_have_text(
        "plan revision 7 is not the current one: the plan is at revision 1"
    )
    await page.unroute("**/plan/execute")
    await approve.click()

    # The executing turn keeps the tasks current; the page follows each revision.
    await expect(page.locator("#mode")).to_have_text("executing")
    await expect(page.locator('[data-plan-approval="1"]')).to_have_text("You approved plan revision 1.")
    await built_ins.stack.gate(session, "finish").wait_until_reached()
    await expect(plan).to_have_attribute("data-revision", "2")
    await expect(plan).to_have_attribute("data-status", "active")
    await expect(plan.locator(".tasks .task-status")).to_have_text(["completed", "in progress"])
    await expect(approve).to_be_disabled()
    await save_screenshot(page, "web-plan")
    built_ins.stack.gate(session, "finish").release()
    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text("Done: A-1 is refunded.")
    await expect(plan).to_have_attribute("data-status", "completed")
    await expect(plan.locator(".tasks .task-status")).to_have_text(["completed", "completed"])
    await expect(approve).to_have_count(0)

    done = await wait_for_turn_end(sessions, session, 2)
    assert done.state is not None and done.state.interaction_mode is InteractionMode.EXECUTING
    assert done.plan is not None and (done.plan.revision, done.plan.status) == (3, PlanStatus.COMPLETED)
    assert len(built_ins.runs(session, READ)) == 1
    executing = built_ins.model_calls(session, "turn-2")[0].model_input_text
    assert "[Dex] The user approved plan revision 1." in executing, executing


async def test_durable_waits_and_tool_tasks_show_until_when_and_that_the_task_runs(
    built_ins: BuiltIns, base_url: str, page: Page
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("page-waits")
    wait = ScriptedToolCall(DURABLE_WAIT, {"seconds": 3600, "reason": "the courier comes back"}, "wait-1")
    task = ScriptedTask(output="receipt R-1 sent", poll_gate="polling")
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(wait, call(RECEIPT, "receipt-1", task=task))),
            ScriptedResponse(text="Waited, and the receipt is sent."),
        ],
    )
    await sessions.start_session(session, "Send the receipt once the courier is back")
    await page.goto(f"{base_url}/sessions/{session}")

    record = await tool_call_record(sessions, session, "wait-1", ToolCallStatus.WAITING_FOR_TIMER)
    waiting = page.locator('[data-tool-call-id="wait-1"]')
    await expect(waiting).to_have_attribute("data-status", "waiting_for_timer")
    await expect(waiting).to_have_attribute("data-wait-until", record.wait_until or "")
    await expect(waiting.locator(".state")).to_contain_text("waiting until ")
    running = page.locator('[data-tool-call-id="receipt-1"]')
    await expect(running).to_have_attribute("data-status", "waiting_for_task")
    await expect(running).to_have_attribute("data-task-id", "task-receipt-1-1")
    await expect(running.locator(".state")).to_have_text("task running")

    await built_ins.stack.gate(session, "polling").wait_until_reached()
    built_ins.stack.gate(session, "polling").release()
    assert await built_ins.stack.skip_durable_wait(session, "wait-1")
    await expect(page.locator('.msg[data-role="assistant"]').last).to_have_text(
        "Waited, and the receipt is sent."
    )
    await expect(running.locator("[data-output]")).to_contain_text("receipt R-1 sent")
    await wait_for_turn_end(sessions, session, 1)


async def test_answers_and_plan_approvals_that_the_session_refuses_name_the_cause(
    built_ins: BuiltIns, web: httpx.AsyncClient
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("web-refusals")
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(call(CANCEL, "cancel-1", asks=(WAREHOUSE,)),)),
            ScriptedResponse(text="Ok."),
        ],
    )
    await sessions.start_session(session)
    base = api(session)
    no_plan = await web.post(f"{base}/plan/execute", json={"revision": 1})
    assert no_plan.status_code == 409 and no_plan.json()["error"] == "the session has no plan to execute"
    bad_flag = await web.post(f"{base}/messages", json={"text": "Plan it", "plan_mode": "yes"})
    assert bad_flag.status_code == 400 and "plan_mode" in bad_flag.json()["error"]
    assert (await web.post(f"{base}/messages", json={"text": "Cancel A-1"})).status_code == 202
    await pending_interrupt(sessions, session, "cancel-1-input-1")

    question = f"{base}/interrupts/cancel-1-input-1"
    cases = [
        (
            await web.post(f"{question}/answer", json={"answer": "Paris"}),
            409,
            "takes only one of its choices (Berlin, Lyon), not 'Paris'",
        ),
        (await web.post(f"{question}/answer", json={"answer": " "}), 422, "must not be blank"),
        (await web.post(f"{question}/approve", json={}), 409, "is a question: answer it, or decline it"),
        (
            await web.post(f"{base}/interrupts/cancel-9-input-1/answer", json={"answer": "Lyon"}),
            409,
            "not pending",
        ),
        (await web.post(f"{base}/plan/execute", json={"revision": 1}), 409, "no plan"),
    ]
    for response, status, words in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert words in response.json()["error"], (response.request.url, response.text)
    answered = await web.post(f"{question}/answer", json={"answer": "Lyon"})
    assert answered.status_code == 200, answered.text
    await wait_for_turn_end(sessions, session, 1)
    assert [run.attempt for run in built_ins.runs(session, CANCEL)] == [1]

    # A Flow type without plan mode refuses plan_mode messages, before anything is sent.
    other = built_ins.stack.new_session_id("web-no-plan-mode")
    deadline_sessions = built_ins.deadline_sessions
    await deadline_sessions.start_session(other)
    app = create_agent_web_app(deadline_sessions, allow_any_session=True, timings=TIMINGS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
        refused = await http.post(f"{api(other)}/messages", json={"text": "Plan it", "plan_mode": True})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"] == "plan mode is not enabled for CoreBuiltInsDeadline sessions"
        snapshot = (await http.get(f"{api(other)}/snapshot")).json()
        assert snapshot["plan_mode_enabled"] is False
    await a_normal_turn_works(built_ins, deadline_sessions, other, 1)


async def test_ai_sdk_stream_asks_questions_as_tool_parts_and_reads_the_answers_from_their_outputs(
    built_ins: BuiltIns, web: httpx.AsyncClient
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("web-ui-questions")
    questions = (
        ask("ask-1", "Which warehouse?", choices=["Berlin", "Lyon"]),
        call(CANCEL, "cancel-1", asks=(WAREHOUSE,)),
    )
    built_ins.script(
        session,
        [ScriptedResponse(text="Two questions.", tool_calls=questions), ScriptedResponse(text="Done.")],
    )
    await sessions.start_session(session)
    first = await chat(web, session, user_message("Return A-1"))
    inputs = [chunk for chunk in first if chunk["type"] == "tool-input-available"]
    assert [(c["toolCallId"], c["toolName"]) for c in inputs] == [
        ("ask-1", ASK_USER),
        ("cancel-1", CANCEL),
        ("cancel-1-input-1", ASK_USER),
    ]
    assert inputs[2]["input"] == {
        "question": WAREHOUSE.question,
        "choices": ["Berlin", "Lyon"],
        "allows_free_text": False,
        "deadline": None,
        "tool_call_id": "cancel-1",
        "tool_name": CANCEL,
    }
    assert chunk_types(first)[-2:] == ["finish-step", "finish"]
    assert first[-1]["finishReason"] == "tool-calls"

    # An answer the question does not take refuses the request, and nothing is sent.
    wrong = answered_message(first, outputs={"ask-1": "Hamburg", "cancel-1-input-1": "Paris"})
    refused = await web.post(f"{api(session)}/chat", json={"messages": [wrong]})
    assert refused.status_code == 409 and "not 'Paris'" in refused.json()["error"], refused.text
    snapshot = await sessions.get_agent_snapshot(session)
    assert {item.interrupt_id for item in snapshot.pending_interrupts} == {"ask-1", "cancel-1-input-1"}

    answers = answered_message(first, outputs={"ask-1": "Hamburg", "cancel-1-input-1": {"answer": "Lyon"}})
    second = await chat(web, session, answers)
    outputs = {c["toolCallId"]: c["output"] for c in second if c["type"] == "tool-output-available"}
    assert set(outputs) == {"cancel-1"}, "the browser holds its own answers"
    assert "".join(c["delta"] for c in second if c["type"] == "text-delta") == "Done."
    assert second[-1]["finishReason"] == "stop"
    last = built_ins.model_calls(session)[-1].model_input_text
    assert '{"status":"answered","answer":"Hamburg"}' in last and 'with answers ["Lyon"]' in last, last


async def test_ai_sdk_stream_carries_the_plan_as_a_data_part_and_a_data_part_approves_it(
    built_ins: BuiltIns, web: httpx.AsyncClient
) -> None:
    sessions = built_ins.sessions
    session = built_ins.stack.new_session_id("web-ui-plan")
    built_ins.script(
        session,
        [
            ScriptedResponse(tool_calls=(todos("todos-1", ("Refund A-1", "pending")),)),
            ScriptedResponse(text="Ok?"),
        ],
        [
            ScriptedResponse(tool_calls=(todos("todos-2", ("Refund A-1", "completed")),)),
            ScriptedResponse(text="Refunded."),
        ],
    )
    await sessions.start_session(session)
    planning = user_message("Plan the refund of A-1") | {"metadata": {"dex": {"plan_mode": True}}}
    drafted = await chat(web, session, planning)
    plans = [chunk for chunk in drafted if chunk["type"] == "data-dex-plan"]
    assert [(c["id"], c["data"]["revision"], c["data"]["status"]) for c in plans] == [("plan", 1, "draft")]
    assert plans[0]["data"]["tasks"] == [{"content": "Refund A-1", "status": "pending"}]
    assert drafted[-1]["finishReason"] == "stop"

    def approval(revision: int) -> dict[str, Any]:
        part = {"type": "data-dex-plan-approval", "data": {"revision": revision}}
        return {"id": "u2", "role": "user", "parts": [part]}

    stale = await web.post(f"{api(session)}/chat", json={"messages": [approval(5)]})
    assert stale.status_code == 409 and "the plan is at revision 1" in stale.json()["error"], stale.text
    executed = await chat(web, session, approval(1))
    assert executed[0]["messageId"] == "dex-turn-2"
    states = [(c["data"]["revision"], c["data"]["status"]) for c in executed if c["type"] == "data-dex-plan"]
    # The part carries committed state when the stream reads it: the approval's active revision 1 may
    # already have given way to the executing turn's revision 2.
    assert states[-1] == (2, "completed") and set(states) <= {(1, "active"), (2, "completed")}, states
    assert "".join(c["delta"] for c in executed if c["type"] == "text-delta") == "Refunded."
    done = await wait_for_turn_end(sessions, session, 2)
    assert done.state is not None and done.state.interaction_mode is InteractionMode.EXECUTING
