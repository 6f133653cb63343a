"""Each tool part in the UI step of the model call that asked for it, and what each AI SDK major is sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio

from dex_agents import AgentSnapshot
from dex_agents.testing import ScriptedResponse, read_agent_events, wait_until
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentSessionStatus,
    AgentState,
    AgentToolCall,
    AgentUsage,
    InterruptKind,
    ToolCallStatus,
    ToolEffect,
)
from dex_agents.web import EventStreamTimings, create_agent_web_app
from dex_agents.web._ai_sdk import AiSdkDialect
from dex_agents.web._ui_translator import Chunk, TurnTranslator
from tests.web_support import answered_message, api, chat_response, serve, sse_events, user_message

TIMINGS = EventStreamTimings(long_poll_seconds=2, settle_seconds=1)
#: How many times the live race test runs the approval turn, and how many at once.
RACE_REPETITIONS = 50
RACE_CONCURRENCY = 5


def _steps(chunks: list[Chunk]) -> list[list[str]]:
    """The chunks between each ``start-step`` and its ``finish-step``, as ``type`` or ``type toolCallId``."""
    steps: list[list[str]] = []
    current: list[str] | None = None
    for chunk in chunks:
        if chunk["type"] == "start-step":
            current = []
        elif chunk["type"] == "finish-step":
            assert current is not None
            steps.append(current)
            current = None
        elif current is not None:
            call = chunk.get("toolCallId")
            current.append(f"{chunk['type']} {call}" if call else chunk["type"])
    return steps


# --- The translator, fed a snapshot that already holds a later model call's records -----------------------


def _event(kind: str, step: str, payload: dict[str, Any], attempt: int = 1) -> AgentEvent:
    return AgentEvent(kind, "turn-1", attempt, json.dumps(payload, sort_keys=True), step)


def _record(call_id: str, status: ToolCallStatus, order: int, output: str | None = None) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        turn_id="turn-1",
        tool_name=call_id.split("-")[0],
        arguments='{"order_id":"A-1"}',
        effect=ToolEffect.READ,
        requires_approval=status is ToolCallStatus.AWAITING_APPROVAL,
        status=status,
        output=output,
        deferral_order=order,
    )


def _snapshot(*records: AgentToolCall) -> AgentSnapshot:
    approvals = tuple(
        AgentInterrupt(
            interrupt_id=record.tool_call_id,
            kind=InterruptKind.TOOL_APPROVAL,
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            arguments=record.arguments,
            created_at="2026-01-01T00:00:00Z",
            deadline=None,
        )
        for record in records
        if record.status is ToolCallStatus.AWAITING_APPROVAL
    )
    state = AgentState(AgentSessionStatus.RUNNING_TOOLS, 1, "turn-1", 2, None)
    return AgentSnapshot(state, (), approvals, records, AgentUsage(), 0)


def test_a_later_model_calls_records_wait_for_that_calls_step() -> None:
    translator = TurnTranslator({})
    lookup_done = _record("lookup-1", ToolCallStatus.SUCCEEDED, 0, '{"status":"paid"}')
    refund = _record("refund-1", ToolCallStatus.AWAITING_APPROVAL, 0)
    # The snapshot read when the lookup's Step starts already shows RunModel-2's refund call.
    late = _snapshot(lookup_done, refund)
    chunks: list[Chunk] = [{"type": "start"}]
    chunks += translator.on_event(_event("tool_call_deferred", "RunModel-1", {"tool_call_id": "lookup-1"}))
    chunks += translator.sync(late, "turn-1")
    chunks += translator.on_event(_event("tool_call_started", "CallTool-1", {"tool_call_id": "lookup-1"}))
    chunks += translator.on_event(_event("tool_call_finished", "CallTool-1", {"tool_call_id": "lookup-1"}))
    chunks += translator.sync(late, "turn-1")  # RunModel-2's first event makes the stream sync
    chunks += translator.on_event(_event("tool_call_deferred", "RunModel-2", {"tool_call_id": "refund-1"}))
    chunks += translator.sync(late, "turn-1", every_call=True)  # the idle read
    assert translator.waits_only_for_the_user(late, "turn-1")
    chunks += translator.close_step()
    assert _steps(chunks) == [
        ["tool-input-available lookup-1", "tool-output-available lookup-1"],
        ["tool-input-available refund-1", "tool-approval-request refund-1"],
    ]


def test_a_call_whose_event_was_lost_shows_once_every_event_was_read() -> None:
    translator = TurnTranslator({})
    snapshot = _snapshot(_record("refund-1", ToolCallStatus.AWAITING_APPROVAL, 0))
    chunks = translator.on_event(_event("text_delta", "RunModel-1", {"text": "Checking."}))
    assert translator.sync(snapshot, "turn-1") == []
    chunks += translator.sync(snapshot, "turn-1", every_call=True)
    assert [chunk["type"] for chunk in chunks[-2:]] == ["tool-input-available", "tool-approval-request"]


@pytest.mark.parametrize("dialect", [AiSdkDialect.V5, AiSdkDialect.V6])
def test_clients_without_reset_step_get_a_model_calls_text_once_its_attempt_committed(
    dialect: AiSdkDialect,
) -> None:
    translator = TurnTranslator({}, dialect)
    chunks = translator.on_event(_event("text_delta", "RunModel-1", {"text": "Draft "}))
    assert chunks == [{"type": "start-step"}]
    assert translator.on_event(_event("text_delta", "RunModel-1", {"text": "Shipped."}, attempt=2)) == []
    released = translator.release_held()
    assert [chunk["type"] for chunk in released] == ["text-start", "text-delta", "text-end"]
    assert released[1]["delta"] == "Shipped."
    assert translator.release_held() == []


# --- Against a devserver and a Worker --------------------------------------------------------------------

on_module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def web(module_harness: MatrixHarness) -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_web_app(module_harness.sessions, allow_any_session=True, timings=TIMINGS)
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        yield http


async def _chat(
    web: httpx.AsyncClient, session: str, message: dict[str, Any], major: int | None = None
) -> list[Chunk]:
    headers = {} if major is None else {"x-dex-ai-sdk": str(major)}
    async with web.stream(
        "POST", f"{api(session)}/chat", json={"id": session, "messages": [message]}, headers=headers
    ) as response:
        assert response.status_code == 200, await response.aread()
        chunks = [event.json() async for event in sse_events(response) if event.data != "[DONE]"]
    return chunks


async def _approval_turn(harness: MatrixHarness, web: httpx.AsyncClient, repetition: int) -> None:
    session = harness.stack.new_session_id(f"web-steps-{repetition}")
    lookup = harness.call(harness.tools.read, "lookup-1")
    refund = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        [
            ScriptedResponse(tool_calls=(lookup,)),
            ScriptedResponse(tool_calls=(refund,)),
            ScriptedResponse(text="Refunded."),
        ],
    )
    await harness.sessions.start_session(session)
    first = await _chat(web, session, user_message("Refund A-1"))
    assert _steps(first) == [
        ["tool-input-available lookup-1", "tool-output-available lookup-1"],
        ["tool-input-available refund-1", "tool-approval-request refund-1"],
    ], f"repetition {repetition}: {first}"
    assert [first[0]["type"], first[-1]["type"], first[-1]["finishReason"]] == [
        "start",
        "finish",
        "tool-calls",
    ]
    second = await _chat(web, session, answered_message(first, approvals={"refund-1": (True, None)}))
    assert [chunk["type"] for chunk in second[:2]] == ["start", "tool-output-available"]
    assert _steps(second) == [["text-start", "text-delta", "text-end"]], f"repetition {repetition}: {second}"
    assert second[-1]["finishReason"] == "stop"


@on_module_loop
async def test_every_tool_part_is_in_its_model_calls_step_in_many_instant_approval_turns(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    for batch in range(0, RACE_REPETITIONS, RACE_CONCURRENCY):
        turns = range(batch, min(batch + RACE_CONCURRENCY, RACE_REPETITIONS))
        await asyncio.gather(*(_approval_turn(harness, web, repetition) for repetition in turns))


@on_module_loop
async def test_ai_sdk_5_gets_no_approval_or_denial_chunks_and_approves_with_a_tool_result(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-steps-v5")
    first_refund = harness.call(harness.tools.approval_write, "refund-1")
    second_refund = harness.call(harness.tools.approval_write, "refund-2", order_id="A-2")
    harness.script(
        session,
        [
            ScriptedResponse(text="Refunding.", tool_calls=(first_refund, second_refund)),
            ScriptedResponse(text="One refunded."),
        ],
    )
    await harness.sessions.start_session(session)
    first = await _chat(web, session, user_message("Refund A-1 and A-2"), major=5)
    assert _steps(first) == [
        [
            "text-start",
            "text-delta",
            "text-end",
            "tool-input-available refund-1",
            "tool-input-available refund-2",
        ]
    ]
    assert first[-1]["finishReason"] == "tool-calls"
    answers: dict[str, object] = {
        "refund-1": {"approved": True},
        "refund-2": {"approved": False, "reason": "not this one"},
    }
    second = await _chat(web, session, answered_message(first, outputs=answers), major=5)
    outcomes = {chunk["toolCallId"]: chunk for chunk in second if chunk["type"].startswith("tool-output")}
    assert outcomes["refund-1"]["type"] == "tool-output-available"
    assert outcomes["refund-2"]["type"] == "tool-output-error"
    assert "not this one" in outcomes["refund-2"]["errorText"]
    assert not {chunk["type"] for chunk in first + second} & {"tool-approval-request", "tool-output-denied"}
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1


@on_module_loop
async def test_an_unknown_ai_sdk_major_is_refused(harness: MatrixHarness, web: httpx.AsyncClient) -> None:
    session = harness.stack.new_session_id("web-steps-major")
    await harness.sessions.start_session(session)
    response = await web.post(
        f"{api(session)}/chat?ai_sdk=4", json={"id": session, "messages": [user_message("Hi")]}
    )
    assert response.status_code == 400 and "x-dex-ai-sdk" in response.text


@on_module_loop
@pytest.mark.parametrize("major", [6, 5])
async def test_older_clients_get_no_reset_step_and_only_the_committed_attempts_text(
    harness: MatrixHarness, web: httpx.AsyncClient, major: int
) -> None:
    session = harness.stack.new_session_id(f"web-steps-retry-{major}")
    harness.script(session, [ScriptedResponse(text="Shipped.", partial_text="Draft ", gate="answer")])
    await harness.sessions.start_session(session)
    chunks: list[Chunk] = []

    async def read_the_stream() -> None:
        async for chunk in chat_response_for(web, session, user_message("Where is A-1?"), major):
            chunks.append(chunk)

    streaming = asyncio.create_task(read_the_stream())
    await harness.stack.gate(session, "answer").wait_until_reached()
    await wait_until(
        "the stream to start its step", lambda: {"type": "start-step"} in chunks or streaming.done()
    )

    async def draft_in_the_stream() -> bool:
        events = await read_agent_events(harness.sessions, session, quiet=timedelta(seconds=1))
        return any(event.type == "text_delta" for event in events)

    # Held, so the browser never sees it: wait for the first attempt's text on the session's Stream.
    await wait_until("the first attempt's text to reach the Stream", draft_in_the_stream)
    await harness.replace_worker()
    await streaming
    assert [chunk["type"] for chunk in chunks] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert [chunk["delta"] for chunk in chunks if chunk["type"] == "text-delta"] == ["Draft ", "Shipped."]


async def chat_response_for(
    web: httpx.AsyncClient, session: str, message: dict[str, Any], major: int
) -> AsyncIterator[Chunk]:
    async with web.stream(
        "POST",
        f"{api(session)}/chat?ai_sdk={major}",
        json={"id": session, "messages": [message]},
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for event in sse_events(response):
            if event.data == "[DONE]":
                return
            yield event.json()


@on_module_loop
async def test_resume_replays_the_active_turn_and_answers_204_without_one(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-steps-resume")
    refund = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session, [ScriptedResponse(text="Refunding.", tool_calls=(refund,)), ScriptedResponse(text="Done.")]
    )
    await harness.sessions.start_session(session)
    assert (await web.get(f"{api(session)}/chat/{session}/stream")).status_code == 204
    first = await _chat(web, session, user_message("Refund A-1"))
    async with web.stream("GET", f"{api(session)}/chat/{session}/stream") as response:
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        resumed = [event.json() async for event in sse_events(response) if event.data != "[DONE]"]
    assert _steps(resumed) == _steps(first)
    assert resumed[-1]["finishReason"] == "tool-calls"
    second = [
        chunk
        async for chunk in chat_response(
            web, session, answered_message(resumed, approvals={"refund-1": (True, None)})
        )
    ]
    assert second[-1]["finishReason"] == "stop"
    assert (await web.get(f"{api(session)}/chat/{session}/stream")).status_code == 204
