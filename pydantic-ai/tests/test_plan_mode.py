"""Plan mode in process: what a planning turn offers the model and where the plan note goes.

The session's side is played by `SessionSide`, so the runner sees exactly the turn contexts the Steps hand
it; the whole-session test with a Worker kill is in `test_long_sessions.py`.
"""

from __future__ import annotations

import dataclasses

from dex_agents import (
    PLANNING_TURN_REJECTION_MESSAGE,
    AgentPlan,
    AgentPlanTask,
    AgentTurnContext,
    ContextSummary,
    InteractionMode,
    PlanStatus,
    PlanTaskStatus,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
    build_plan_note,
)
from dex_agents.testing import SessionSide
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from dex_agents_pydantic_ai import CONTEXT_SUMMARY_HEADER, PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.support import respond, tool_call

PLAN = AgentPlan(
    revision=1,
    status=PlanStatus.ACTIVE,
    tasks=(AgentPlanTask("Look up order A-1", PlanTaskStatus.PENDING),),
    updated_at="2026-12-02T00:00:00Z",
)
TODOS = {"todos": [{"content": "Look up order A-1", "status": "pending"}]}


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


def plans_then_answers(messages: list[ModelMessage]) -> ModelResponse:
    """Writes the plan and, against the rules, looks an order up; then answers from the tool results."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(part.part_kind == "tool-return" for part in last.parts):
        return respond(TextPart("The plan is ready for review."))
    prompts = [part.content for part in last.parts if isinstance(part, UserPromptPart)]
    if prompts[-1] == "Plan the refund":
        return respond(
            tool_call("write_todos", TODOS, "plan-1"),
            tool_call("lookup_order", {"order_id": "A-1"}, "read-1"),
        )
    return respond(TextPart(f"Answer to: {prompts[-1]}"))


def turn_in(session: SessionSide, mode: InteractionMode, plan: AgentPlan | None) -> AgentTurnContext:
    return dataclasses.replace(
        session.context(),
        interaction_mode=mode,
        plan=plan,
        enabled_built_in_tools=("write_todos", "ask_user"),
    )


async def test_a_planning_turn_offers_only_write_todos_and_shows_the_plan_note_before_the_turn() -> None:
    model = ScriptedModel(plans_then_answers)
    runner = PydanticAiRunner(Agent(model, tools=[lookup_order]))
    assert runner.supports_plan_mode is True
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hello"))
    chat = await runner.run_model_step(turn_in(session, InteractionMode.CHAT, None))
    assert isinstance(chat, TurnCompleted)
    session.store(chat.new_messages)

    session.start_turn(runner.build_user_message("Plan the refund"))
    first = await runner.run_model_step(turn_in(session, InteractionMode.PLANNING, None))

    note = build_plan_note(None, InteractionMode.PLANNING)
    assert note is not None
    assert model.calls[-1].tool_names == ("write_todos",)
    assert model.calls[-1].user_prompts == ["Hello", note, "Plan the refund"]
    # A call to a tool the model was not offered is still deferred, so the session can reject it.
    assert isinstance(first, ToolCallsRequested)
    assert [call.tool_name for call in first.tool_calls] == ["write_todos", "lookup_order"]
    session.defer(first)
    session.finish("plan-1", ToolCallStatus.SUCCEEDED, output='{"status":"updated","revision":1}')
    session.finish("read-1", ToolCallStatus.REJECTED, rejection_message=PLANNING_TURN_REJECTION_MESSAGE)
    done = await runner.run_model_step(turn_in(session, InteractionMode.PLANNING, None))

    assert isinstance(done, TurnCompleted) and done.turn_error is None
    assert model.calls[-1].tool_names == ("write_todos",)
    assert [str(part.content) for part in model.calls[-1].tool_returns] == [
        '{"status":"updated","revision":1}',
        PLANNING_TURN_REJECTION_MESSAGE,
    ]
    # The note is shown, never stored.
    session.store(done.new_messages)
    assert all(note not in (message.text or "") for message in session.messages)
    assert [message.tool_output for message in session.messages if message.tool_call_id] == [
        None,
        None,
        '{"status":"updated","revision":1}',
        PLANNING_TURN_REJECTION_MESSAGE,
    ]


async def test_a_chat_turn_with_a_plan_offers_every_tool_and_reads_summary_then_plan_then_the_turn() -> None:
    model = ScriptedModel(plans_then_answers)
    runner = PydanticAiRunner(Agent(model, tools=[lookup_order]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hello"))
    first = await runner.run_model_step(turn_in(session, InteractionMode.CHAT, None))
    assert isinstance(first, TurnCompleted)
    session.store(first.new_messages)
    session.start_turn(runner.build_user_message("Go on"))
    summary = ContextSummary(
        generation=1,
        first_sequence=1,
        last_sequence=2,
        text="They said hello.",
        created_at="2026-12-02T00:00:00Z",
    )
    turn = dataclasses.replace(
        turn_in(session, InteractionMode.EXECUTING, PLAN),
        messages=session.context().messages[2:],
        context_summary=summary,
    )
    estimate_without_plan = runner.estimate_input_tokens(dataclasses.replace(turn, plan=None))

    done = await runner.run_model_step(turn)

    assert isinstance(done, TurnCompleted) and done.turn_error is None
    assert model.calls[-1].tool_names == ("lookup_order", "ask_user", "write_todos")
    note = build_plan_note(PLAN, InteractionMode.EXECUTING)
    assert note is not None
    assert model.calls[-1].user_prompts == [f"{CONTEXT_SUMMARY_HEADER}\n\nThey said hello.", note, "Go on"]
    # Compaction counts the note as part of the next model input.
    assert runner.estimate_input_tokens(turn) > estimate_without_plan


class Refund(BaseModel):
    order_id: str


async def test_a_planning_turn_keeps_the_agents_output_tool_so_its_run_can_end() -> None:
    model = ScriptedModel([respond(tool_call("final_result", {"order_id": "A-1"}, "out-1"))])
    runner = PydanticAiRunner(Agent(model, tools=[lookup_order], output_type=Refund))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Plan it"))

    done = await runner.run_model_step(turn_in(session, InteractionMode.PLANNING, None))

    assert isinstance(done, TurnCompleted) and done.turn_error is None
    assert model.calls[-1].tool_names == ("write_todos",)
    # Pydantic AI took the output call as the run's output: an output tool it had hidden would have been
    # an unknown tool, and its retry would have ended the turn with an error.
    assert [message.tool_output for message in done.new_messages if message.tool_call_id] == [
        None,
        "Final result processed.",
    ]
