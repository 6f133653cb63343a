"""Tracing of whole sessions against the devserver, with Worker children that write their spans to a file.

The traced Worker installs the OpenTelemetry SDK with a processor that appends each span to the module's
span file as it ends, so the file holds exactly what a Worker emitted before it was killed. The untraced
Worker serves a Flow without tracing and reports which OpenTelemetry modules it loaded.
"""

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio

from dex_agents import AgentSessionClient, AgentSnapshot, ToolCallStatus
from dex_agents.testing import (
    AgentTestStack,
    ScriptedQuestion,
    ScriptedResponse,
    ScriptedTask,
    ScriptedToolCall,
    WorkerProcess,
    executed_step_types,
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
from tests.agents import CORE_DIR
from tests.otel_agents import AGENT_NAME, PROVIDER_NAME, TracedFlows, build_traced_flows
from tests.otel_worker import RAISING_CHILDREN_PREFIX, RAISING_PREFIX, UNSAMPLED_PREFIX
from tests.trace_probe import TraceProbeFlow
from tests.untraced_worker import MODULES_FILE_ENV

pytestmark = pytest.mark.asyncio(loop_scope="module")

READ, REFUND = "lookup_order", "refund_order"
COMMON_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "dex.flow.id",
    "dex.run.id",
    "dex.step.type",
    "dex.step.execution_id",
    "dex.step.attempt",
    "dex.agent.turn.id",
)


@dataclass
class Traced:
    stack: AgentTestStack
    flows: TracedFlows
    span_file: Path
    worker: WorkerProcess | None = None

    async def ensure_worker(self) -> None:
        if self.worker is None or not self.worker.is_running:
            self.worker = await self.stack.start_worker()

    async def replace_worker(self) -> None:
        assert self.worker is not None
        self.worker.kill()
        self.worker = await self.stack.start_worker()

    def sessions(self, flow: TraceProbeFlow) -> AgentSessionClient:
        return self.stack.sessions(flow)

    async def trace_context(self, flow: TraceProbeFlow, session: str) -> str:
        return await self.stack.client.invoke_rpc(flow.read_trace_context, session)

    def spans(self, session: str) -> list[ExportedSpan]:
        return read_exported_spans(self.span_file, session)

    async def wait_for_spans(self, session: str, count: int) -> list[ExportedSpan]:
        # Spans are written before their Step commits, so this only guards against a slow file system.
        def enough() -> list[ExportedSpan] | None:
            spans = self.spans(session)
            return spans if len(spans) >= count else None

        return await wait_until(f"{count} spans of {session}", enough)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def traced(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Traced]:
    state_dir = tmp_path_factory.mktemp("otel")
    flows = build_traced_flows()
    span_file = state_dir / "spans.jsonl"
    async with AgentTestStack(
        state_dir,
        flows.all,
        "tests.otel_worker",
        worker_cwd=CORE_DIR,
        worker_env={SPAN_FILE_ENV: str(span_file)},
    ) as stack:
        harness = Traced(stack, flows, span_file)
        await harness.ensure_worker()
        yield harness


@pytest_asyncio.fixture(loop_scope="module")
async def harness(traced: Traced) -> Traced:
    await traced.ensure_worker()
    return traced


def _read(call_id: str, **behaviour: object) -> ScriptedToolCall:
    return ScriptedToolCall(READ, {"order_id": "A-1"}, call_id, **behaviour)  # pyright: ignore[reportArgumentType]


def _refund(call_id: str) -> ScriptedToolCall:
    return ScriptedToolCall(REFUND, {"order_id": "A-1"}, call_id, output=f"{call_id} accepted")


def _record_status(snapshot: AgentSnapshot, tool_call_id: str) -> ToolCallStatus | None:
    return next((call.status for call in snapshot.tool_calls if call.tool_call_id == tool_call_id), None)


async def _start_refund(harness: Traced, flow: TraceProbeFlow, session: str) -> None:
    """Start a turn that reads and asks to refund; the read runs while the refund waits for approval."""
    harness.stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(_read("read-1"), _refund("refund-1"))),
                ScriptedResponse(text="Refunded A-1."),
            ]
        ],
    )
    await harness.sessions(flow).start_session(session, "Refund order A-1")


async def _pending_approval(harness: Traced, flow: TraceProbeFlow, session: str) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        harness.sessions(flow),
        session,
        lambda snapshot: snapshot if snapshot.pending_interrupts else None,
        description="a pending approval",
    )


def _is_sampled(traceparent: str) -> bool:
    return bool(int(traceparent[-2:], 16) & 1)


def _of(span: ExportedSpan) -> str:
    return f"00-{span.trace_id}-{span.span_id}-"


def _one(spans: Sequence[ExportedSpan], name: str, step_type: str) -> ExportedSpan:
    found = [span for span in spans if span.name == name and span.attribute("dex.step.type") == step_type]
    assert len(found) == 1, (name, step_type, [(span.name, span.attributes) for span in spans])
    return found[0]


async def test_span_tree_of_a_turn_with_a_read_and_an_approval_across_a_worker_kill(harness: Traced) -> None:
    flow = harness.flows.main
    sessions = harness.sessions(flow)
    session = harness.stack.new_session_id("tree")
    harness.stack.scripts.set_turns(
        session,
        [
            [
                ScriptedResponse(tool_calls=(_read("read-1", gate="read"), _refund("refund-1"))),
                ScriptedResponse(text="Refunded A-1."),
            ],
            [ScriptedResponse(text="You are welcome.")],
        ],
    )
    await sessions.start_session(session, "Refund order A-1")
    await harness.stack.gate(session, "read").wait_until_reached()
    # The read's first attempt dies inside the tool: its span must never appear, its retry's must.
    await harness.replace_worker()
    waiting = await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: snapshot
        if snapshot.pending_interrupts and _record_status(snapshot, "read-1") == ToolCallStatus.SUCCEEDED
        else None,
        description="the read to finish while the approval waits",
    )
    first_root = await harness.trace_context(flow, session)
    assert first_root and _is_sampled(first_root)
    assert {call.tool_call_id: call.trace_context for call in waiting.tool_calls} == {
        "read-1": first_root,
        "refund-1": first_root,
    }
    assert await sessions.resolve_interrupt(session, "refund-1", approved=True)
    await wait_for_turn_end(sessions, session, 1)
    assert await sessions.send_user_message(session, "Thanks")
    await wait_for_turn_end(sessions, session, 2)

    spans = await harness.wait_for_spans(session, 8)
    assert len(spans) == 8, [(span.name, span.attributes) for span in spans]
    root_name = f"invoke_agent {AGENT_NAME}"
    start = _one(spans, root_name, "StartAgentSession")
    approval = _one(spans, root_name, "AwaitToolApproval")
    next_turn = _one(spans, root_name, "AwaitUserMessage")
    roots = (start, approval, next_turn)
    # Each activation is a new trace whose root links to the previous root.
    assert all(root.parent_span_id is None and root.kind == "INTERNAL" for root in roots)
    assert len({root.trace_id for root in roots}) == 3
    assert start.links == ()
    assert approval.links == ((start.trace_id, start.span_id),)
    assert next_turn.links == ((approval.trace_id, approval.span_id),)
    assert first_root.startswith(_of(start))
    assert (await harness.trace_context(flow, session)).startswith(_of(next_turn))

    read = _one(spans, f"execute_tool {READ}", "CallTool")
    refund = _one(spans, f"execute_tool {REFUND}", "CallSingleAttemptTool")
    chats = sorted(
        (span for span in spans if span.name == "chat scripted-model"), key=lambda span: span.start_ns
    )
    assert [chat.attribute("dex.step.type") for chat in chats] == ["RunModel"] * 3
    asks, answers, thanks = chats
    children = {start.span_id: [asks, read], approval.span_id: [refund, answers], next_turn.span_id: [thanks]}
    for root in roots:
        for child in children[root.span_id]:
            assert (child.parent_trace_id, child.parent_span_id) == (root.trace_id, root.span_id), child.name
            assert child.trace_id == root.trace_id
    # Nothing dangles: every span ended, and every parent is a span that was exported.
    by_id = {span.span_id for span in spans}
    for span in spans:
        assert span.end_ns is not None and span.end_ns >= span.start_ns, span.name
        assert span.parent_span_id is None or span.parent_span_id in by_id, span.name
        assert all(span.attribute(key) is not None for key in COMMON_KEYS if key != "dex.agent.turn.id")
        assert span.attribute("gen_ai.conversation.id") == session == span.attribute("dex.flow.id")
        assert str(span.attribute("dex.step.execution_id")).startswith(f"{span.attribute('dex.step.type')}-")
        assert span.attribute("gen_ai.agent.name") == AGENT_NAME
    assert [
        span.attribute("dex.agent.turn.id") for span in (start, asks, read, approval, refund, answers)
    ] == ["turn-1"] * 6
    assert thanks.attribute("dex.agent.turn.id") == next_turn.attribute("dex.agent.turn.id") == "turn-2"

    runs = harness.stack.invocations.tool_calls(session, READ)
    assert len(runs) == 2 and read.attribute("dex.step.attempt") == runs[-1].attempt > runs[0].attempt
    assert read.attribute("dex.tool.effect") == "read" and read.attribute("dex.tool.status") == "succeeded"
    assert refund.attribute("dex.tool.effect") == "non_idempotent_write"
    assert (read.attribute("gen_ai.tool.call.id"), refund.attribute("gen_ai.tool.call.id")) == (
        "read-1",
        "refund-1",
    )
    assert all(span.kind == "INTERNAL" for span in (read, refund))
    # ScriptedRunner describes its tools by their docstrings' first paragraph.
    assert refund.attribute("gen_ai.tool.description") == (
        "Refund an order (a non-idempotent write that needs approval: runs at most once)."
    )

    # One model call each: CLIENT spans with usage and the runner's metadata.
    for chat in chats:
        assert chat.kind == "CLIENT" and chat.status == "UNSET"
        assert chat.attribute("gen_ai.operation.name") == "chat"
        assert chat.attribute("gen_ai.provider.name") == PROVIDER_NAME
        assert (
            chat.attribute("gen_ai.request.model")
            == chat.attribute("gen_ai.response.model")
            == "scripted-model"
        )
        assert (
            chat.attribute("gen_ai.usage.input_tokens"),
            chat.attribute("gen_ai.usage.output_tokens"),
        ) == (10, 5)
        assert chat.attribute("gen_ai.response.id") == (
            f"{chat.attribute('dex.step.execution_id')}.{chat.attribute('dex.step.attempt')}"
        )
    assert asks.attribute("gen_ai.response.finish_reasons") == ["tool_calls"]
    assert answers.attribute("gen_ai.response.finish_reasons") == ["stop"]
    assert start.attribute("gen_ai.provider.name") == PROVIDER_NAME
    # Content by reference: message sequence keys and tool call IDs, and no text of the conversation.
    assert asks.attribute("dex.agent.tool_call_ids") == ["read-1", "refund-1"]
    assert (
        asks.attribute("dex.agent.input_messages.first_key"),
        asks.attribute("dex.agent.input_messages.count"),
    ) == (
        "000000000001",
        1,
    )
    assert asks.attribute("dex.agent.output_messages.count") == 0  # the runner keeps items in its run state
    assert (
        answers.attribute("dex.agent.output_messages.first_key"),
        answers.attribute("dex.agent.output_messages.last_key"),
    ) == ("000000000002", "000000000006")
    assert (
        thanks.attribute("dex.agent.input_messages.last_key"),
        thanks.attribute("dex.agent.output_messages.first_key"),
    ) == ("000000000007", "000000000008")
    everything = json.dumps([span.attributes for span in spans])
    for text in ("Refund order A-1", "Refunded A-1.", "refund-1 accepted", "Thanks", "You are welcome."):
        assert text not in everything
    assert "gen_ai.input.messages" not in everything and "gen_ai.tool.call.arguments" not in everything


async def test_a_task_is_polled_under_its_root_and_an_answer_moves_it_to_a_new_activation(
    harness: Traced,
) -> None:
    flow = harness.flows.main
    sessions = harness.sessions(flow)
    session = harness.stack.new_session_id("task")
    task = ScriptedTask(question=ScriptedQuestion("Which carrier?"), output="found")
    harness.stack.scripts.set_turns(
        session,
        [[ScriptedResponse(tool_calls=(_read("read-1", task=task),)), ScriptedResponse(text="Found.")]],
    )
    await sessions.start_session(session, "Track order A-1")
    await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: any(item.interrupt_id == "read-1-input-1" for item in snapshot.pending_interrupts),
        description="the task's question",
    )
    assert await sessions.answer_question(session, "read-1-input-1", "DHL")
    await wait_for_turn_end(sessions, session, 1)

    spans = await harness.wait_for_spans(session, 7)
    start = _one(spans, f"invoke_agent {AGENT_NAME}", "StartAgentSession")
    answer = _one(spans, f"invoke_agent {AGENT_NAME}", "AwaitQuestionAnswer")
    assert answer.links == ((start.trace_id, start.span_id),)
    tool_spans = sorted(
        (span for span in spans if span.name == f"execute_tool {READ}"), key=lambda span: span.start_ns
    )
    # The tool starts the task, the first poll asks, and the poll after the answer returns the result.
    assert [
        (span.attribute("dex.step.type"), span.attribute("dex.tool.status"), span.parent_span_id)
        for span in tool_spans
    ] == [
        ("CallTool", "waiting_for_task", start.span_id),
        ("PollToolTask", "awaiting_answer", start.span_id),
        ("PollToolTask", "succeeded", answer.span_id),
    ]
    chats = sorted(
        (span for span in spans if span.name == "chat scripted-model"), key=lambda span: span.start_ns
    )
    assert [chat.parent_span_id for chat in chats] == [start.span_id, answer.span_id]
    assert len(spans) == 7


async def test_message_content_is_recorded_when_opted_in_and_1_36_0_names_the_provider_gen_ai_system(
    harness: Traced,
) -> None:
    content_session = harness.stack.new_session_id("content")
    compat_session = harness.stack.new_session_id("compat")
    for session in (content_session, compat_session):
        harness.stack.scripts.set_turns(
            session,
            [[ScriptedResponse(tool_calls=(_read("read-1"),)), ScriptedResponse(text="A-1 shipped.")]],
        )
    await harness.sessions(harness.flows.content).start_session(content_session, "Where is order A-1?")
    await harness.sessions(harness.flows.compat).start_session(compat_session, "Where is order A-1?")
    await wait_for_turn_end(harness.sessions(harness.flows.content), content_session, 1)
    await wait_for_turn_end(harness.sessions(harness.flows.compat), compat_session, 1)

    spans = await harness.wait_for_spans(content_session, 4)
    asks, answers = sorted(
        (span for span in spans if span.name == "chat scripted-model"), key=lambda span: span.start_ns
    )
    read = _one(spans, f"execute_tool {READ}", "CallTool")
    assert json.loads(str(asks.attribute("gen_ai.input.messages"))) == [
        {"role": "user", "parts": [{"type": "text", "content": "Where is order A-1?"}]}
    ]
    read_call = {"type": "tool_call", "id": "read-1", "name": READ, "arguments": {"order_id": "A-1"}}
    read_result = 'lookup_order done: {"order_id":"A-1"}'
    assert json.loads(str(asks.attribute("gen_ai.output.messages"))) == [
        {"role": "assistant", "parts": [read_call], "finish_reason": "tool_calls"}
    ]
    # The answering call received the read's result and produced only the answer.
    received = json.loads(str(answers.attribute("gen_ai.input.messages")))
    assert received[0] == {"role": "user", "parts": [{"type": "text", "content": "Where is order A-1?"}]}
    assert [part for message in received[1:] for part in message["parts"]] == [
        read_call,
        {"type": "tool_call_response", "id": "read-1", "response": read_result},
    ]
    assert json.loads(str(answers.attribute("gen_ai.output.messages"))) == [
        {"role": "assistant", "parts": [{"type": "text", "content": "A-1 shipped."}], "finish_reason": "stop"}
    ]
    assert json.loads(str(read.attribute("gen_ai.tool.call.arguments"))) == {"order_id": "A-1"}
    assert read.attribute("gen_ai.tool.call.result") == 'lookup_order done: {"order_id":"A-1"}'

    compat = await harness.wait_for_spans(compat_session, 4)
    for span in compat:
        assert span.attribute("gen_ai.provider.name") is None
        if not span.name.startswith("execute_tool"):
            assert span.attribute("gen_ai.system") == PROVIDER_NAME
        assert span.schema_url == "https://opentelemetry.io/schemas/1.36.0"
        assert span.attribute("gen_ai.input.messages") is None
    assert {span.name for span in compat} == {
        f"invoke_agent {AGENT_NAME}",
        "chat scripted-model",
        f"execute_tool {READ}",
    }
    assert all(span.schema_url in (None, "") for span in spans)


async def test_a_compaction_attempt_is_a_chat_span_named_from_the_summary_metadata(harness: Traced) -> None:
    flow = harness.flows.compacting
    sessions = harness.sessions(flow)
    session = harness.stack.new_session_id("compacting")
    # About 100 tokens a message: turn 5's model input passes 85% of the 1,000-token window.
    questions = [f"Question {number}: ".ljust(394, "?") for number in range(1, 6)]
    harness.stack.scripts.set_turns(
        session, [[ScriptedResponse(text=f"Answer {number}: ".ljust(389, "."))] for number in range(1, 6)]
    )
    await sessions.start_session(session, questions[0])
    for number, text in enumerate(questions[1:], start=2):
        await wait_for_turn_end(sessions, session, number - 1)
        assert await sessions.send_user_message(session, text)
    await wait_for_turn_end(sessions, session, 5)
    assert [call.turn_id for call in harness.stack.invocations.summary_calls(session)] == ["turn-5"]

    spans = harness.spans(session)
    (root,) = (
        span
        for span in spans
        if span.parent_span_id is None and span.attribute("dex.agent.turn.id") == "turn-5"
    )
    assert root.attribute("dex.step.type") == "AwaitUserMessage"
    fifth = sorted(
        (span for span in spans if span.parent_span_id == root.span_id), key=lambda span: span.start_ns
    )
    # The RunModel attempt that chose to compact made no model call, so it has no span.
    assert [(span.name, span.attribute("dex.step.type")) for span in fifth] == [
        ("chat scripted-model", "CompactContext"),
        ("chat scripted-model", "RunModel"),
    ]
    summary = fifth[0]
    assert summary.kind == "CLIENT" and summary.attribute("gen_ai.usage.input_tokens") == 10
    assert summary.attribute("gen_ai.response.id") == f"{summary.attribute('dex.step.execution_id')}.1"
    assert (
        summary.attribute("dex.agent.input_messages.first_key"),
        summary.attribute("dex.agent.input_messages.last_key"),
        summary.attribute("dex.agent.output_messages.count"),
    ) == ("000000000001", "000000000006", 0)
    assert json.loads(str(summary.attribute("gen_ai.output.messages"))) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "summary 1 through message 6"}],
            "finish_reason": "stop",
        }
    ]


async def test_a_sampler_that_drops_the_root_drops_its_children(harness: Traced) -> None:
    flow = harness.flows.main
    sessions = harness.sessions(flow)
    session = harness.stack.new_session_id(UNSAMPLED_PREFIX.rstrip("-"))
    await _start_refund(harness, flow, session)
    waiting = await _pending_approval(harness, flow, session)
    # The root was not sampled, yet it is stored so the activation's other spans follow its decision.
    first_root = await harness.trace_context(flow, session)
    assert first_root and not _is_sampled(first_root)
    assert {call.trace_context for call in waiting.tool_calls} == {first_root}
    assert await sessions.resolve_interrupt(session, "refund-1", approved=True)
    await wait_for_turn_end(sessions, session, 1)
    approval_root = await harness.trace_context(flow, session)
    assert approval_root != first_root and not _is_sampled(approval_root)
    assert len(harness.stack.invocations.tool_calls(session, REFUND)) == 1
    assert harness.spans(session) == []


async def test_an_exporter_that_raises_changes_no_step_outcome(harness: Traced) -> None:
    flow = harness.flows.main
    sessions = harness.sessions(flow)
    names = {
        "control": harness.stack.new_session_id("control"),
        "children": harness.stack.new_session_id(RAISING_CHILDREN_PREFIX.rstrip("-")),
        "all": harness.stack.new_session_id(RAISING_PREFIX.rstrip("-")),
    }
    for session in names.values():
        await _start_refund(harness, flow, session)
    for session in names.values():
        await _pending_approval(harness, flow, session)
        assert await sessions.resolve_interrupt(session, "refund-1", approved=True)
    ended = {key: await wait_for_turn_end(sessions, session, 1) for key, session in names.items()}
    steps = {
        key: executed_step_types(await harness.stack.read_step_history(session))
        for key, session in names.items()
    }
    assert steps["children"] == steps["control"] == steps["all"]
    assert steps["control"].count("RunModel") == 2
    for key, session in names.items():
        assert [message.text for message in ended[key].messages][-1] == "Refunded A-1."
        assert ended[key].state.last_turn_error is None  # pyright: ignore[reportOptionalMemberAccess]
        assert len(harness.stack.invocations.tool_calls(session, REFUND)) == 1
        assert len(harness.stack.invocations.model_calls(session)) == 2
    # The roots of "children" were exported and stored; "all" has no root, so nothing is stored.
    assert await harness.trace_context(flow, names["children"])
    assert await harness.trace_context(flow, names["all"]) == ""
    assert harness.worker is not None
    log = harness.worker.read_log()
    assert f"tracing skipped the chat span of RunModel attempt 1 in session {names['children']}" in log
    assert (
        f"tracing skipped the execute_tool span of CallTool attempt 1 in session {names['children']}" in log
    )
    assert (
        f"tracing skipped the invoke_agent span of StartAgentSession attempt 1 in session {names['all']}"
        in log
    )


async def test_a_session_without_tracing_never_loads_opentelemetry_and_stores_no_trace_context(
    harness: Traced,
) -> None:
    modules_file = harness.stack.state_dir / "untraced-modules.json"
    worker = await harness.stack.start_worker(
        {MODULES_FILE_ENV: str(modules_file)}, worker_module="tests.untraced_worker"
    )
    try:
        flow = harness.flows.untraced
        sessions = harness.sessions(flow)
        session = harness.stack.new_session_id("untraced")
        await _start_refund(harness, flow, session)
        waiting = await _pending_approval(harness, flow, session)
        assert [call.trace_context for call in waiting.tool_calls] == [None, None]
        assert await sessions.resolve_interrupt(session, "refund-1", approved=True)
        await wait_for_turn_end(sessions, session, 1)
        assert await harness.trace_context(flow, session) == ""
        assert harness.spans(session) == []
    finally:
        await asyncio.to_thread(worker.stop)
    assert json.loads(modules_file.read_text(encoding="utf-8")) == []


async def test_every_span_of_a_session_holds_against_the_pinned_genai_conventions(harness: Traced) -> None:
    """Each ``gen_ai.*`` attribute is in the registry; each required one, and each conditionally required one
    whose condition holds, is present, on every span of a turn with a read, a failed tool and an approval."""
    conventions = load_conventions()
    collected: list[ExportedSpan] = []
    for flow in (harness.flows.main, harness.flows.content):
        sessions = harness.sessions(flow)
        session = harness.stack.new_session_id("conventions")
        harness.stack.scripts.set_turns(
            session,
            [
                [
                    ScriptedResponse(
                        tool_calls=(_read("read-1"), _read("read-2", error="the store is closed"))
                    ),
                    ScriptedResponse(tool_calls=(_refund("refund-1"),)),
                    ScriptedResponse(text="Refunded A-1."),
                ]
            ],
        )
        await sessions.start_session(session, "Refund order A-1")
        await _pending_approval(harness, flow, session)
        assert await sessions.resolve_interrupt(session, "refund-1", approved=True)
        await wait_for_turn_end(sessions, session, 1)
        spans = await harness.wait_for_spans(session, 8)
        assert {str(span.attribute("gen_ai.operation.name")) for span in spans} == {
            "invoke_agent",
            "chat",
            "execute_tool",
        }
        assert any(span.status == "ERROR" for span in spans)
        collected.extend(spans)
    print(f"\nGenAI conventions {CONVENTIONS_COMMIT}: attributes per span kind\n")
    print(attribute_table(conventions, collected))
    # ScriptedRunner does not stream, so gen_ai.request.stream must be absent.
    assert conventions_problems(conventions, collected) == []
