"""Tool questions, tool tasks, an MCP tool source and tracing, through whole Pydantic AI sessions.

One devserver, one traced Worker child, the kit's inventory MCP server on stdio (started by the Worker for
each listing and call) and on Streamable HTTP, the official server-memory from npm on stdio, and Pydantic
AI's real agent loop with the scripted model.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from dex_agents import AgentSessionClient, AgentSnapshot, InterruptKind, ToolEffect, TurnEnd
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

from tests.feature_agents import (
    REPORT_POLLS,
    TRACED_MAX_TOKENS,
    TRACED_TEMPERATURE,
    build_feature_flows,
    http_url_path,
    ledger,
    mcp_log_path,
    memory_graph_path,
    memory_wire_log,
)
from tests.matrix_spec import PACKAGE_DIR

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Features:
    stack: AgentTestStack
    tools: AgentSessionClient
    mcp: AgentSessionClient
    shipping_log: Path
    span_file: Path

    async def start(
        self, sessions: AgentSessionClient, name: str, message: str, *calls: ScriptedToolCall, answer: str
    ) -> str:
        """Start a session whose model asks for ``calls``, then answers ``answer``."""
        session = self.stack.new_session_id(name)
        turn = [ScriptedResponse(tool_calls=calls), ScriptedResponse(text=answer)]
        self.stack.scripts.set_turns(session, [turn])
        await sessions.start_session(session, message)
        return session

    async def turn_end(self, sessions: AgentSessionClient, session: str) -> TurnEnd:
        ended = await sessions.wait_for_turn_end(session)
        assert ended.error is None, ended.error
        return ended

    def ledger(self) -> list[dict[str, object]]:
        return ledger(self.stack.state_dir)

    def stdio_requests(self) -> list[str]:
        log = mcp_log_path(self.stack.state_dir)
        return log.read_text().splitlines() if log.exists() else []

    def http_requests(self) -> list[str]:
        return self.shipping_log.read_text().splitlines() if self.shipping_log.exists() else []

    async def a_normal_turn_works(self, sessions: AgentSessionClient, session: str, turn: int) -> None:
        self.stack.scripts.add_turn(session, ScriptedResponse(text="Still here."))
        assert await sessions.send_user_message(session, "Still there?")
        done = await wait_for_turn_end(sessions, session, turn)
        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].text == "Still here."


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def features(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Features]:
    state_dir = tmp_path_factory.mktemp("features")
    shipping_log = state_dir / "mcp-http-requests.log"
    span_file = state_dir / "spans.jsonl"
    async with await start_mcp_inventory_http_server(shipping_log) as shipping:
        http_url_path(state_dir).write_text(shipping.url, encoding="utf-8")
        flows = build_feature_flows()
        async with AgentTestStack(
            state_dir,
            flows,
            "tests.feature_worker",
            worker_cwd=PACKAGE_DIR,
            worker_env={SPAN_FILE_ENV: str(span_file)},
        ) as stack:
            await stack.start_worker()
            yield Features(stack, stack.sessions(flows[0]), stack.sessions(flows[1]), shipping_log, span_file)


def tool_outputs(snapshot: AgentSnapshot) -> dict[str, str]:
    return {
        message.tool_call_id: message.tool_output
        for message in snapshot.messages
        if message.tool_call_id and message.tool_output
    }


async def test_a_pydantic_ai_tool_asks_before_it_takes_effect_and_runs_once_with_the_answer(
    features: Features,
) -> None:
    call = ScriptedToolCall("return_to_warehouse", {"order_id": "A-1"}, "return-1")
    session = await features.start(
        features.tools, "asks", "Please take order A-1 back", call, answer="It is on its way."
    )

    question = await features.tools.wait_for_interrupt(session)
    assert question is not None
    assert (question.interrupt_id, question.kind, question.question, question.choices) == (
        "return-1-input-1",
        InterruptKind.QUESTION,
        "Which warehouse takes the return?",
        ("Berlin", "Lyon"),
    )
    assert not [entry for entry in features.ledger() if entry.get("effect")], "the tool took effect first"
    assert not await features.tools.answer_question(session, "return-1-input-1", "Paris"), "only the choices"
    assert await features.tools.answer_question(session, "return-1-input-1", "Lyon")
    ended = await features.turn_end(features.tools, session)

    assert tool_outputs(ended.snapshot) == {"return-1": "Order A-1 goes back to Lyon."}
    effects = [entry for entry in features.ledger() if entry.get("effect")]
    assert effects == [
        {"effect": "return", "order_id": "A-1", "warehouse": "Lyon", "key": f"{session}/turn-1/return-1"}
    ]
    steps = executed_step_types(await features.stack.read_step_history(session))
    # The tool Step stopped at the question; the one after the answer ran the tool to its end.
    assert steps == [
        "StartAgentSession",
        "RunModel",
        "CallSingleAttemptTool",
        "AwaitQuestionAnswer",
        "AwaitQuestionAnswer",
        "CallSingleAttemptTool",
        "ResumeTurn",
        "RunModel",
    ], steps
    await features.a_normal_turn_works(features.tools, session, 2)


async def test_a_pydantic_ai_tool_hands_its_job_to_the_session_which_polls_it_to_its_result(
    features: Features,
) -> None:
    call = ScriptedToolCall("render_report", {"name": "sales"}, "report-1")
    session = await features.start(
        features.tools, "task", "Render the sales report", call, answer="Your report is ready."
    )
    ended = await features.turn_end(features.tools, session)

    job = "job-report-1"
    assert tool_outputs(ended.snapshot) == {"report-1": f"report {job} is ready after {REPORT_POLLS} polls"}
    events = [(entry["event"], entry.get("poll")) for entry in features.ledger() if entry.get("job") == job]
    assert events == [("start", None), ("poll", 1), ("poll", 2)], "one start, then one poll per PollToolTask"
    steps = executed_step_types(await features.stack.read_step_history(session))
    assert steps == [
        "StartAgentSession",
        "RunModel",
        "CallTool",
        "PollToolTask",
        "PollToolTask",
        "ResumeTurn",
        "RunModel",
    ], steps
    assert ended.snapshot.messages[-1].text == "Your report is ready."


async def test_an_mcp_source_runs_a_read_and_an_approved_write_as_steps_with_the_key_in_meta(
    features: Features,
) -> None:
    read = ScriptedToolCall("inventory__count_items", {"sku": "A-1"}, "count-1")
    write = ScriptedToolCall("inventory__reserve_stock", {"sku": "A-1", "count": 2}, "reserve-1")
    session = await features.start(
        features.mcp, "mcp-source", "Check A-1 and reserve 2", read, write, answer="Reserved 2 of A-1."
    )

    def read_done_and_write_waiting(snapshot: AgentSnapshot) -> AgentSnapshot | None:
        done = {record.tool_call_id for record in snapshot.tool_calls if record.is_final}
        waiting = [interrupt.interrupt_id for interrupt in snapshot.pending_interrupts]
        return snapshot if done == {"count-1"} and waiting == ["reserve-1"] else None

    snapshot = await wait_for_agent_snapshot(
        features.mcp,
        session,
        read_done_and_write_waiting,
        description="the read's result, the write's approval",
    )
    records = {record.tool_call_id: record for record in snapshot.tool_calls}
    assert (records["count-1"].effect, records["reserve-1"].effect) == (
        ToolEffect.READ,
        ToolEffect.IDEMPOTENT_WRITE,
    )
    assert not [line for line in features.stdio_requests() if "reserve_stock" in line], "ran before approval"
    assert await features.mcp.resolve_interrupt(session, "reserve-1", approved=True)
    ended = await features.turn_end(features.mcp, session)

    assert tool_outputs(ended.snapshot) == {"count-1": "A-1: 7 in stock", "reserve-1": "reserved 2 of A-1"}
    # The server died after its first reservation; CallTool's retry sent the same key, which it recognized.
    key = f"{session}/turn-1/reserve-1"
    calls_made = [line for line in features.stdio_requests() if line.startswith("tools/call")]
    assert calls_made == [
        "tools/call count_items",
        f"tools/call reserve_stock A-1 {key}",
        f"tools/call reserve_stock A-1 {key}",
    ]
    steps = executed_step_types(await features.stack.read_step_history(session))
    # The read's Step and the approval's wait run side by side.
    assert sorted(steps) == sorted(
        [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "AwaitToolApproval",
            "CallTool",
            "ResumeTurn",
            "RunModel",
        ]
    ), steps
    await features.a_normal_turn_works(features.mcp, session, 2)


async def test_an_mcp_source_task_is_polled_in_the_sessions_steps(features: Features) -> None:
    call = ScriptedToolCall("shipping__ship_order", {"sku": "K-1", "polls": 2}, "ship-1")
    session = await features.start(features.mcp, "mcp-task", "Ship K-1", call, answer="K-1 is shipped.")
    ended = await features.turn_end(features.mcp, session)

    assert tool_outputs(ended.snapshot) == {"ship-1": "shipped K-1"}
    requests = [line for line in features.http_requests() if "K-1" in line]
    assert requests == [
        "tools/call ship_order K-1",
        "tasks/create ship_order K-1",
        "tasks/get ship_order K-1 working",
        "tasks/get ship_order K-1 completed",
    ]
    steps = executed_step_types(await features.stack.read_step_history(session))
    assert steps.count("PollToolTask") == 2 and steps.count("CallTool") == 1, steps


async def test_official_mcp_server_memory_asks_before_unhinted_and_destructive_tools_and_reads_between(
    features: Features,
) -> None:
    stack, sessions = features.stack, features.mcp
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
    await sessions.start_session(session, "Remember K-9, show the graph, then forget K-9")

    def sent(tool: str) -> int:
        wire = read_mcp_wire_log(memory_wire_log(stack.state_dir))
        requests = [m for m in wire if m.direction == "client" and m.method == "tools/call"]
        return sum(1 for request in requests if request.params.get("name") == tool)

    async def approval(tool_call_id: str) -> dict[str, ToolEffect | None]:
        snapshot = await wait_for_agent_snapshot(
            sessions,
            session,
            lambda s: s if tool_call_id in {i.tool_call_id for i in s.pending_interrupts} else None,
            description=f"{tool_call_id}'s approval",
        )
        return {call.tool_call_id: call.effect for call in snapshot.tool_calls}

    # No hint classifies create_entities: unclassified, so a person approves it before it runs.
    effects = await approval("create-1")
    assert sent("create_entities") == 0, "create_entities reached the server before its approval"
    assert await sessions.resolve_interrupt(session, "create-1", approved=True)
    # delete_entities is idempotent by its trusted hints, and destructive, so it asks too.
    effects |= await approval("delete-1")
    assert sent("delete_entities") == 0, "delete_entities reached the server before its approval"
    assert await sessions.resolve_interrupt(session, "delete-1", approved=True)
    done = await wait_for_turn_end(sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    print(f"\nserver-memory {official_mcp_server_version('server-memory')}: effects {effects}")
    assert effects == {
        "create-1": ToolEffect.UNCLASSIFIED,
        "read-1": ToolEffect.READ,
        "delete-1": ToolEffect.IDEMPOTENT_WRITE,
    }
    assert [sent(tool) for tool in ("create_entities", "read_graph", "delete_entities")] == [1, 1, 1]
    read_graph = tool_outputs(done)["read-1"]
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
    features: Features,
) -> None:
    call = ScriptedToolCall("render_report", {"name": "stock"}, "stock-report-1")
    session = await features.start(features.tools, "traced", "Render the stock report", call, answer="Done.")
    await features.turn_end(features.tools, session)

    def chat_spans() -> list[ExportedSpan] | None:
        spans = read_exported_spans(features.span_file, session)
        chats = [span for span in spans if span.attribute("gen_ai.operation.name") == "chat"]
        return sorted(chats, key=lambda span: span.start_ns) if len(chats) == 2 else None

    asks, answers = await wait_until("the turn's two chat spans", chat_spans)
    for chat, response_id, finish_reasons in (
        (asks, "dex-scripted-1", ["tool_calls"]),
        (answers, "dex-scripted-2", ["stop"]),
    ):
        assert chat.name == "chat dex-scripted" and chat.kind == "CLIENT", chat
        assert {
            key: chat.attribute(key)
            for key in (
                "gen_ai.request.model",
                "gen_ai.response.model",
                "gen_ai.provider.name",
                "gen_ai.response.id",
                "gen_ai.response.finish_reasons",
                "gen_ai.request.temperature",
                "gen_ai.request.max_tokens",
                "gen_ai.request.stream",
            )
        } == {
            "gen_ai.request.model": "dex-scripted",
            "gen_ai.response.model": "dex-scripted",
            "gen_ai.provider.name": "dex.scripted",
            "gen_ai.response.id": response_id,
            "gen_ai.response.finish_reasons": finish_reasons,
            # The runner's model settings, and the runner streams every call.
            "gen_ai.request.temperature": TRACED_TEMPERATURE,
            "gen_ai.request.max_tokens": TRACED_MAX_TOKENS,
            "gen_ai.request.stream": True,
        }
        assert chat.attribute("dex.step.type") == "RunModel"
        assert isinstance(chat.attribute("gen_ai.usage.output_tokens"), int)
        assert float(str(chat.attribute("gen_ai.response.time_to_first_chunk"))) >= 0
        offered = json.loads(str(chat.attribute("gen_ai.tool.definitions")))
        assert {tool["name"] for tool in offered} == {"return_to_warehouse", "render_report"}
        assert {
            "type": "function",
            "description": "Render a report; it takes a while, so the session polls the job.",
        }.items() <= next(tool for tool in offered if tool["name"] == "render_report").items()

    # The first call produced the tool call; the second received its result and produced only the answer.
    user = {"role": "user", "parts": [{"type": "text", "content": "Render the stock report"}]}
    report_call = {
        "type": "tool_call",
        "id": "stock-report-1",
        "name": "render_report",
        "arguments": {"name": "stock"},
    }
    assert json.loads(str(asks.attribute("gen_ai.input.messages"))) == [user]
    assert [
        part
        for message in json.loads(str(asks.attribute("gen_ai.output.messages")))
        for part in message["parts"]
    ] == [report_call]
    received = json.loads(str(answers.attribute("gen_ai.input.messages")))
    assert received[0] == user
    assert [part for message in received[1:] for part in message["parts"]] == [
        report_call,
        {
            "type": "tool_call_response",
            "id": "stock-report-1",
            "response": f"report job-stock-report-1 is ready after {REPORT_POLLS} polls",
        },
    ]
    assert json.loads(str(answers.attribute("gen_ai.output.messages"))) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Done."}], "finish_reason": "stop"}
    ]

    # Every span of the session, the activation's root and the tool's spans too, holds to the conventions.
    conventions = load_conventions()
    every_span = read_exported_spans(features.span_file, session)
    # The tool's spans (its call and each poll of its task) say what it does, as its docstring told the model.
    executions = [span for span in every_span if span.attribute("gen_ai.operation.name") == "execute_tool"]
    assert {span.attribute("gen_ai.tool.description") for span in executions} == {
        "Render a report; it takes a while, so the session polls the job."
    }, executions
    print(f"\nPydantic AI, GenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, every_span))

    def streams(span: ExportedSpan) -> bool:
        return span.attribute("gen_ai.operation.name") == "chat"  # the runner streams every model call

    assert conventions_problems(conventions, every_span, streams) == []
