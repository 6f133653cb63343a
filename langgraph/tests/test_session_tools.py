"""Whole sessions (devserver, Worker child, real agent loop): settings, tool questions and tasks, MCP, spans.

The turn's settings choose its model, a tool asks the user before it takes effect, a tool hands a task to
the session, an `McpToolSource`'s tools run as Steps (the idempotency key in `_meta`, an HTTP task polled
as Steps, the official server-memory's unhinted and destructive tools waiting for approval although its
annotations are trusted), and the `chat` spans carry the model call's metadata.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from dex_agents import AgentSessionClient, InterruptKind, MessageRole, ToolEffect, TurnOutcome
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    official_mcp_server_version,
    read_mcp_wire_log,
    start_mcp_inventory_http_server,
    wait_for_agent_snapshot,
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

from tests.matrix_spec import PACKAGE_DIR
from tests.session_tools_agents import (
    MAX_TOKENS,
    SHIPPING_URL_ENV,
    SYSTEM_PROMPT,
    TEMPERATURE,
    build_flows,
    mcp_log_path,
    memory_graph_path,
    memory_wire_log,
    tool_runs_path,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Sessions:
    stack: AgentTestStack
    settings: AgentSessionClient
    asking: AgentSessionClient
    mcp: AgentSessionClient
    span_file: Path

    def lines(self, path: Path, prefix: str) -> list[str]:
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        return [line for line in text.splitlines() if line.startswith(prefix)]

    def chat_spans(self, session_id: str) -> list[ExportedSpan]:
        spans = read_exported_spans(self.span_file, session_id)
        return [span for span in spans if span.attribute("gen_ai.operation.name") == "chat"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sessions]:
    state_dir = tmp_path_factory.mktemp("session-tools")
    span_file = state_dir / "spans.jsonl"
    async with await start_mcp_inventory_http_server(mcp_log_path(state_dir)) as shipping:
        flows = build_flows(state_dir, shipping.url)
        worker_env = {SHIPPING_URL_ENV: shipping.url, SPAN_FILE_ENV: str(span_file)}
        async with AgentTestStack(
            state_dir, flows, "tests.session_tools_worker", worker_cwd=PACKAGE_DIR, worker_env=worker_env
        ) as stack:
            await stack.start_worker()
            clients = [stack.sessions(flow) for flow in flows]
            yield Sessions(stack, *clients, span_file=span_file)


async def _response_models(client: AgentSessionClient, session: str) -> list[str]:
    """The model that wrote each stored answer, from the `AIMessage` each keeps in its framework item."""
    page = await client.list_agent_messages(session, include_framework_items=True)
    return [
        json.loads(message.framework_item)["data"]["response_metadata"]["model_name"]
        for message in page.messages
        if message.role is MessageRole.ASSISTANT
    ]


async def test_updated_session_settings_choose_the_next_turns_model_and_instructions(
    sessions: Sessions,
) -> None:
    stack, client = sessions.stack, sessions.settings
    session = stack.new_session_id("settings")
    answers = ["Small answer.", "Large answer.", "Never given.", "Default answer."]
    stack.scripts.set_turns(session, [[ScriptedResponse(text=answer)] for answer in answers])

    await client.start_session(session, "Hi", session_settings={"model": "small"})
    first = await client.wait_for_turn_end(session)
    assert await client.update_session_settings(session, {"model": "large", "tone": "formal"})
    assert await client.send_user_message(session, "Again")
    second = await client.wait_for_turn_end(session)

    assert (first.outcome, second.outcome) == (TurnOutcome.COMPLETED, TurnOutcome.COMPLETED)
    assert await _response_models(client, session) == ["scripted-small", "scripted-large"]
    calls = stack.invocations.model_calls(session)
    assert [call.model_input[0] for call in calls] == [
        "system: You handle orders.",
        "system: You handle orders.\n\nAnswer in a formal tone.",
    ]

    # Settings that choose no model end the next turn with a clear error, before any model call ...
    assert await client.update_session_settings(session, {"model": "huge"})
    assert await client.send_user_message(session, "Once more")
    failed = await client.wait_for_turn_end(session)
    assert failed.outcome is TurnOutcome.FAILED
    assert failed.error == "the session settings chose no usable model or instructions: KeyError: 'huge'"
    assert len(stack.invocations.model_calls(session)) == 2
    # ... and the session goes on once they are fixed: cleared settings keep the agent's own model.
    assert await client.update_session_settings(session, {})
    assert await client.send_user_message(session, "And now?")
    fixed = await client.wait_for_turn_end(session)
    assert fixed.outcome is TurnOutcome.COMPLETED
    assert (await _response_models(client, session))[-1] == "dex-scripted"
    # The failed turn's RunModel called the runner but no model: its chat span is INTERNAL, with no model.
    await wait_until("the four chat spans", lambda: len(sessions.chat_spans(session)) == 4)
    assert [(span.kind, span.attribute("gen_ai.request.model")) for span in sessions.chat_spans(session)] == [
        ("CLIENT", "scripted-small"),
        ("CLIENT", "scripted-large"),
        ("INTERNAL", None),
        ("CLIENT", "dex-scripted"),
    ]


async def test_a_tool_that_asks_before_it_takes_effect_runs_once_with_the_answer(sessions: Sessions) -> None:
    stack, client = sessions.stack, sessions.asking
    session = stack.new_session_id("ask")
    refund = ScriptedToolCall("refund_to_warehouse", {"order_id": "A-1"}, "refund-1")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=(refund,)), ScriptedResponse(text="Refunded via Lyon.")]]
    )

    await client.start_session(session, "Refund A-1")
    question = await client.wait_for_interrupt(session)

    assert question is not None and question.kind is InterruptKind.QUESTION
    assert (question.question, question.choices) == ("Which warehouse takes the return?", ("Berlin", "Lyon"))
    runs_path = tool_runs_path(stack.state_dir)
    assert sessions.lines(runs_path, "refund_to_warehouse") == [], "the tool stopped before its effect"
    assert not await client.answer_question(session, question.interrupt_id, "Paris"), "only the choices"
    assert await client.answer_question(session, question.interrupt_id, "Lyon")
    ended = await client.wait_for_turn_end(session)

    assert ended.outcome is TurnOutcome.COMPLETED
    assert sessions.lines(runs_path, "refund_to_warehouse") == [
        f"refund_to_warehouse A-1 Lyon {session}/turn-1/refund-1"
    ]
    [_, resumed] = stack.invocations.model_calls(session)
    assert (
        resumed.model_input[-1] == "tool refund_to_warehouse [refund-1] success: refund of A-1 goes to Lyon"
    )
    steps = executed_step_types(await stack.read_step_history(session))
    # The tool Step ran twice: once to ask, once with the answer; only the second took effect.
    assert "AwaitQuestionAnswer" in steps and steps.count("CallSingleAttemptTool") == 2, steps


async def test_a_tools_own_interrupt_is_a_question_that_survives_a_worker_kill_and_resumes_the_tool_once(
    sessions: Sessions,
) -> None:
    stack, client = sessions.stack, sessions.asking
    session = stack.new_session_id("interrupt")
    ship = ScriptedToolCall("ship_order", {"order_id": "A-2"}, "ship-1")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=(ship,)), ScriptedResponse(text="A-2 ships to Berlin.")]]
    )

    await client.start_session(session, "Ship A-2")
    question = await client.wait_for_interrupt(session)
    assert question is not None and question.kind is InterruptKind.QUESTION
    assert (question.question, question.choices) == ("Ship A-2 to which city?", ("Berlin", "Lyon"))
    # The Worker dies while the question waits; a new one resumes the tool with the answer.
    stack.kill_workers()
    await stack.start_worker()
    assert await client.answer_question(session, question.interrupt_id, "Berlin")
    ended = await client.wait_for_turn_end(session)

    assert ended.outcome is TurnOutcome.COMPLETED
    runs_path = tool_runs_path(stack.state_dir)
    # interrupt() returned the answer, and the tool's effect happened once.
    assert sessions.lines(runs_path, "ship_order") == ["ship_order A-2 Berlin"]
    [_, resumed] = stack.invocations.model_calls(session)
    assert resumed.model_input[-1] == "tool ship_order [ship-1] success: A-2 ships to Berlin"
    [stored] = [message for message in ended.snapshot.messages if message.role is MessageRole.TOOL]
    assert stored.tool_output == "A-2 ships to Berlin"


async def test_a_tool_that_starts_a_task_is_polled_to_completion_and_the_chat_spans_carry_the_model_call(
    sessions: Sessions,
) -> None:
    stack, client = sessions.stack, sessions.asking
    session = stack.new_session_id("task")
    render = ScriptedToolCall("render_report", {"name": "q3"}, "render-1")
    stack.scripts.set_turns(
        session, [[ScriptedResponse(tool_calls=(render,)), ScriptedResponse(text="The report is ready.")]]
    )

    await client.start_session(session, "Render the Q3 report")
    ended = await client.wait_for_turn_end(session)

    assert ended.outcome is TurnOutcome.COMPLETED
    assert sessions.lines(tool_runs_path(stack.state_dir), "render_report") == [
        "render_report start render-q3",
        "render_report poll render-q3 1",
        "render_report poll render-q3 2",
    ]
    [_, resumed] = stack.invocations.model_calls(session)
    assert resumed.model_input[-1] == "tool render_report [render-1] success: report render-q3 is ready"
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps.count("PollToolTask") == 2 and steps.count("CallTool") == 1, steps

    await wait_until("both chat spans", lambda: len(sessions.chat_spans(session)) == 2)
    chat = sessions.chat_spans(session)
    assert [
        (
            span.name,
            span.kind,
            span.attribute("gen_ai.request.model"),
            span.attribute("gen_ai.response.model"),
            span.attribute("gen_ai.provider.name"),
            span.attribute("gen_ai.response.finish_reasons"),
        )
        for span in chat
    ] == [
        ("chat dex-scripted", "CLIENT", "dex-scripted", "dex-scripted", "dex.scripted", ["tool_calls"]),
        ("chat dex-scripted", "CLIENT", "dex-scripted", "dex-scripted", "dex.scripted", ["stop"]),
    ]
    response_ids = [str(span.attribute("gen_ai.response.id")) for span in chat]
    assert all(response_id.startswith("scripted-") for response_id in response_ids), response_ids
    assert len(set(response_ids)) == 2

    every_span = read_exported_spans(sessions.span_file, session)
    # The tool's spans (its call and each poll) say what it does, in its `BaseTool.description`.
    executions = [span for span in every_span if span.attribute("gen_ai.operation.name") == "execute_tool"]
    assert {span.attribute("gen_ai.tool.description") for span in executions} == {
        "Render a report: a remote job the session polls until it is done."
    }, executions
    conventions = load_conventions()
    print(f"\nLangGraph, GenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, every_span))
    # The runner streams the graph's messages, so every call of the agent's model streams.
    assert conventions_problems(conventions, every_span, lambda span: span in chat) == []
    for span in chat:
        # What the agent's chat model reported when its call started, and what its stream showed.
        assert span.attribute("gen_ai.request.temperature") == TEMPERATURE
        assert span.attribute("gen_ai.request.max_tokens") == MAX_TOKENS
        assert span.attribute("gen_ai.request.stream") is True
        assert float(str(span.attribute("gen_ai.response.time_to_first_chunk"))) >= 0
        instructions = json.loads(str(span.attribute("gen_ai.system_instructions")))
        assert instructions == [{"type": "text", "content": SYSTEM_PROMPT}]
        offered = json.loads(str(span.attribute("gen_ai.tool.definitions")))
        assert {tool["name"] for tool in offered} >= {"render_report", "refund_to_warehouse"}
    asks, answers = chat
    render_call = {
        "type": "tool_call",
        "id": "render-1",
        "name": "render_report",
        "arguments": {"name": "q3"},
    }
    assert [part for message in _content(asks, "output") for part in message["parts"]] == [render_call]
    # The answering call received the task's result and produced only the answer.
    received = _content(answers, "input")
    assert received[0] == {"role": "user", "parts": [{"type": "text", "content": "Render the Q3 report"}]}
    parts = [part for message in received[1:] for part in message["parts"]]
    assert parts[0] == render_call
    assert [(part["type"], part["id"]) for part in parts[1:]] == [("tool_call_response", "render-1")]
    assert "report render-q3 is ready" in json.dumps(parts[1]["response"])
    assert [part for message in _content(answers, "output") for part in message["parts"]] == [
        {"type": "text", "content": "The report is ready."}
    ]


def _content(span: ExportedSpan, direction: str) -> list[dict[str, Any]]:
    """A chat span's recorded ``gen_ai.input.messages`` or ``gen_ai.output.messages``."""
    return json.loads(str(span.attribute(f"gen_ai.{direction}.messages")))


async def test_mcp_source_tools_run_as_steps_with_the_key_in_meta_and_an_http_task_is_polled_as_steps(
    sessions: Sessions,
) -> None:
    stack, client = sessions.stack, sessions.mcp
    session = stack.new_session_id("mcp")
    calls = (
        ScriptedToolCall("inventory__count_items", {"sku": "A-1"}, "count-1"),
        ScriptedToolCall("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1"),
        ScriptedToolCall(
            "shipping__ship_order", {"sku": "A-1", "polls": 2, "poll_interval_ms": 1000}, "ship-1"
        ),
    )
    stack.scripts.set_turns(session, [[ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Done.")]])
    log = mcp_log_path(stack.state_dir)

    await client.start_session(session, "Count A-1, reserve two, ship it")
    approval = await client.wait_for_interrupt(session)

    assert approval is not None and approval.kind is InterruptKind.TOOL_APPROVAL
    assert approval.tool_name == "inventory__reserve_stock"
    assert sessions.lines(log, "tools/call reserve_stock") == [], "nothing before the approval"
    assert await client.resolve_interrupt(session, approval.interrupt_id, approved=True)
    ended = await client.wait_for_turn_end(session)

    assert ended.outcome is TurnOutcome.COMPLETED
    outputs = {m.tool_call_id: m.tool_output for m in ended.snapshot.messages if m.role is MessageRole.TOOL}
    assert outputs == {
        "count-1": "A-1: 7 in stock",
        "reserve-1": "reserved 2 of A-1",
        "ship-1": "shipped A-1",
    }
    assert sessions.lines(log, "tools/call count_items") == ["tools/call count_items"]
    # The first request reserved and the server died before answering; the retried Step sent the same key.
    key = f"{session}/turn-1/reserve-1"
    assert sessions.lines(log, "tools/call reserve_stock") == [f"tools/call reserve_stock A-1 {key}"] * 2
    assert sessions.lines(log, "tasks/create ship_order A-1") == ["tasks/create ship_order A-1"]
    assert sessions.lines(log, "tasks/get ship_order A-1") == [
        "tasks/get ship_order A-1 working",
        "tasks/get ship_order A-1 completed",
    ]
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps.count("PollToolTask") == 2 and "AwaitToolApproval" in steps, steps


async def test_official_mcp_server_memory_asks_before_unhinted_and_destructive_tools_and_reads_between(
    sessions: Sessions,
) -> None:
    stack, client = sessions.stack, sessions.mcp
    session = stack.new_session_id("memory")
    name = f"K-9 of {session}"
    entity = {"name": name, "entityType": "sku", "observations": ["7 in stock"]}
    turn = [
        ScriptedToolCall("memory__create_entities", {"entities": [entity]}, "create-1"),
        ScriptedToolCall("memory__read_graph", {}, "read-1"),
        ScriptedToolCall("memory__delete_entities", {"entityNames": [name]}, "delete-1"),
    ]
    script = [ScriptedResponse(tool_calls=(call,)) for call in turn] + [ScriptedResponse(text="Forgotten.")]
    stack.scripts.set_turns(session, [script])
    await client.start_session(session, "Remember K-9, show the graph, then forget K-9")

    def sent(tool: str) -> int:
        wire = read_mcp_wire_log(memory_wire_log(stack.state_dir))
        requests = [m for m in wire if m.direction == "client" and m.method == "tools/call"]
        return sum(1 for request in requests if request.params.get("name") == tool)

    async def approval(tool_call_id: str) -> dict[str, ToolEffect | None]:
        snapshot = await wait_for_agent_snapshot(
            client,
            session,
            lambda s: s if tool_call_id in {i.tool_call_id for i in s.pending_interrupts} else None,
            description=f"{tool_call_id}'s approval",
        )
        return {call.tool_call_id: call.effect for call in snapshot.tool_calls}

    # No hint classifies create_entities: unclassified, so a person approves it before it runs.
    effects = await approval("create-1")
    assert sent("create_entities") == 0, "create_entities reached the server before its approval"
    assert await client.resolve_interrupt(session, "create-1", approved=True)
    # delete_entities is idempotent by its trusted hints, and destructive, so it asks too.
    effects |= await approval("delete-1")
    assert sent("delete_entities") == 0, "delete_entities reached the server before its approval"
    assert await client.resolve_interrupt(session, "delete-1", approved=True)
    done = await wait_for_turn_end(client, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    print(f"\nserver-memory {official_mcp_server_version('server-memory')}: effects {effects}")
    assert effects == {
        "create-1": ToolEffect.UNCLASSIFIED,
        "read-1": ToolEffect.READ,
        "delete-1": ToolEffect.IDEMPOTENT_WRITE,
    }
    assert [sent(tool) for tool in ("create_entities", "read_graph", "delete_entities")] == [1, 1, 1]
    read_graph = {m.tool_call_id: m.tool_output or "" for m in done.messages if m.tool_call_id}["read-1"]
    print(f"read_graph: {read_graph!r}")
    assert name in read_graph and "7 in stock" in read_graph, read_graph
    assert name not in memory_graph_path(stack.state_dir).read_text(encoding="utf-8"), "the entity stays"
    steps = executed_step_types(await stack.read_step_history(session))
    print(f"Steps: {steps}")
    # Approval then a single attempt; the read; approval then an idempotent CallTool.
    assert [step for step in steps if step.startswith(("Call", "Await"))] == [
        "AwaitToolApproval",
        "CallSingleAttemptTool",
        "CallTool",
        "AwaitToolApproval",
        "CallTool",
    ], steps
