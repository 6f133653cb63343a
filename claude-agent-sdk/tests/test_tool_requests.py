"""A user's `@tool` asks the user a question or hands over a task from its tool Step, in real sessions.

The tools (`tests.feature_agents`) log what they really did, so each test counts effects: a refund that
asks for the warehouse first runs once, with the answer; a report task is polled by the session until it
is done; and a read, which runs inline inside the model Step, is refused clearly when it asks.
"""

from __future__ import annotations

import pytest
from dex_agents import InterruptKind
from dex_agents.testing import (
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    wait_for_turn_end,
)

from dex_agents_claude_agent_sdk import INLINE_TOOL_REQUEST_MESSAGE
from tests.conftest import Features
from tests.feature_agents import TASK_POLLS_UNTIL_DONE, effect_log

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_tool_that_asks_before_it_takes_effect_runs_once_with_the_answer(features: Features) -> None:
    stack, sessions = features.stack, features.tool_requests
    refund = ScriptedToolCall("refund_order", {"order_id": "A-1"}, "refund-1")
    answer = ScriptedResponse(text="Refunded through Lyon.")
    session = await features.start(
        sessions, "ask", "Refund A-1", ScriptedResponse(tool_calls=(refund,)), answer
    )
    question = await sessions.wait_for_interrupt(session)
    assert question is not None and question.kind is InterruptKind.QUESTION, question
    assert (question.question, question.choices, question.allows_free_text) == (
        "Which warehouse takes the return?",
        ("Berlin", "Lyon"),
        False,
    )
    assert not [line for line in effect_log(stack.state_dir) if line.startswith("refund")], (
        "ran before the answer"
    )
    assert not await sessions.answer_question(session, question.interrupt_id, "Paris"), "only the choices"
    assert await sessions.answer_question(session, question.interrupt_id, "Lyon")
    done = await wait_for_turn_end(sessions, session, 1, timeout=90)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert [line for line in effect_log(stack.state_dir) if line.startswith("refund")] == [
        "refund A-1 via Lyon"
    ]
    assert "tool refund_order [refund-1] ok: refunded A-1 via Lyon" in features.last_model_input(session)
    assert done.messages[-1].text == "Refunded through Lyon."
    # The tool Step ran the tool twice, asking, then with the answer; only the second took effect.
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps.count("CallSingleAttemptTool") == 2 and steps.count("RunModel") == 2, steps


async def test_a_tool_that_starts_a_task_is_polled_by_the_session_until_done(features: Features) -> None:
    stack, sessions = features.stack, features.tool_requests
    render = ScriptedToolCall("render_report", {"month": "2026-11"}, "render-1")
    session, done = await features.one_call_turn(
        sessions, "task", "Render November's report", render, "Your report is ready."
    )
    job_lines = [line for line in effect_log(stack.state_dir) if "job-2026-11" in line]
    # Started once (with the call's idempotency key), then polled until done by the runner's task handler.
    assert job_lines == [
        f"start job-2026-11 {session}/turn-1/render-1",
        *["poll job-2026-11"] * TASK_POLLS_UNTIL_DONE,
    ]
    outputs = {message.tool_call_id: message.tool_output for message in done.messages if message.tool_output}
    assert outputs == {"render-1": "report job-2026-11 is ready"}
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps.count("PollToolTask") == TASK_POLLS_UNTIL_DONE, steps
    assert "tool render_report [render-1] ok: report job-2026-11 is ready" in features.last_model_input(
        session
    )


async def test_an_inline_read_that_asks_the_user_is_refused_clearly(features: Features) -> None:
    stack, sessions = features.stack, features.tool_requests
    check = ScriptedToolCall("check_region", {"order_id": "A-1"}, "region-1")
    session, done = await features.one_call_turn(
        sessions, "inline-ask", "Which region is A-1 in?", check, "I cannot check the region."
    )
    # The read ran inline, inside RunModel, where no question can wait: the model reads why, nothing waits.
    assert not done.pending_interrupts
    refusal = INLINE_TOOL_REQUEST_MESSAGE.format(tool="check_region")
    assert f"tool check_region [region-1] error: {refusal}" in features.last_model_input(session)
    assert not [line for line in effect_log(stack.state_dir) if line.startswith("region")]
    assert executed_step_types(await stack.read_step_history(session)) == ["StartAgentSession", "RunModel"]
