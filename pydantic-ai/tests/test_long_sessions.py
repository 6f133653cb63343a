"""Long Pydantic AI sessions against the devserver and a Worker child: compaction and session settings.

The compacting session's turns each store a question and a 1,000-character answer (250 estimated tokens),
so turn 5's model input would pass 85 % of the 1,000-token window: the session compacts once, with the agent's
own (scripted) model answering the summary call from the kit's summary script.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import pytest
import pytest_asyncio
from dex_agents import (
    PLANNING_TURN_REJECTION_MESSAGE,
    WRITE_TODOS,
    AgentEventType,
    AgentSessionClient,
    AgentSnapshot,
    InteractionMode,
    PlanStatus,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    ProviderFault,
    ScriptedResponse,
    ScriptedToolCall,
    read_agent_events,
    read_provider_requests,
    wait_for_turn_end,
    wait_until,
)

from dex_agents_pydantic_ai import CONTEXT_SUMMARY_HEADER
from dex_agents_pydantic_ai.testing import DEFAULT_SCRIPTED_SUMMARY
from tests.long_session_agents import build_flows
from tests.matrix_spec import PACKAGE_DIR

pytestmark = pytest.mark.asyncio(loop_scope="module")


def question(number: int) -> str:
    return f"Question {number}?"


def answer(number: int) -> str:
    return f"Answer {number}: ".ljust(1000, ".")


@dataclass
class Long:
    stack: AgentTestStack
    compacting: AgentSessionClient
    settings: AgentSessionClient
    on_refusal: AgentSessionClient
    planning: AgentSessionClient

    async def turns(self, session: str, numbers: Sequence[int]) -> AgentSnapshot:
        """Send each numbered question (the first starts the session) and wait for its turn to end."""
        snapshot: AgentSnapshot | None = None
        for number in numbers:
            if number == 1:
                await self.compacting.start_session(session, question(1))
            else:
                assert await self.compacting.send_user_message(session, question(number))
            snapshot = await wait_for_turn_end(self.compacting, session, number)
            assert snapshot.state is not None and snapshot.state.last_turn_error is None
        assert snapshot is not None
        return snapshot

    def script_answers(self, session: str, turns: int) -> None:
        self.stack.scripts.set_turns(
            session, [[ScriptedResponse(text=answer(n))] for n in range(1, turns + 1)]
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def long_stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Long]:
    flows = build_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("long"), flows, "tests.long_session_worker", worker_cwd=PACKAGE_DIR
    ) as stack:
        yield Long(stack, *(stack.sessions(flow) for flow in flows))


@pytest_asyncio.fixture(loop_scope="module")
async def long(long_stack: Long) -> Long:
    if not long_stack.stack.workers:
        await long_stack.stack.start_worker()
    return long_stack


def transcript(numbers: Sequence[int]) -> list[str]:
    """What the scripted model logs for these whole turns: a line per question and per answer."""
    return [line for n in numbers for line in (f"user: {question(n)}", f"assistant: {answer(n)}")]


async def test_a_session_past_the_trigger_compacts_once_then_the_model_input_starts_with_the_summary(
    long: Long,
) -> None:
    session = long.stack.new_session_id("compact")
    long.script_answers(session, 6)
    summary_text = "The user asked questions 1 to 3; each was answered."
    long.stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(text=summary_text)})

    await long.turns(session, range(1, 7))

    # Turn 5's input (about 1,014 tokens) passed the trigger; keeping 30 % of the window keeps turn 4 and
    # the question, so the agent's model summarized through turn 3's answer, sequence 6, exactly once.
    summaries = long.stack.invocations.summary_calls(session)
    assert [(call.turn_id, call.attempt) for call in summaries] == [("turn-5", 1)]
    assert list(summaries[0].model_input) == [
        "user: " + "\n".join(["The conversation:", *transcript([1, 2, 3])])
    ]
    fifth = long.stack.invocations.model_calls(session, "turn-5")
    header = f"user: {CONTEXT_SUMMARY_HEADER}\n\n{summary_text}"
    assert [list(call.model_input) for call in fifth] == [[header, *transcript([4]), "user: Question 5?"]]
    sixth = long.stack.invocations.model_calls(session, "turn-6")
    assert [list(call.model_input) for call in sixth] == [
        [header, *transcript([4, 5]), f"user: {question(6)}"]
    ]
    history = await long.stack.read_step_history(session)
    completed = [entry for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
    compactions = [entry for entry in completed if entry.step_type == "CompactContext"]
    assert [entry.step_input for entry in compactions] == [{"through_sequence": 6}]

    snapshot = await long.compacting.get_agent_snapshot(session)
    assert snapshot.context_summary is not None
    assert (snapshot.context_summary.generation, snapshot.context_summary.last_sequence) == (1, 6)
    assert snapshot.context_summary.text == summary_text
    assert snapshot.usage.model_calls == 7  # six answers and the summary call
    events = await read_agent_events(long.compacting, session)
    assert [
        (event.type, json.loads(event.payload))
        for event in events
        if event.type in (AgentEventType.COMPACTION_STARTED, AgentEventType.COMPACTION_FINISHED)
    ] == [
        (AgentEventType.COMPACTION_STARTED, {"through_sequence": 6}),
        (AgentEventType.COMPACTION_FINISHED, {"generation": 1, "through_sequence": 6}),
    ]
    # Retention deleted the chunks behind the summary, keeping at least four messages; the messages after
    # the summary all stay, and the session keeps answering from the summary and what is left.
    page = await long.compacting.list_agent_messages(session, limit=50)
    assert page.deleted_before_sequence == 7
    assert [message.sequence for message in page.messages] == list(range(7, 13))
    assert page.messages[-1].text == answer(6)


async def test_cancel_turn_during_compaction_cancels_the_summary_request(long: Long) -> None:
    session = long.stack.new_session_id("compact-cancel")
    long.script_answers(session, 6)
    long.stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(block_until_cancelled=True)})
    await long.turns(session, range(1, 5))
    assert await long.compacting.send_user_message(session, question(5))
    await wait_until("the summary call", lambda: long.stack.invocations.summary_calls(session))

    assert await long.compacting.cancel_turn(session)
    cancelled = await wait_for_turn_end(long.compacting, session, 5)

    # The CancelledError reached the summary request Pydantic AI was streaming; no summary was stored.
    assert [
        call.step_execution_id.split("-")[0] for call in long.stack.invocations.cancelled_model_calls(session)
    ] == ["CompactContext"]
    assert cancelled.context_summary is None and long.stack.invocations.model_calls(session, "turn-5") == []
    # The next turn compacts again (its summary script answers with the kit's default) and answers.
    done = await long.turns(session, (6,))
    assert done.context_summary is not None and done.context_summary.text == DEFAULT_SCRIPTED_SUMMARY
    assert done.messages[-1].text == answer(6)


async def test_update_session_settings_changes_the_next_turns_model_and_instructions(long: Long) -> None:
    session = long.stack.new_session_id("settings")
    sessions = long.settings
    await sessions.start_session(session, "Hi", session_settings={"model": "small"})
    first = await wait_for_turn_end(sessions, session, 1)
    assert first.messages[-1].text == "small model; instructions: You are the order desk."

    assert await sessions.update_session_settings(session, {"model": "large", "tone": "formal"})
    assert await sessions.send_user_message(session, "Hello again")
    second = await wait_for_turn_end(sessions, session, 2)
    assert second.messages[-1].text == (
        "large model; instructions: You are the order desk.\n\nAnswer in a formal tone."
    )

    # A model name the hook does not know ends the turn saying so; the session then takes a normal turn.
    assert await sessions.update_session_settings(session, {"model": "huge"})
    assert await sessions.send_user_message(session, "And now?")
    refused = await wait_for_turn_end(sessions, session, 3)
    assert refused.state is not None
    assert refused.state.last_turn_error == (
        "the session settings chose no usable model or instructions: KeyError: 'huge'"
    )
    assert await sessions.update_session_settings(session, {})
    assert await sessions.send_user_message(session, "Plain?")
    plain = await wait_for_turn_end(sessions, session, 4)
    assert plain.state is not None and plain.state.last_turn_error is None
    assert plain.messages[-1].text == "small model; instructions: You are the order desk."


async def test_a_context_length_refusal_compacts_and_the_turn_then_completes(long: Long) -> None:
    """OpenAIChatModel against the scripted provider: the provider refuses turn 3's whole input as too long.

    The session's own trigger never fires (a 100,000-token window); the refusal alone makes it compact, with
    the cut below half the runner's estimate (through turn 2's answer), and the smaller input then passes.
    """
    session = long.stack.new_session_id("refused")
    # Refused while the input holds both long answers (about 3.9 KB), accepted once they are summarized.
    too_long = ProviderFault("context_length", attempts=(1, 2, 3), requests=None, min_request_bytes=3000)
    summary_text = "The user asked questions 1 and 2; each was answered at length."
    long.stack.scripts.set_turns(
        session,
        [
            [ScriptedResponse(text=answer(1))],
            [ScriptedResponse(text=answer(2))],
            [ScriptedResponse(text="Answer 3, from the summary.", provider_faults=(too_long,))],
        ],
    )
    long.stack.scripts.set_summaries(session, {"turn-3": ScriptedResponse(text=summary_text)})
    await long.on_refusal.start_session(session, question(1))
    await wait_for_turn_end(long.on_refusal, session, 1)
    assert await long.on_refusal.send_user_message(session, question(2))
    await wait_for_turn_end(long.on_refusal, session, 2)
    assert await long.on_refusal.send_user_message(session, question(3))
    snapshot = await wait_for_turn_end(long.on_refusal, session, 3)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    assert snapshot.messages[-1].text == "Answer 3, from the summary."
    assert snapshot.context_summary is not None
    assert (snapshot.context_summary.text, snapshot.context_summary.last_sequence) == (summary_text, 4)
    history = await long.stack.read_step_history(session)
    completed = [entry for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
    assert [entry.step_input for entry in completed if entry.step_type == "CompactContext"] == [
        {"through_sequence": 4}
    ]
    # The refused request, the summary call, then the compacted input, which the provider answered.
    turn_3 = read_provider_requests(long.stack.state_dir, session)[-3:]
    assert [request.fault for request in turn_3] == ["context_length", None, None], turn_3
    [answered] = long.stack.invocations.model_calls(session, "turn-3")
    header = f"user: {CONTEXT_SUMMARY_HEADER}\n\n{summary_text}"
    assert list(answered.model_input) == [header, f"user: {question(3)}"]


async def test_a_planning_turn_offers_only_write_todos_and_its_plan_is_shown_after_the_summary(
    long: Long,
) -> None:
    """Plan mode through Pydantic AI's agent loop, with the session compacting later turns.

    Turn 1 plans, turn 2 carries the approved plan out, and turns 2 and 3 are long enough that turn 4
    compacts: its model input is the summary, then the plan note, then its question. (Matrix item 22 kills
    the Worker during a planning model call of this runner.)
    """
    session = long.stack.new_session_id("plan")
    sessions = long.planning
    draft = ScriptedToolCall(
        WRITE_TODOS, {"todos": [{"content": "Look up A-1", "status": "pending"}]}, "todos-1"
    )
    early_read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-early")
    long_answer = "".ljust(1800, ".")
    long.stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(text="My plan.", tool_calls=(draft, early_read)),
                ScriptedResponse(text="Review the plan, please."),
            ],
            [ScriptedResponse(text="Executed: " + long_answer)],
            [ScriptedResponse(text="Three: " + long_answer)],
            [ScriptedResponse(text="Four.")],
        ],
    )
    long.stack.scripts.set_summaries(session, {"turn-4": ScriptedResponse(text="Planned and executed.")})
    await sessions.start_session(session)
    assert await sessions.send_user_message(session, "Plan the refund of A-1", plan_mode=True)
    planned = await wait_for_turn_end(sessions, session, 1)

    assert planned.state is not None and planned.state.interaction_mode is InteractionMode.PLANNING
    assert planned.plan is not None and (planned.plan.revision, planned.plan.status) == (1, PlanStatus.DRAFT)
    first, second = long.stack.invocations.model_calls(session, "turn-1")
    assert [call.offered_tools for call in (first, second)] == [(WRITE_TODOS,)] * 2
    assert list(first.model_input) == [
        "user: [Dex] There is no plan yet.\nThis turn only plans: write or revise the plan with write_todos, "
        "and do not do or claim any of its tasks. The user reviews the plan before it runs.",
        "user: Plan the refund of A-1",
    ]
    assert PLANNING_TURN_REJECTION_MESSAGE in second.model_input_text
    assert not long.stack.invocations.tool_calls(session), "a planning turn runs no tool"
    # The note is shown, never stored.
    assert not [message for message in planned.messages if "There is no plan yet" in (message.text or "")]

    assert await sessions.execute_plan(session, 1)
    executed = await wait_for_turn_end(sessions, session, 2)
    [executing] = long.stack.invocations.model_calls(session, "turn-2")
    assert "lookup_order" in executing.offered_tools and WRITE_TODOS in executing.offered_tools
    plan_note = "user: [Dex] The current plan, revision 1, is active:\n- [pending] Look up A-1"
    assert executing.model_input[-2:] == (
        plan_note,
        "user: [Dex] The user approved plan revision 1. Execute it and keep the task statuses current with "
        "write_todos.",
    )
    assert executed.plan is not None and executed.plan.status is PlanStatus.ACTIVE

    assert await sessions.send_user_message(session, "Three?")
    await wait_for_turn_end(sessions, session, 3)
    assert await sessions.send_user_message(session, "Four?")
    done = await wait_for_turn_end(sessions, session, 4)

    assert done.state is not None and done.state.last_turn_error is None
    assert done.context_summary is not None and done.context_summary.text == "Planned and executed."
    [fourth] = long.stack.invocations.model_calls(session, "turn-4")
    assert list(fourth.model_input) == [
        f"user: {CONTEXT_SUMMARY_HEADER}\n\nPlanned and executed.",
        plan_note,
        "user: Four?",
    ]
