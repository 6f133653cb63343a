"""Stepwise in real sessions: a devserver, a Worker child, and LiteLLM's real code path.

Continuations up to their limit; compaction past the trigger ratio (each turn stores a question and a
1,000-character answer, 253 tokens at 4 characters a token, so turn 5's input passes 85 % of the 1,000-token
window); and an MCP server's tools through `McpToolSource`, each call its own Step.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from dex_agents import (
    CONTEXT_SUMMARY_HEADER,
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSnapshot,
    MessageRole,
    ToolEffect,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from tests.stepwise_agents import (
    ANSWER_INSTRUCTIONS,
    CORE_DIR,
    KEEP_GOING,
    SUMMARY_INSTRUCTIONS,
    build_builderless_flow,
    build_compacting_flow,
    build_continuation_flow,
    build_mcp_flow,
    stepwise_mcp_log,
)

FLOW = build_continuation_flow()
BUILDERLESS = build_builderless_flow()
COMPACTING = build_compacting_flow()


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stepwise")


@pytest.fixture(scope="module")
def mcp_flow(state_dir: Path) -> AgentSessionFlow:
    return build_mcp_flow(state_dir)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(state_dir: Path, mcp_flow: AgentSessionFlow) -> AsyncIterator[AgentTestStack]:
    async with AgentTestStack(
        state_dir,
        [FLOW, BUILDERLESS, COMPACTING, mcp_flow],
        "tests.stepwise_worker",
        worker_cwd=CORE_DIR,
    ) as stack:
        await stack.start_worker()
        yield stack


@pytest.fixture
def sessions(stack: AgentTestStack) -> AgentSessionClient:
    return stack.sessions(FLOW)


@pytest.mark.asyncio(loop_scope="module")
async def test_nine_continuations_in_a_row_fail_the_turn_and_the_session_goes_on(
    stack: AgentTestStack, sessions: AgentSessionClient
) -> None:
    session = stack.new_session_id("restless")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(text="Draft one.")], [ScriptedResponse(text="All done.")]]
    )
    await sessions.start_session(session, "Write a haiku")

    failed = await wait_for_turn_end(sessions, session, 1)

    assert failed.state is not None
    assert failed.state.last_turn_error == (
        "decide_turn_continuation asked for more than 8 continuations in a row, so the turn ended"
    )
    # Each continuation stored its answer and its user message; the ninth answer is kept with the failure.
    assert [(message.role, message.text) for message in failed.messages] == [
        (MessageRole.USER, "Write a haiku"),
        *[(MessageRole.ASSISTANT, "Draft one."), (MessageRole.USER, KEEP_GOING)] * 8,
        (MessageRole.ASSISTANT, "Draft one."),
    ]
    assert failed.usage.model_calls == 9
    history = await stack.read_step_history(session)
    assert executed_step_types(history) == ["StartAgentSession", *["RunModel"] * 9]
    calls = stack.invocations.model_calls(session, "turn-1")
    assert len({call.step_execution_id for call in calls}) == 9
    assert calls[1].model_input[-2:] == ("assistant: Draft one.", f"user: {KEEP_GOING}")
    events = await read_agent_events(sessions, session)
    turn_ends = [
        (event.type, json.loads(event.payload)) for event in events if event.type.startswith("turn_")
    ]
    assert [kind for kind, _ in turn_ends] == [AgentEventType.TURN_STARTED, AgentEventType.TURN_FAILED]

    assert await sessions.send_user_message(session, "Thanks, that is enough.")
    done = await wait_for_turn_end(sessions, session, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "All done."
    # The next turn's model reads the failed turn's whole transcript.
    assert calls[-1].model_input[-1] == f"user: {KEEP_GOING}"
    assert "assistant: Draft one." in stack.invocations.model_calls(session, "turn-2")[0].model_input_text


@pytest.mark.asyncio(loop_scope="module")
async def test_a_continuation_from_a_runner_without_unfinished_turn_messages_fails_the_turn_at_once(
    stack: AgentTestStack,
) -> None:
    sessions = stack.sessions(BUILDERLESS)
    session = stack.new_session_id("builderless")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(text="Draft one.")], [ScriptedResponse(text="All done.")]]
    )
    await sessions.start_session(session, "Write a haiku")

    failed = await wait_for_turn_end(sessions, session, 1)

    assert failed.state is not None and failed.state.last_turn_error == (
        "a runner that sets TurnContinued.new_messages must implement build_unfinished_turn_messages"
    )
    # Nothing of the continuation is stored, and the failure is not retried.
    assert [message.text for message in failed.messages] == ["Write a haiku"]
    assert executed_step_types(await stack.read_step_history(session)) == ["StartAgentSession", "RunModel"]
    assert len(stack.invocations.model_calls(session, "turn-1")) == 1
    assert await sessions.send_user_message(session, "Just finish it.")
    done = await wait_for_turn_end(sessions, session, 2)
    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "All done."


def question(number: int) -> str:
    return f"Question {number}?"


def answer(number: int) -> str:
    return f"Answer {number}: ".ljust(1000, ".")


def transcript(numbers: range) -> list[str]:
    return [line for n in numbers for line in (f"user: {question(n)}", f"assistant: {answer(n)}")]


@pytest.mark.asyncio(loop_scope="module")
async def test_a_session_past_the_trigger_compacts_once_then_the_model_input_starts_with_the_summary(
    stack: AgentTestStack,
) -> None:
    sessions = stack.sessions(COMPACTING)
    session = stack.new_session_id("compact")
    stack.scripts.set_turns(session, [[ScriptedResponse(text=answer(n))] for n in range(1, 7)])
    summary_text = "The user asked questions 1 to 3; each was answered."
    stack.scripts.set_summaries(session, {"turn-5": ScriptedResponse(text=summary_text, input_tokens=40)})

    await sessions.start_session(session, question(1))
    for number in range(1, 7):
        if number > 1:
            assert await sessions.send_user_message(session, question(number))
        snapshot = await wait_for_turn_end(sessions, session, number)
        assert snapshot.state is not None and snapshot.state.last_turn_error is None

    # Turn 5's input (1,019 tokens) passed 850; keeping 30 % of the window (300 tokens) keeps turn 4 and the
    # question, so the turn's model summarized through turn 3's answer, sequence 6, in one LiteLLM call.
    summaries = stack.invocations.summary_calls(session)
    assert [(call.turn_id, call.attempt) for call in summaries] == [("turn-5", 1)]
    assert list(summaries[0].model_input) == [
        f"system: {SUMMARY_INSTRUCTIONS}",
        "user: " + "\n".join(["The conversation:", *transcript(range(1, 4))]),
    ]
    header = f"user: {CONTEXT_SUMMARY_HEADER}\n\n{summary_text}"
    fifth = stack.invocations.model_calls(session, "turn-5")
    assert [list(call.model_input) for call in fifth] == [
        [f"system: {ANSWER_INSTRUCTIONS}", header, *transcript(range(4, 5)), f"user: {question(5)}"]
    ]
    sixth = stack.invocations.model_calls(session, "turn-6")
    assert [list(call.model_input) for call in sixth] == [
        [f"system: {ANSWER_INSTRUCTIONS}", header, *transcript(range(4, 6)), f"user: {question(6)}"]
    ]
    history = await stack.read_step_history(session)
    compactions = [
        entry.step_input
        for entry in history
        if entry.step_type == "CompactContext" and entry.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert compactions == [{"through_sequence": 6}]

    done = await sessions.get_agent_snapshot(session)
    assert done.context_summary is not None
    assert (done.context_summary.generation, done.context_summary.last_sequence) == (1, 6)
    assert done.context_summary.text == summary_text
    # Six answers and the summary call, whose scripted usage is recorded with the session's.
    per_answer = ScriptedResponse().input_tokens
    assert (done.usage.model_calls, done.usage.input_tokens) == (7, 6 * per_answer + 40)
    events = await read_agent_events(sessions, session)
    assert [
        (event.type, json.loads(event.payload))
        for event in events
        if event.type in (AgentEventType.COMPACTION_STARTED, AgentEventType.COMPACTION_FINISHED)
    ] == [
        (AgentEventType.COMPACTION_STARTED, {"through_sequence": 6}),
        (AgentEventType.COMPACTION_FINISHED, {"generation": 1, "through_sequence": 6}),
    ]
    # Retention deleted the chunks behind the summary, keeping at least four messages after them.
    page = await sessions.list_agent_messages(session, limit=50)
    assert page.deleted_before_sequence == 7
    assert [message.sequence for message in page.messages] == list(range(7, 13))
    assert page.messages[-1].text == answer(6)


@pytest.mark.asyncio(loop_scope="module")
async def test_mcp_tools_run_as_steps_a_read_and_an_approved_write_with_the_idempotency_key_in_meta(
    stack: AgentTestStack, mcp_flow: AgentSessionFlow
) -> None:
    sessions = stack.sessions(mcp_flow)
    log = stepwise_mcp_log(stack.state_dir)
    session = stack.new_session_id("mcp")
    calls = (
        ScriptedToolCall("inventory__count_items", {"sku": "A-1"}, "count-1"),
        ScriptedToolCall("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1"),
    )
    stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Reserved 2 of A-1.")]]
    )
    await sessions.start_session(session, "How many A-1 are there? Reserve 2.")

    def waiting_for_approval(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        final = {call.tool_call_id for call in snapshot.tool_calls if call.is_final}
        return snapshot if snapshot.pending_interrupts and final == {"count-1"} else None

    waiting = await wait_for_agent_snapshot(
        sessions, session, waiting_for_approval, description="the approval"
    )
    records = {call.tool_call_id: call for call in waiting.tool_calls}
    # The source deferred each call: the effect from the tool's annotation, the Worker's approval policy,
    # and the server and MCP tool name the tool Step calls without a listing.
    assert (records["count-1"].effect, records["count-1"].requires_approval) == (ToolEffect.READ, False)
    assert (records["reserve-1"].effect, records["reserve-1"].requires_approval) == (
        ToolEffect.IDEMPOTENT_WRITE,
        True,
    )
    assert json.loads(records["reserve-1"].tool_source_reference or "") == {
        "source": "mcp",
        "server": "inventory",
        "tool": "reserve_stock",
    }
    assert not any(line.startswith("tools/call reserve_stock") for line in log.read_text().splitlines())

    assert await sessions.resolve_interrupt(session, "reserve-1", approved=True)
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None
    assert done.messages[-1].text == "Reserved 2 of A-1."
    requests = [line for line in log.read_text().splitlines() if line.startswith("tools/call")]
    # The server reserved, then died before it answered; the retried CallTool sent the same key in _meta.
    key = f"{session}/turn-1/reserve-1"
    assert requests == ["tools/call count_items", *[f"tools/call reserve_stock A-1 {key}"] * 2]
    [second] = stack.invocations.model_calls(session, "turn-1")[1:]
    assert second.model_input[-2:] == (
        "tool inventory__count_items [count-1]: A-1: 7 in stock",
        "tool inventory__reserve_stock [reserve-1]: reserved 2 of A-1",
    )
    history = await stack.read_step_history(session)
    assert sorted(executed_step_types(history)) == sorted(
        [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "AwaitToolApproval",
            "CallTool",
            "ResumeTurn",
            "RunModel",
        ]
    )
    [reserve] = [
        entry
        for entry in history
        if entry.step_type == "CallTool"
        and entry.step_input == "reserve-1"
        and entry.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert reserve.final_attempt == 2
