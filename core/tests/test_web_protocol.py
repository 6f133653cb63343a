"""The web app's endpoints over real sessions: snapshot, SSE, actions, bad input, the AI SDK stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from dex_agents import AgentSnapshot, MessageRole
from dex_agents.testing import (
    ScriptedResponse,
    read_agent_events,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings, create_agent_web_app
from tests.web_support import (
    JSON_HEADERS,
    SseEvent,
    answered_message,
    api,
    chat,
    chat_response,
    chunk_types,
    serve,
    sse_events,
    user_message,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMINGS = EventStreamTimings(long_poll_seconds=2, settle_seconds=1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def web(module_harness: MatrixHarness) -> AsyncIterator[httpx.AsyncClient]:
    app = create_agent_web_app(module_harness.sessions, allow_any_session=True, timings=TIMINGS)
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        yield http


async def _pending_approval(harness: MatrixHarness, session: str) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        harness.sessions, session, lambda snapshot: snapshot if snapshot.pending_interrupts else None
    )


async def _sse_until(
    web: httpx.AsyncClient, url: str, stop_type: str, headers: dict[str, str] | None = None
) -> list[SseEvent]:
    events: list[SseEvent] = []
    async with web.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200
        async for event in sse_events(response):
            events.append(event)
            if event.event == stop_type:
                break
    return events


async def test_snapshot_hides_step_fields_and_actions_resolve_the_approval(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-snapshot")
    read = harness.call(harness.tools.read, "read-1")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        [ScriptedResponse(text="Checking.", tool_calls=(read, write)), ScriptedResponse(text="Done.")],
    )
    await harness.sessions.start_session(session, "Refund A-1")
    await _pending_approval(harness, session)

    response = await web.get(f"{api(session)}/snapshot")
    assert response.status_code == 200 and response.headers["cache-control"] == "no-store"
    snapshot = response.json()
    assert snapshot["state"]["active_turn_id"] == "turn-1"
    assert [item["interrupt_id"] for item in snapshot["pending_interrupts"]] == ["refund-1"]
    assert all("framework_item" not in message for message in snapshot["messages"])
    hidden = {"tool_source_reference", "trace_context", "input_continuation", "input_answers"}
    hidden.add("task_answer_pending")
    for record in snapshot["tool_calls"]:
        assert hidden.isdisjoint(record), record
        assert {"tool_call_id", "status", "effect", "arguments"} <= set(record)
    # The token opens before the active turn's first event, so the turn's live text can be replayed.
    events = await _sse_until(web, f"{api(session)}/events?after={snapshot['resume_token']}", "text_delta")
    assert events[0].event == "turn_started" and events[-1].json()["payload"] == {"text": "Checking."}

    rejected = await web.post(f"{api(session)}/interrupts/refund-1/approve", json={})
    assert rejected.status_code == 200 and rejected.json() == {"resolved": True}
    again = await web.post(f"{api(session)}/interrupts/refund-1/approve", json={})
    assert again.status_code == 409 and "not pending" in again.json()["error"]
    ended = await wait_for_turn_end(harness.sessions, session, 1)
    assert ended.messages[-1].text == "Done."
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1


async def test_sse_ids_are_resume_tokens_and_resume_exactly(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-sse")
    read = harness.call(harness.tools.read, "read-1")
    harness.script(
        session, [ScriptedResponse(text="Looking.", tool_calls=(read,)), ScriptedResponse(text="Here.")]
    )
    await harness.sessions.start_session(session, "Where is A-1?")
    events = await _sse_until(web, f"{api(session)}/events?after=", "turn_completed")
    # A turn's end is sent once it committed: the snapshot read right after it shows the ended turn.
    snapshot = (await web.get(f"{api(session)}/snapshot")).json()
    assert snapshot["state"]["active_turn_id"] is None
    assert snapshot["messages"][-1]["text"] == "Here."

    stored = await read_agent_events(harness.sessions, session)
    assert [event.event for event in events] == [event.type for event in stored]
    assert all(event.id for event in events)
    assert [event.json()["step_execution_id"] for event in events] == [e.step_execution_id for e in stored]
    middle = len(events) // 2
    # EventSource reconnects with Last-Event-ID; the stream goes on right after that event.
    resumed = await _sse_until(
        web,
        f"{api(session)}/events?after=",
        "turn_completed",
        headers={"last-event-id": events[middle].id or ""},
    )
    assert [(event.id, event.event) for event in resumed] == [(e.id, e.event) for e in events[middle + 1 :]]


async def test_a_rejected_token_gets_400_before_the_stream(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-token")
    harness.script(session, [ScriptedResponse(text="Hi.")])
    await harness.sessions.start_session(session, "Hello")
    await wait_for_turn_end(harness.sessions, session, 1)
    response = await web.get(f"{api(session)}/events?after=not-a-token")
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    assert "rejected" in response.json()["error"]
    missing = await web.get(f"{api(session)}/events")
    assert missing.status_code == 400 and "after=" in missing.json()["error"]


NO_PARTS: list[dict[str, Any]] = []


async def test_every_bad_input_is_a_clear_4xx_and_the_session_stays_usable(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-bad")
    harness.script(session, [ScriptedResponse(text="First.")], [ScriptedResponse(text="Second.")])
    await harness.sessions.start_session(session, "One")
    await wait_for_turn_end(harness.sessions, session, 1)
    base = api(session)
    cases: list[tuple[httpx.Response, int, str]] = [
        (await web.get("/api/sessions/bad%20id/snapshot"), 400, "not a valid session ID"),
        (await web.get(f"/api/sessions/{'x' * 200}/snapshot"), 400, "not a valid session ID"),
        (await web.get("/api/sessions/no-such-session/snapshot"), 404, "no running session"),
        (await web.post(f"{base}/messages", json={"text": "   "}), 422, "must not be blank"),
        (await web.post(f"{base}/messages", json={"text": 7}), 400, "must be a string"),
        (await web.post(f"{base}/messages", json=["text"]), 400, "must be a JSON object"),
        (await web.post(f"{base}/messages", content=b"{not json", headers=JSON_HEADERS), 400, "not JSON"),
        (await web.post(f"{base}/messages", data={"text": "form post"}), 415, "application/json"),
        (
            await web.post(f"{base}/messages", content=b"x" * (1024 * 1024 + 1), headers=JSON_HEADERS),
            413,
            "limit",
        ),
        (await web.post(f"{base}/interrupts/nope/approve", json={}), 409, "not pending"),
        (
            await web.post(f"{base}/interrupts/nope/reject", json={"rejection_message": 3}),
            400,
            "string or null",
        ),
        (await web.post(f"{base}/interrupts/nope/answer", json={"answer": "yes"}), 409, "not pending"),
        (await web.post(f"{base}/plan/execute", json={"revision": "1"}), 400, "must be an integer"),
        (await web.post(f"{base}/plan/execute", json={"revision": 1}), 409, "has no plan to execute"),
        (await web.post(f"{base}/chat", json={"messages": []}), 400, "non-empty 'messages'"),
        (
            await web.post(f"{base}/chat", json={"messages": [{"role": "user", "parts": NO_PARTS}]}),
            422,
            "no text",
        ),
        (
            await web.post(f"{base}/chat", json={"messages": [{"role": "system", "parts": NO_PARTS}]}),
            400,
            "role",
        ),
        (await web.get(f"{base}/snapshot/extra"), 404, "Not Found"),
    ]
    for response, status, words in cases:
        assert response.status_code == status, (response.request.url, response.text)
        assert words in response.json()["error"], (response.request.url, response.text)
    sent = await web.post(f"{base}/messages", json={"text": "Two"})
    assert sent.status_code == 202
    snapshot = await wait_for_turn_end(harness.sessions, session, 2)
    assert [message.text for message in snapshot.messages] == ["One", "First.", "Two", "Second."]


async def test_ai_sdk_stream_asks_for_approval_then_continues_after_it(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-ui-approve")
    read = harness.call(harness.tools.read, "read-1")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        [ScriptedResponse(text="Checking.", tool_calls=(read, write)), ScriptedResponse(text="Refunded.")],
    )
    await harness.sessions.start_session(session)
    first = await chat(web, session, user_message("Refund A-1"))
    assert chunk_types(first) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "tool-input-available",
        "tool-input-available",
        "tool-approval-request",
        "tool-output-available",
        "finish-step",
        "finish",
    ]
    assert first[0]["messageId"] == "dex-turn-1" and first[3]["delta"] == "Checking."
    assert [(c["toolCallId"], c["toolName"], c["input"], c["dynamic"]) for c in first[5:7]] == [
        ("read-1", harness.tools.read, {"order_id": "A-1"}, True),
        ("refund-1", harness.tools.approval_write, {"order_id": "A-1"}, True),
    ]
    assert first[7] == {"type": "tool-approval-request", "approvalId": "refund-1", "toolCallId": "refund-1"}
    assert first[8]["toolCallId"] == "read-1"
    assert first[-1]["finishReason"] == "tool-calls"
    assert first[-1]["messageMetadata"]["dex"]["turn_id"] == "turn-1"

    second = await chat(web, session, answered_message(first, approvals={"refund-1": (True, None)}))
    assert chunk_types(second) == [
        "start",
        "tool-output-available",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert second[1]["toolCallId"] == "refund-1" and second[4]["delta"] == "Refunded."
    assert second[-1]["finishReason"] == "stop"
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1


async def test_ai_sdk_stream_shows_a_rejection_and_the_model_reaction(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-ui-reject")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(session, [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Not refunded.")])
    await harness.sessions.start_session(session)
    first = await chat(web, session, user_message("Refund A-1"))
    assert first[-1]["finishReason"] == "tool-calls"
    second = await chat(
        web, session, answered_message(first, approvals={"refund-1": (False, "too expensive")})
    )
    assert chunk_types(second)[:2] == ["start", "tool-output-denied"]
    assert "".join(c["delta"] for c in second if c["type"] == "text-delta") == "Not refunded."
    assert not harness.tool_runs(session, harness.tools.approval_write)
    assert "too expensive" in harness.model_calls(session)[-1].model_input_text


async def test_ai_sdk_stream_resets_the_step_after_a_worker_kill_in_run_model(
    harness: MatrixHarness, web: httpx.AsyncClient
) -> None:
    session = harness.stack.new_session_id("web-ui-reset")
    harness.script(session, [ScriptedResponse(text="Shipped.", partial_text="Draft ", gate="answer")])
    await harness.sessions.start_session(session)
    chunks: list[dict[str, Any]] = []

    async def read_the_stream() -> None:
        async for chunk in chat_response(web, session, user_message("Where is A-1?")):
            chunks.append(chunk)

    streaming = asyncio.create_task(read_the_stream())
    await harness.stack.gate(session, "answer").wait_until_reached()
    # The model call reaches its gate as soon as it hands "Draft " to the Worker, which sends it on a
    # moment later; killed before that, the attempt leaves no event. Kill it once the browser has the text.
    await wait_until(
        "the first attempt's text to stream", lambda: "text-delta" in chunk_types(chunks) or streaming.done()
    )
    await harness.replace_worker()
    await streaming
    assert chunk_types(chunks) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "reset-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    deltas = [chunk["delta"] for chunk in chunks if chunk["type"] == "text-delta"]
    assert deltas == ["Draft ", "Draft ", "Shipped."]
    # The new attempt's text is a new part, so the client never appends it to the dropped one.
    assert chunks[2]["id"] != chunks[5]["id"] == chunks[6]["id"] == chunks[7]["id"]
    snapshot = await harness.sessions.get_agent_snapshot(session)
    assert [m.text for m in snapshot.messages if m.role is MessageRole.ASSISTANT] == ["Shipped."]


async def test_the_page_and_its_files_are_served_and_session_access_hides_sessions(
    harness: MatrixHarness,
) -> None:
    allowed = harness.stack.new_session_id("web-mine")

    async def only_mine(request: Any, session_id: str) -> bool:
        del request
        return session_id == allowed

    app = create_agent_web_app(harness.sessions, session_access=only_mine, timings=TIMINGS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        page = await http.get(f"/sessions/{allowed}")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "../static/chat.js" in page.text
        script = await http.get("/static/chat.js")
        assert script.status_code == 200 and "EventSource" in script.text
        hidden = await http.get(f"/sessions/{allowed}-not")
        assert hidden.status_code == 404 and "no session" in hidden.json()["error"]
        refused = await http.post(f"/api/sessions/{allowed}-not/messages", json={"text": "hi"})
        assert refused.status_code == 404
    no_page = create_agent_web_app(harness.sessions, allow_any_session=True, serve_page=False)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=no_page), base_url="http://localhost"
    ) as http:
        assert (await http.get(f"/sessions/{allowed}")).status_code == 404
