"""What a turn brings besides the agent, through whole sessions: devserver, Worker child, real agent loop.

Session settings that choose the next turn's model; a framework tool that asks the user before it takes
effect, and one that hands a remote job to the session; an `McpToolSource`'s tools run as tool Steps (a
read and an approved write with the idempotency key in ``_meta`` on stdio, a task over Streamable HTTP, and
the official server-memory's unhinted and destructive tools waiting for approval although its annotations
are trusted); and the model call's metadata on a traced session's ``chat`` spans.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from dex_agents import AgentSessionClient, AgentSnapshot, InterruptKind, ToolEffect
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
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
from tests.session_feature_agents import (
    FALLBACK_PROVIDER,
    TRACED_INSTRUCTIONS,
    TRACED_MAX_TOKENS,
    TRACED_MODEL,
    TRACED_TEMPERATURE,
    build_flows,
    mcp_http_log_path,
    mcp_http_url_path,
    mcp_log_path,
    memory_graph_path,
    memory_wire_log,
    tool_log_path,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Sessions:
    stack: AgentTestStack
    settings: AgentSessionClient
    requests: AgentSessionClient
    mcp: AgentSessionClient
    traced: AgentSessionClient
    span_file: Path

    def log(self, path: Path) -> list[str]:
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    async def start(
        self,
        client: AgentSessionClient,
        prefix: str,
        text: str,
        calls: tuple[ScriptedToolCall, ...],
        answer: str,
    ) -> str:
        """Start a session whose model calls ``calls``, then answers ``answer``; return its ID."""
        session = self.stack.new_session_id(prefix)
        script = [ScriptedResponse(tool_calls=calls), ScriptedResponse(text=answer)]
        self.stack.scripts.set_turns(session, [script])
        await client.start_session(session, text)
        return session


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sessions(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Sessions]:
    state_dir = tmp_path_factory.mktemp("features")
    span_file = state_dir / "spans.jsonl"
    async with await start_mcp_inventory_http_server(mcp_http_log_path(state_dir)) as http:
        # The Worker builds its MCP source from the state directory, so the URL is there first.
        mcp_http_url_path(state_dir).write_text(http.url, encoding="utf-8")
        flows = build_flows(state_dir)
        async with AgentTestStack(
            state_dir,
            flows,
            "tests.session_feature_worker",
            worker_cwd=PACKAGE_DIR,
            worker_env={SPAN_FILE_ENV: str(span_file)},
        ) as stack:
            await stack.start_worker()
            yield Sessions(stack, *(stack.sessions(flow) for flow in flows), span_file=span_file)


def _tool_outputs(snapshot: AgentSnapshot) -> dict[str, str]:
    return {m.tool_call_id: m.tool_output for m in snapshot.messages if m.tool_call_id and m.tool_output}


async def test_update_session_settings_changes_the_model_of_the_next_turn(sessions: Sessions) -> None:
    client = sessions.settings
    session = sessions.stack.new_session_id("settings")
    await client.start_session(session, "Hi")
    first = await wait_for_turn_end(client, session, 1)
    assert first.messages[-1].text == "the small model answers"

    assert await client.update_session_settings(session, {"model": "large"})
    assert await client.send_user_message(session, "Again, please")
    second = await wait_for_turn_end(client, session, 2)
    assert second.messages[-1].text == "the large model answers"

    # A model name the Worker does not know ends that turn with a clear error, before any model call.
    assert await client.update_session_settings(session, {"model": "huge"})
    assert await client.send_user_message(session, "And now?")
    third = await wait_for_turn_end(client, session, 3)
    assert third.state is not None
    assert third.state.last_turn_error == (
        "the session settings chose no usable model or instructions: KeyError: 'huge'"
    )
    # The session goes on once its settings are usable again.
    assert await client.update_session_settings(session, {})
    assert await client.send_user_message(session, "Hello?")
    fourth = await wait_for_turn_end(client, session, 4)
    assert fourth.state is not None and fourth.state.last_turn_error is None
    assert fourth.messages[-1].text == "the small model answers"
    assert [m.text for m in fourth.messages if m.role.value == "assistant"] == [
        "the small model answers",
        "the large model answers",
        "the small model answers",
    ]


async def test_a_tool_that_asks_before_it_takes_effect_runs_once_with_the_answer(sessions: Sessions) -> None:
    client, stack = sessions.requests, sessions.stack
    call = ScriptedToolCall("return_order", {"order_id": "A-1"}, "return-1")
    session = await sessions.start(client, "question", "Please return A-1", (call,), "Booked to Lyon.")

    question = await client.wait_for_interrupt(session)
    assert question is not None and question.kind is InterruptKind.QUESTION
    assert (question.interrupt_id, question.question, question.choices) == (
        "return-1-input-1",
        "Which warehouse takes the return?",
        ("Berlin", "Lyon"),
    )
    assert sessions.log(tool_log_path(stack.state_dir)) == [], "the tool took effect before the answer"
    assert not await client.answer_question(session, "return-1-input-1", "Paris"), "only the choices"
    assert await client.answer_question(session, "return-1-input-1", "Lyon")
    done = await wait_for_turn_end(client, session, 1)

    assert done.state is not None and done.state.last_turn_error is None
    assert sessions.log(tool_log_path(stack.state_dir)) == ["return A-1 to Lyon"]
    assert _tool_outputs(done) == {"return-1": "return of A-1 booked to Lyon"}
    second = stack.invocations.model_calls(session)[1]
    assert "tool return_order [return-1]: return of A-1 booked to Lyon" in second.model_input
    # The single-attempt write stopped at the question and ran again, once, with the answer.
    assert executed_step_types(await stack.read_step_history(session)) == [
        "StartAgentSession",
        "RunModel",
        "CallSingleAttemptTool",
        "AwaitQuestionAnswer",
        "AwaitQuestionAnswer",
        "CallSingleAttemptTool",
        "ResumeTurn",
        "RunModel",
    ]


async def test_a_tool_that_starts_a_remote_job_is_polled_to_completion_in_steps(sessions: Sessions) -> None:
    client, stack = sessions.requests, sessions.stack
    call = ScriptedToolCall("render_report", {"order_id": "A-2"}, "report-1")
    session = await sessions.start(
        client, "task", "Render the report of A-2", (call,), "Your report is ready."
    )
    done = await wait_for_turn_end(client, session, 1)

    assert done.state is not None and done.state.last_turn_error is None
    assert _tool_outputs(done) == {"report-1": "report of A-2 ready"}
    job_lines = [line for line in sessions.log(tool_log_path(stack.state_dir)) if "job-report-1" in line]
    assert job_lines == ["start job-report-1", "poll job-report-1 1", "poll job-report-1 2"]
    assert executed_step_types(await stack.read_step_history(session)) == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "PollToolTask",
        "PollToolTask",
        "ResumeTurn",
        "RunModel",
    ]
    assert done.messages[-1].text == "Your report is ready."


async def test_mcp_source_tools_run_as_steps_with_the_sessions_idempotency_key(sessions: Sessions) -> None:
    client, stack = sessions.mcp, sessions.stack
    calls = (
        ScriptedToolCall("inventory__count_items", {"sku": "A-1"}, "count-1"),
        ScriptedToolCall("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1"),
    )
    log = mcp_log_path(stack.state_dir)
    session = await sessions.start(client, "mcp", "Count A-1 and reserve two", calls, "Done.")

    def approval_pending(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        final = {call.tool_call_id for call in snapshot.tool_calls if call.is_final}
        return snapshot if snapshot.pending_interrupts and final == {"count-1"} else None

    waiting = await wait_for_agent_snapshot(client, session, approval_pending, description="the approval")
    effects = {call.tool_call_id: call.effect for call in waiting.tool_calls}
    assert effects == {"count-1": ToolEffect.READ, "reserve-1": ToolEffect.IDEMPOTENT_WRITE}
    assert not [line for line in sessions.log(log) if "reserve_stock" in line], "ran before its approval"
    [offered] = {tuple(call.offered_tools) for call in stack.invocations.model_calls(session)}
    assert {"inventory__count_items", "inventory__reserve_stock", "shipping__ship_order"} <= set(offered)
    assert await client.resolve_interrupt(session, "reserve-1", approved=True)
    done = await wait_for_turn_end(client, session, 1)

    assert done.state is not None and done.state.last_turn_error is None
    assert _tool_outputs(done) == {"count-1": "A-1: 7 in stock", "reserve-1": "reserved 2 of A-1"}
    # The server died after reserving; the retried CallTool sent the same key, which it recognized.
    key = f"{session}/turn-1/reserve-1"
    calls_made = [line for line in sessions.log(log) if line.startswith("tools/call")]
    assert calls_made == ["tools/call count_items", *[f"tools/call reserve_stock A-1 {key}"] * 2]
    history = await stack.read_step_history(session)
    expected = ["StartAgentSession", "RunModel", "CallTool", "AwaitToolApproval", "CallTool"]
    assert sorted(executed_step_types(history)) == sorted([*expected, "ResumeTurn", "RunModel"])
    [reserve] = [
        entry
        for entry in history
        if entry.step_type == "CallTool"
        and entry.step_input == "reserve-1"
        and entry.event_type == EXECUTE_COMPLETED_EVENT
    ]
    assert reserve.final_attempt == 2


async def test_an_mcp_task_over_http_is_polled_in_the_sessions_steps(sessions: Sessions) -> None:
    client, stack = sessions.mcp, sessions.stack
    ship = ScriptedToolCall(
        "shipping__ship_order", {"sku": "B-2", "polls": 2, "poll_interval_ms": 1000}, "ship-1"
    )
    session = await sessions.start(client, "mcp-task", "Ship B-2", (ship,), "Shipped.")
    done = await wait_for_turn_end(client, session, 1)

    assert done.state is not None and done.state.last_turn_error is None
    assert _tool_outputs(done) == {"ship-1": "shipped B-2"}
    requests = [line for line in sessions.log(mcp_http_log_path(stack.state_dir)) if "B-2" in line]
    assert requests.count("tasks/create ship_order B-2") == 1, requests
    assert len([line for line in requests if line.startswith("tasks/get ship_order B-2")]) == 2, requests
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps[:3] == ["StartAgentSession", "RunModel", "CallTool"]
    assert steps[3:] == ["PollToolTask"] * (len(steps) - 5) + ["ResumeTurn", "RunModel"], steps
    assert steps.count("PollToolTask") >= 1


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
    read_graph = _tool_outputs(done)["read-1"]
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


async def test_a_traced_sessions_chat_spans_describe_each_model_call_and_hold_to_the_conventions(
    sessions: Sessions,
) -> None:
    client = sessions.traced
    read = ScriptedToolCall("lookup_order", {"order_id": "A-3"}, "read-1")
    session = await sessions.start(client, "traced", "Where is A-3?", (read,), "A-3 has shipped.")
    done = await wait_for_turn_end(client, session, 1)
    [read_result] = [
        message.tool_output
        for message in done.messages
        if message.tool_call_id == "read-1" and message.tool_output is not None
    ]

    def chat_spans() -> list[ExportedSpan] | None:
        spans = read_exported_spans(sessions.span_file, session)
        chats = [span for span in spans if span.attributes.get("gen_ai.operation.name") == "chat"]
        return sorted(chats, key=lambda span: span.start_ns) if len(chats) == 2 else None

    chats = await wait_until("the turn's two chat spans", chat_spans)
    assert [span.name for span in chats] == [f"chat {TRACED_MODEL}"] * 2
    for span, finish_reason in zip(chats, ("tool_calls", "stop"), strict=True):
        attributes = span.attributes
        assert span.kind == "CLIENT"
        assert attributes["gen_ai.request.model"] == TRACED_MODEL
        assert attributes["gen_ai.response.model"] == TRACED_MODEL
        # The runner's provider wins over the Flow's fallback.
        assert attributes["gen_ai.provider.name"] == "dex.scripted" != FALLBACK_PROVIDER
        assert attributes["gen_ai.response.id"] == "resp"
        assert attributes["gen_ai.response.finish_reasons"] == [finish_reason]
        # The agent's model settings and instructions; the runner streams every call.
        assert attributes["gen_ai.request.temperature"] == TRACED_TEMPERATURE
        assert attributes["gen_ai.request.max_tokens"] == TRACED_MAX_TOKENS
        assert attributes["gen_ai.request.stream"] is True
        assert float(str(attributes["gen_ai.response.time_to_first_chunk"])) >= 0
        assert json.loads(str(attributes["gen_ai.system_instructions"])) == [
            {"type": "text", "content": TRACED_INSTRUCTIONS}
        ]
        offered = json.loads(str(attributes["gen_ai.tool.definitions"]))
        assert {tool["name"] for tool in offered} >= {"lookup_order", "refund_order"}
        assert all(tool["type"] == "function" for tool in offered)

    # The first call produced the tool call; the second received its result and produced only the answer.
    asks, answers = chats
    user = {"role": "user", "parts": [{"type": "text", "content": "Where is A-3?"}]}
    read_call = {
        "type": "tool_call",
        "id": "read-1",
        "name": "lookup_order",
        "arguments": {"order_id": "A-3"},
    }
    assert json.loads(str(asks.attribute("gen_ai.input.messages"))) == [user]
    produced = json.loads(str(asks.attribute("gen_ai.output.messages")))
    assert [part for message in produced for part in message["parts"]] == [read_call]
    received = json.loads(str(answers.attribute("gen_ai.input.messages")))
    assert received[0] == user
    assert [part for message in received[1:] for part in message["parts"]] == [
        read_call,
        {"type": "tool_call_response", "id": "read-1", "response": read_result},
    ]
    assert json.loads(str(answers.attribute("gen_ai.output.messages"))) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "A-3 has shipped."}],
            "finish_reason": "stop",
        }
    ]

    # Every span of the session, the activation's root and the tool's spans too, holds to the conventions.
    conventions = load_conventions()
    every_span = read_exported_spans(sessions.span_file, session)
    # The tool's span says what the tool does, as its `FunctionTool.description` told the model.
    executions = [span for span in every_span if span.attribute("gen_ai.operation.name") == "execute_tool"]
    assert [span.attribute("gen_ai.tool.description") for span in executions] == [
        "Look up an order's status (a read: retried freely)."
    ], executions
    print(f"\nOpenAI Agents SDK, GenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, every_span))

    def streams(span: ExportedSpan) -> bool:
        return span.attribute("gen_ai.operation.name") == "chat"  # the runner streams every model call

    assert conventions_problems(conventions, every_span, streams) == []
