"""ADK specifics through a whole session: devserver, Worker child, ADK's real agent loop, scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from dex_agents import (
    AgentEventType,
    AgentInterrupt,
    AgentSessionClient,
    AgentSessionStatus,
    AgentSnapshot,
    InterruptKind,
    MessageRole,
    ToolCallStatus,
)
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    recorded_usage,
    run_mcp_inventory_scenario,
    stored_calls_without_result,
    wait_for_agent_snapshot,
    wait_until,
)
from dex_agents.testing.genai_conventions import (
    CONVENTIONS_COMMIT,
    attribute_table,
    conventions_problems,
    load_conventions,
)
from dex_agents.testing.matrix import wait_for_turn_end
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, ExportedSpan, read_exported_spans

from dex_agents_google_adk import AGENT_TRANSFER_EVENT_TYPE
from tests.matrix_spec import PACKAGE_DIR
from tests.specifics_agents import (
    MODEL_CLIENT_SPAN,
    TRACED_INSTRUCTION,
    TRACED_MAX_TOKENS,
    TRACED_TEMPERATURE,
    TRANSFER_CALL_ID,
    build_flows,
    export_jobs,
    mcp_log_path,
    refund_ledger,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Session:
    stack: AgentTestStack
    plain: AgentSessionClient
    pipeline: AgentSessionClient
    transfer: AgentSessionClient
    structured: AgentSessionClient
    inventory: AgentSessionClient
    settings: AgentSessionClient
    tool_requests: AgentSessionClient
    traced: AgentSessionClient
    span_file: Path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    flows = build_flows()
    state_dir = tmp_path_factory.mktemp("specifics")
    span_file = state_dir / "spans.jsonl"
    async with AgentTestStack(
        state_dir,
        flows.all,
        "tests.specifics_worker",
        worker_cwd=PACKAGE_DIR,
        worker_env={SPAN_FILE_ENV: str(span_file)},
    ) as stack:
        await stack.start_worker()
        yield Session(stack, *(stack.sessions(flow) for flow in flows.all), span_file=span_file)


async def test_adks_confirmation_is_a_durable_approval_and_the_rejection_text_reaches_the_model(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("confirm")
    purge = ScriptedToolCall("purge_order", {"order_id": "A-1"}, "purge-1")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [[ScriptedResponse(tool_calls=(purge, read)), ScriptedResponse(text="I left A-1 alone.")]],
    )
    await session.plain.start_session(session_id, "Purge A-1")

    def approval_pending_and_read_done(snapshot: AgentSnapshot) -> AgentInterrupt | None:
        read_done = any(
            record.tool_call_id == "read-1" and record.status is ToolCallStatus.SUCCEEDED
            for record in snapshot.tool_calls
        )
        return next(iter(snapshot.pending_interrupts), None) if read_done else None

    # The read runs in parallel with the wait, so the Worker is killed only once the read has finished:
    # a read killed midway would rightly run again.
    interrupt = await wait_for_agent_snapshot(
        session.plain, session_id, approval_pending_and_read_done, description="the purge's approval"
    )
    assert interrupt.tool_call_id == "purge-1", "only the call ADK confirms waits; the read runs"
    session.stack.kill_workers()
    await session.stack.start_worker()
    assert await session.plain.resolve_interrupt(
        session_id, interrupt.interrupt_id, approved=False, rejection_message="Purging is for admins only."
    )
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert not session.stack.invocations.tool_calls(session_id, "purge_order")
    assert len(session.stack.invocations.tool_calls(session_id, "lookup_order")) == 1
    seen = session.stack.invocations.model_calls(session_id)[-1].model_input_text
    assert 'tool purge_order [purge-1]: {"error":"Purging is for admins only."}' in seen
    assert "This tool call is rejected." not in seen, "ADK's fixed rejection text replaced the user's"


async def test_text_streams_as_deltas_of_each_model_call_and_usage_is_per_call(session: Session) -> None:
    session_id = session.stack.new_session_id("streaming")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me check order A-1.", tool_calls=(read,), input_tokens=40),
                ScriptedResponse(text="A-1 shipped.", input_tokens=60, output_tokens=7),
            ]
        ],
    )
    await session.plain.start_session(session_id, "Where is A-1?")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)
    events = await read_agent_events(session.plain, session_id)

    # As a UI does: group live text by model Step and keep only the highest attempt of each.
    deltas = [event for event in events if event.type == AgentEventType.TEXT_DELTA]
    last_attempt: dict[str, int] = {}
    for event in deltas:
        last_attempt[event.step_execution_id] = max(
            last_attempt.get(event.step_execution_id, 0), event.attempt
        )
    text_by_model_call: dict[str, list[str]] = {}
    for event in deltas:
        if event.attempt == last_attempt[event.step_execution_id]:
            text_by_model_call.setdefault(event.step_execution_id, []).append(
                json.loads(event.payload)["text"]
            )
    assert ["".join(chunks) for chunks in text_by_model_call.values()] == [
        "Let me check order A-1.",
        "A-1 shipped.",
    ]
    assert all(len(chunks) > 1 for chunks in text_by_model_call.values()), (
        "the text arrives in several SSE chunks, not once at the end"
    )
    assistant_texts = [
        message.text
        for message in snapshot.messages
        if message.role is MessageRole.ASSISTANT and message.text
    ]
    assert assistant_texts == ["Let me check order A-1.", "A-1 shipped."]
    recorded = recorded_usage(events)
    assert [(usage["model_calls"], usage["input_tokens"]) for usage in recorded] == [(1, 40), (1, 60)]
    assert snapshot.usage.input_tokens == 100 and snapshot.usage.output_tokens == 12


async def test_a_transfer_hands_the_turn_to_the_sub_agent_which_keeps_it_across_a_worker_kill(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("transfer")
    transfer = ScriptedToolCall("transfer_to_agent", {"agent_name": "billing"}, TRANSFER_CALL_ID)
    purge = ScriptedToolCall("purge_order", {"order_id": "A-1"}, "purge-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Billing will help.", tool_calls=(transfer,)),
                ScriptedResponse(tool_calls=(purge,)),
                ScriptedResponse(text="A-1 is purged."),
            ],
            [ScriptedResponse(text="You are welcome.")],
        ],
    )
    await session.transfer.start_session(session_id, "Purge A-1")
    interrupt = await wait_for_agent_snapshot(
        session.transfer,
        session_id,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        description="the billing agent's purge approval",
    )
    assert interrupt.tool_call_id == "purge-1"
    # The Worker that ran the transfer is gone; the run state says billing holds the turn.
    session.stack.kill_workers()
    await session.stack.start_worker()
    assert await session.transfer.resolve_interrupt(session_id, interrupt.interrupt_id, approved=True)
    await wait_for_turn_end(session.transfer, session_id, 1)
    await session.transfer.send_user_message(session_id, "Thanks")
    done = await wait_for_turn_end(session.transfer, session_id, 2)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    calls = session.stack.invocations.model_calls(session_id)
    # Front desk, billing, billing after the kill, then billing again: ADK keeps the transferred agent.
    offers_purge = ["purge_order" in call.offered_tools for call in calls]
    assert offers_purge == [False, True, True, True], [call.offered_tools for call in calls]
    assert [call.attempt for call in calls] == [1, 1, 1, 1], "each model call once, in its own Step"
    page = await session.transfer.list_agent_messages(session_id, include_framework_items=True)
    authors = [
        (message.role, json.loads(message.framework_item)["author"])
        for message in page.messages
        if message.role is not MessageRole.USER
    ]
    assert authors == [
        (MessageRole.ASSISTANT, "front_desk"),
        (MessageRole.ASSISTANT, "front_desk"),
        (MessageRole.TOOL, "front_desk"),
        (MessageRole.ASSISTANT, "billing"),
        (MessageRole.TOOL, "billing"),
        (MessageRole.ASSISTANT, "billing"),
        (MessageRole.ASSISTANT, "billing"),
    ], "each stored message names the agent that spoke (ADK's event author)"
    transfers = [
        json.loads(event.payload)
        for event in await read_agent_events(session.transfer, session_id)
        if event.type == AGENT_TRANSFER_EVENT_TYPE
    ]
    assert transfers == [{"source_agent": "front_desk", "target_agent": "billing"}]
    assert stored_calls_without_result(done.messages) == []


async def test_a_second_model_call_in_one_step_fails_the_turn_without_a_retry(session: Session) -> None:
    session_id = session.stack.new_session_id("pipeline")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(text="Draft."), ScriptedResponse(text="Reviewed.")]]
    )
    await session.pipeline.start_session(session_id, "Write a note")
    snapshot = await wait_for_turn_end(session.pipeline, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is not None
    assert "second model call" in snapshot.state.last_turn_error
    [call] = session.stack.invocations.model_calls(session_id)
    assert call.attempt == 1, "a deterministic failure is not retried"


async def test_a_prompt_the_provider_blocks_fails_the_turn_without_a_retry(session: Session) -> None:
    session_id = session.stack.new_session_id("blocked")
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(turn_error="The prompt asks for prohibited content.")]]
    )
    await session.plain.start_session(session_id, "Something prohibited")
    snapshot = await wait_for_turn_end(session.plain, session_id, 1)

    assert snapshot.state is not None and snapshot.state.last_turn_error is not None
    assert (
        "the model provider blocked the prompt (PROHIBITED_CONTENT): The prompt asks for prohibited content."
        in snapshot.state.last_turn_error
    )
    [call] = session.stack.invocations.model_calls(session_id)
    assert call.attempt == 1, "a blocked prompt is blocked again on every attempt, so it is not retried"


async def test_a_structured_answer_ends_the_turn_without_an_approval_for_adks_own_tool(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("structured")
    answer = {"order_id": "A-1", "status": "shipped"}
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(tool_calls=(read,)),
                ScriptedResponse(tool_calls=(ScriptedToolCall("set_model_response", answer, "answer-1"),)),
            ]
        ],
    )
    await session.structured.start_session(session_id, "Where is A-1?")

    def ended_or_waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        state = snapshot.state
        ended = (
            state is not None
            and state.turn_count >= 1
            and state.status is AgentSessionStatus.WAITING_FOR_USER_MESSAGE
        )
        return snapshot if ended or snapshot.pending_interrupts else None

    snapshot = await wait_for_agent_snapshot(
        session.structured, session_id, ended_or_waiting, description="the turn to end or wait"
    )

    assert not snapshot.pending_interrupts, "ADK's own set_model_response waits for no approval"
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert len(session.stack.invocations.tool_calls(session_id, "lookup_order")) == 1
    tool_messages = [message for message in snapshot.messages if message.role is MessageRole.TOOL]
    assert [message.tool_name for message in tool_messages] == ["lookup_order", "set_model_response"]
    assert snapshot.messages[-1].role is MessageRole.ASSISTANT
    assert snapshot.messages[-1].text is not None and json.loads(snapshot.messages[-1].text) == answer
    assert len(session.stack.invocations.model_calls(session_id)) == 2


async def test_a_turn_cancelled_during_a_model_call_keeps_the_split_response_and_every_result(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("cancel")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", output="A-1 shipped on Monday")
    purge = ScriptedToolCall("purge_order", {"order_id": "A-1"}, "purge-1")
    session.stack.scripts.set_turns(
        session_id,
        [
            [
                ScriptedResponse(text="Let me look A-1 up, then purge it.", tool_calls=(read, purge)),
                ScriptedResponse(text="Never said.", block_until_cancelled=True),
            ],
            [ScriptedResponse(text="A-1 shipped on Monday; I did not purge it.")],
        ],
    )
    await session.plain.start_session(session_id, "Where is A-1? Then purge it.")
    interrupt = await wait_for_agent_snapshot(
        session.plain,
        session_id,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        description="the purge's approval",
    )
    assert await session.plain.resolve_interrupt(
        session_id, interrupt.interrupt_id, approved=False, rejection_message="Only admins purge."
    )
    await wait_until(
        "the second model call to start", lambda: len(session.stack.invocations.model_calls(session_id)) == 2
    )
    assert await session.plain.cancel_turn(session_id, "turn-1")
    cancelled = await wait_for_turn_end(session.plain, session_id, 1)

    await wait_until(
        "ADK's model call to be cancelled",
        lambda: session.stack.invocations.cancelled_model_calls(session_id, "turn-1"),
    )
    assert cancelled.state is not None and cancelled.state.last_turn_error is None
    # The paused invocation's response, in the shared projection, with a result for each of its calls.
    assert [(m.role, m.text or None, m.tool_call_id) for m in cancelled.messages] == [
        (MessageRole.USER, "Where is A-1? Then purge it.", None),
        (MessageRole.ASSISTANT, "Let me look A-1 up, then purge it.", None),
        (MessageRole.ASSISTANT, None, "read-1"),
        (MessageRole.ASSISTANT, None, "purge-1"),
        (MessageRole.TOOL, None, "read-1"),
        (MessageRole.TOOL, None, "purge-1"),
    ]
    assert stored_calls_without_result(cancelled.messages) == []
    events = await read_agent_events(session.plain, session_id)
    assert [event.type for event in events].count(AgentEventType.TURN_CANCELLED) == 1

    assert await session.plain.send_user_message(session_id, "Did you purge it?")
    done = await wait_for_turn_end(session.plain, session_id, 2)
    assert done.messages[-1].text == "A-1 shipped on Monday; I did not purge it."
    seen = session.stack.invocations.model_calls(session_id, "turn-2")[0].model_input_text
    for expected in (
        "assistant: Let me look A-1 up, then purge it.",
        'tool lookup_order [read-1]: {"result":"A-1 shipped on Monday"}',
        'tool purge_order [purge-1]: {"error":"Only admins purge."}',
    ):
        assert expected in seen, (expected, seen)
    assert not session.stack.invocations.tool_calls(session_id, "purge_order")


async def test_mcp_tools_run_one_tools_call_per_tool_step_with_effects_from_annotations(
    session: Session,
) -> None:
    # The shared scenario asserts the effects, the approvals of set_stock (trusted, destructive) and
    # order_more (unclassified), one tools/call per tool Step beside any tools/list, and the Step shape.
    session_id = session.stack.new_session_id("mcp")
    log = mcp_log_path(session.stack.state_dir)

    run = await run_mcp_inventory_scenario(session.inventory, session.stack, session_id, log)

    assert run.snapshot.messages[-1].text == "Stock updated."


async def test_update_session_settings_changes_the_next_turns_model_and_instructions(
    session: Session,
) -> None:
    session_id = session.stack.new_session_id("settings")
    await session.settings.start_session(
        session_id, "Where is A-1?", session_settings={"model": "small-model", "tone": "brief"}
    )
    first = await wait_for_turn_end(session.settings, session_id, 1)
    assert first.messages[-1].text is not None
    assert first.messages[-1].text.startswith("small-model read: "), first.messages[-1].text
    assert "You handle orders." in first.messages[-1].text, "the agent's own instructions stay"
    assert first.messages[-1].text.endswith("Answer in a brief tone."), first.messages[-1].text

    assert await session.settings.update_session_settings(session_id, {"model": "large-model"})
    assert await session.settings.send_user_message(session_id, "And A-2?")
    second = await wait_for_turn_end(session.settings, session_id, 2)
    assert second.messages[-1].text is not None
    assert second.messages[-1].text.startswith("large-model read: "), second.messages[-1].text
    assert "tone" not in second.messages[-1].text, "the new settings add no instructions"

    # A setting the hook cannot use ends that turn with an error naming it, without a retry.
    assert await session.settings.update_session_settings(session_id, {"model": 42})
    assert await session.settings.send_user_message(session_id, "And A-3?")
    failed = await wait_for_turn_end(session.settings, session_id, 3)
    assert failed.state is not None and failed.state.last_turn_error is not None
    assert (
        "the session settings chose no usable model or instructions: ValueError: the setting 'model' "
        "must be a model name, not 42" in failed.state.last_turn_error
    ), failed.state.last_turn_error

    # The session goes on: without settings, the agent's own model answers.
    assert await session.settings.update_session_settings(session_id, {})
    assert await session.settings.send_user_message(session_id, "And A-4?")
    fourth = await wait_for_turn_end(session.settings, session_id, 4)
    assert fourth.state is not None and fourth.state.last_turn_error is None, fourth.state
    assert fourth.messages[-1].text is not None and fourth.messages[-1].text.startswith("house-model read: ")


def _one_call_then(session: Session, prefix: str, call: ScriptedToolCall, answer: str) -> str:
    """A new session ID whose script makes ``call``, then answers ``answer``."""
    session_id = session.stack.new_session_id(prefix)
    session.stack.scripts.set_turns(
        session_id, [[ScriptedResponse(tool_calls=(call,)), ScriptedResponse(text=answer)]]
    )
    return session_id


async def test_a_tool_that_asks_before_it_takes_effect_runs_once_with_the_answer(session: Session) -> None:
    refund = ScriptedToolCall("refund_to_warehouse", {"order_id": "A-1"}, "refund-1")
    session_id = _one_call_then(session, "ask", refund, "Refunded via Lyon.")
    await session.tool_requests.start_session(session_id, "Refund A-1")
    interrupt = await wait_for_agent_snapshot(
        session.tool_requests,
        session_id,
        lambda snapshot: next(iter(snapshot.pending_interrupts), None),
        description="the tool's question",
    )
    assert (interrupt.kind, interrupt.interrupt_id, interrupt.question, interrupt.choices) == (
        InterruptKind.QUESTION,
        "refund-1-input-1",
        "Which warehouse takes the return?",
        ("Berlin", "Lyon"),
    )
    ledger = refund_ledger(session.stack.state_dir)
    assert not ledger.exists(), "the tool asked before it took effect"
    assert not await session.tool_requests.answer_question(session_id, interrupt.interrupt_id, "Paris")
    assert await session.tool_requests.answer_question(session_id, interrupt.interrupt_id, "Lyon")
    done = await wait_for_turn_end(session.tool_requests, session_id, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    [entry] = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert (entry["order_id"], entry["warehouse"], entry["key"]) == (
        "A-1",
        "Lyon",
        f"{session_id}/turn-1/refund-1",
    )
    assert entry["thread"].startswith("adk_tool_executor"), "the synchronous tool ran on ADK's thread pool"
    tool_results = [message.tool_output for message in done.messages if message.role is MessageRole.TOOL]
    assert tool_results == ["refunded A-1 through Lyon"]
    model_input = session.stack.invocations.model_calls(session_id)[-1].model_input_text
    assert '{"result":"refunded A-1 through Lyon"}' in model_input, model_input
    steps = executed_step_types(await session.stack.read_step_history(session_id))
    assert steps.count("CallSingleAttemptTool") == 2 and "AwaitQuestionAnswer" in steps, steps


async def test_a_tool_that_starts_a_task_is_polled_by_its_handler_until_the_task_finishes(
    session: Session,
) -> None:
    export = ScriptedToolCall("export_orders", {"month": "2026-11"}, "export-1")
    session_id = _one_call_then(session, "task", export, "The export is ready.")
    await session.tool_requests.start_session(session_id, "Export November")
    done = await wait_for_turn_end(session.tool_requests, session_id, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    outputs = {m.tool_call_id: m.tool_output for m in done.messages if m.role is MessageRole.TOOL}
    assert outputs == {"export-1": "export of 2026-11 ready after 2 polls"}, outputs
    [job] = export_jobs(session.stack.state_dir).iterdir()
    assert json.loads(job.read_text()) == {"month": "2026-11", "polls": 2}, "one job started, polled twice"
    history = await session.stack.read_step_history(session_id)
    steps = executed_step_types(history)
    assert steps.count("PollToolTask") == 2 and steps.count("CallTool") == 1, steps
    events = await read_agent_events(session.tool_requests, session_id)
    started = [json.loads(e.payload) for e in events if e.type == AgentEventType.TOOL_TASK_STARTED]
    assert [(item["tool_call_id"], item["task_id"]) for item in started] == [("export-1", job.stem)]
    model_input = session.stack.invocations.model_calls(session_id)[-1].model_input_text
    assert "export of 2026-11 ready after 2 polls" in model_input, model_input


async def test_a_traced_sessions_chat_spans_carry_adks_model_call_metadata_and_no_adk_spans(
    session: Session,
) -> None:
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1")
    session_id = _one_call_then(session, "traced", read, "A-1 shipped.")
    await session.traced.start_session(session_id, "Where is A-1?")
    done = await wait_for_turn_end(session.traced, session_id, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state

    def spans_of_the_turn() -> list[ExportedSpan] | None:
        spans = read_exported_spans(session.span_file, session_id)
        return spans if sum(span.name.startswith("chat") for span in spans) == 2 else None

    await wait_until("both chat spans", spans_of_the_turn)
    spans = read_exported_spans(session.span_file, session_id)
    chats = [span for span in spans if span.name.startswith("chat")]
    # The final answer's stored event is ADK's response event; its interaction ID is the response ID.
    stored = await session.traced.list_agent_messages(session_id, include_framework_items=True)
    final_event = json.loads(stored.messages[-1].framework_item)
    for chat in chats:
        assert (chat.name, chat.kind) == ("chat dex-scripted", "CLIENT"), chat
        assert chat.attribute("gen_ai.request.model") == "dex-scripted"
        assert chat.attribute("gen_ai.response.model") == "dex-scripted"
        assert chat.attribute("gen_ai.provider.name") == "dex.scripted"
        assert chat.attribute("gen_ai.response.finish_reasons") == ["stop"]
    assert [chat.attribute("gen_ai.response.id") for chat in chats][-1] == final_event["interaction_id"]
    assert len({chat.attribute("gen_ai.response.id") for chat in chats}) == 2
    # The tool's span says what it does: the whole docstring, as ADK's `FunctionTool` offers it to the model.
    [execution] = [span for span in spans if span.attribute("gen_ai.operation.name") == "execute_tool"]
    assert execution.attribute("gen_ai.tool.description") == (
        "Look up an order's status (a read: retried freely).\n\n"
        "Args:\n    order_id: The order to look up.\n\nReturns:\n    The order's status."
    )
    conventions = load_conventions()
    print(f"\nGoogle ADK, GenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, spans))
    # The runner's default run config streams every model call (StreamingMode.SSE).
    assert conventions_problems(conventions, spans, lambda span: span in chats) == []
    for chat in chats:
        # The request's GenerateContentConfig, and the streamed call's first response.
        assert chat.attribute("gen_ai.request.temperature") == TRACED_TEMPERATURE
        assert chat.attribute("gen_ai.request.max_tokens") == TRACED_MAX_TOKENS
        assert chat.attribute("gen_ai.request.stream") is True
        assert float(str(chat.attribute("gen_ai.response.time_to_first_chunk"))) >= 0
        instructions = json.loads(str(chat.attribute("gen_ai.system_instructions")))
        assert TRACED_INSTRUCTION in instructions[0]["content"]
        offered = json.loads(str(chat.attribute("gen_ai.tool.definitions")))
        assert "lookup_order" in {tool["name"] for tool in offered}
    asks, answers = chats
    lookup = {"type": "tool_call", "id": "read-1", "name": "lookup_order", "arguments": {"order_id": "A-1"}}
    assert [part for message in _content(asks, "output") for part in message["parts"]] == [lookup]
    # The answering call received the lookup's result and produced only the answer.
    received = _content(answers, "input")
    assert received[0] == {"role": "user", "parts": [{"type": "text", "content": "Where is A-1?"}]}
    parts = [part for message in received[1:] for part in message["parts"]]
    assert parts[0] == lookup
    assert [(part["type"], part["id"]) for part in parts[1:]] == [("tool_call_response", "read-1")]
    assert [part for message in _content(answers, "output") for part in message["parts"]] == [
        {"type": "text", "content": "A-1 shipped."}
    ]

    # With ADK's spans off, the session's traces hold only Dex's spans and the spans the model's client
    # starts, which join the activation's root instead of losing their parent.
    traces = {span.trace_id for span in spans}
    everything = [span for span in read_exported_spans(session.span_file) if span.trace_id in traces]
    by_id = {span.span_id: span for span in everything}
    client_spans = [span for span in everything if span.name == MODEL_CLIENT_SPAN]
    assert len(client_spans) == 2
    for span in client_spans:
        parent = by_id.get(span.parent_span_id or "")
        assert parent is not None and parent.name == "invoke_agent orders", span
        assert parent.attribute("dex.flow.id") == session_id
    others = [span for span in everything if span.name != MODEL_CLIENT_SPAN]
    assert all(span.attribute("dex.flow.id") == session_id for span in others), [s.name for s in others]
    assert sorted(span.name for span in others) == [
        "chat dex-scripted",
        "chat dex-scripted",
        "execute_tool lookup_order",
        "invoke_agent orders",
    ]


def _content(span: ExportedSpan, direction: str) -> list[dict[str, Any]]:
    """A chat span's recorded ``gen_ai.input.messages`` or ``gen_ai.output.messages``."""
    return json.loads(str(span.attribute(f"gen_ai.{direction}.messages")))
