"""Steering, deleting queued messages and cancelling turns through the web app, over real sessions.

The module runs the steering tests' Flows (``tests.control_agents``) on its own stack, because one of them
can rewrite a turn's state as a Worker without steering does. Every test ends with a normal turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from dex_agents import MAX_USER_MESSAGE_BYTES, AgentSessionClient, AgentSnapshot, MessageRole
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    read_agent_events,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from dex_agents.web import EventStreamTimings, create_agent_web_app
from tests.agents import CORE_DIR
from tests.control_agents import ControlFlows, build_control_flows
from tests.web_support import (
    JSON_HEADERS,
    SseEvent,
    api,
    chat,
    chat_response,
    chunk_types,
    serve,
    sse_events,
    user_message,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

REFUND = "refund_order"
NO_SUCH_MESSAGE = "0190e4c1-no-such-message"


class Web:
    """The module's stack, the main control Flow's sessions, and an HTTP client of the app serving them."""

    def __init__(self, stack: AgentTestStack, flows: ControlFlows, http: httpx.AsyncClient) -> None:
        self.stack = stack
        self.flows = flows
        self.sessions: AgentSessionClient = stack.sessions(flows.main)
        self.http = http

    def script(self, session: str, *turns: list[ScriptedResponse]) -> None:
        self.stack.scripts.set_turns(session, turns)

    def model_inputs(self, session: str, turn_id: str) -> list[str]:
        return [call.model_input_text for call in self.stack.invocations.model_calls(session, turn_id)]

    async def post(self, session: str, path: str, body: Any) -> httpx.Response:
        return await self.http.post(f"{api(session)}{path}", json=body)

    async def finish_with_a_normal_turn(self, session: str, turn_count: int) -> AgentSnapshot:
        sent = await self.post(session, "/messages", {"text": "Still there?"})
        assert sent.status_code == 202, sent.text
        done = await wait_for_turn_end(self.sessions, session, turn_count)
        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert [message.text for message in done.messages[-2:]] == ["Still there?", "Yes."], done.messages
        return done


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_web(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Web]:
    flows = build_control_flows()
    async with AgentTestStack(
        tmp_path_factory.mktemp("web-control"), flows.all, "tests.control_worker", worker_cwd=CORE_DIR
    ) as stack:
        app = create_agent_web_app(
            stack.sessions(flows.main),
            allow_any_session=True,
            timings=EventStreamTimings(long_poll_seconds=2, settle_seconds=1),
        )
        async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=60) as http:
            yield Web(stack, flows, http)


@pytest_asyncio.fixture(loop_scope="module")
async def web(module_web: Web) -> Web:
    if not module_web.stack.workers:
        await module_web.stack.start_worker()
    return module_web


def _refund(tool_call_id: str, order_id: str) -> ScriptedToolCall:
    return ScriptedToolCall(REFUND, {"order_id": order_id}, tool_call_id)


async def _pending(web: Web, session: str, interrupt_id: str) -> AgentSnapshot:
    return await wait_for_agent_snapshot(
        web.sessions,
        session,
        lambda snapshot: snapshot
        if any(item.interrupt_id == interrupt_id for item in snapshot.pending_interrupts)
        else None,
        description=f"a pending approval of {interrupt_id}",
    )


def _assert_refused(response: httpx.Response, status: int, words: str) -> None:
    assert response.status_code == status, (response.request.url, response.request.content, response.text)
    assert words in response.json()["error"], (response.request.url, response.request.content, response.text)


async def test_steer_by_message_id_and_by_text_delete_and_every_refusal(web: Web) -> None:
    session = web.stack.new_session_id("web-steer")
    web.script(
        session,
        [ScriptedResponse(text="I can refund A-1.", tool_calls=(_refund("refund-1", "A-1"),))],
        [ScriptedResponse(text="A-2 is on its way.", gate="model")],
        [ScriptedResponse(text="A-3 too.")],
        [ScriptedResponse(text="Yes.")],
    )
    await web.sessions.start_session(session, "Refund A-1")
    await _pending(web, session, "refund-1")
    for text in ("Forget this", "Where is A-2?"):
        sent = await web.post(session, "/messages", {"text": text})
        assert sent.status_code == 202, sent.text
    snapshot = (await web.http.get(f"{api(session)}/snapshot")).json()
    assert snapshot["state"]["accepts_turn_control"] is True
    queued = snapshot["queued_messages"]
    assert [item["message"]["text"] for item in queued] == ["Forget this", "Where is A-2?"]
    forget, keep = (item["message_id"] for item in queued)

    oversized = "x" * (MAX_USER_MESSAGE_BYTES + 1)
    cases: list[tuple[httpx.Response, int, str]] = [
        (
            await web.post(session, "/steer", {}),
            400,
            "exactly one of 'text' (a new message) and 'message_id' (a queued message), got neither",
        ),
        (await web.post(session, "/steer", {"text": None, "message_id": None}), 400, "got neither"),
        (await web.post(session, "/steer", {"text": "both", "message_id": keep}), 400, "got both"),
        (await web.post(session, "/steer", {"text": " \n\t"}), 422, "must not be blank"),
        (await web.post(session, "/steer", {"text": 7}), 400, "'text' must be a string"),
        (await web.post(session, "/steer", {"message_id": 7}), 400, "'message_id' must be a string"),
        (await web.post(session, "/steer", {"message_id": "has space"}), 400, "a message ID must be"),
        (await web.post(session, "/steer", {"message_id": NO_SUCH_MESSAGE}), 409, "is not queued"),
        (await web.post(session, "/steer", {"text": oversized}), 413, "byte limit"),
        (
            await web.http.post(f"{api(session)}/steer", data={"text": "a form"}),
            415,
            "application/json",
        ),
        (await web.post(session, f"/queued/{NO_SUCH_MESSAGE}/delete", {}), 409, "is not queued"),
        (await web.post(session, "/queued/%20/delete", {}), 400, "a message ID must be"),
        (
            await web.http.post(f"{api(session)}/queued/{forget}/delete", content=b"", headers=JSON_HEADERS),
            400,
            "not JSON",
        ),
        (
            await web.post(session, "/cancel", {"turn_id": "turn-7"}),
            409,
            "the turn 'turn-7' is not running (the running turn is 'turn-1')",
        ),
        (await web.post(session, "/cancel", {"turn_id": 7}), 400, "'turn_id' must be a string or null"),
        (await web.post(session, "/cancel", {"turn_id": ""}), 400, "a turn ID must be"),
    ]
    for response, status, words in cases:
        _assert_refused(response, status, words)
    unchanged = await web.sessions.get_agent_snapshot(session)
    assert [item.message_id for item in unchanged.queued_messages] == [forget, keep]
    assert unchanged.steered_messages == () and [i.interrupt_id for i in unchanged.pending_interrupts] == [
        "refund-1"
    ]

    deleted = await web.post(session, f"/queued/{forget}/delete", {})
    assert (deleted.status_code, deleted.json()) == (200, {"deleted": True})
    _assert_refused(await web.post(session, f"/queued/{forget}/delete", {}), 409, "is not queued")
    _assert_refused(await web.post(session, "/steer", {"message_id": forget}), 409, "is not queued")

    # Steering the queued message abandons the approval and starts the next turn with that message.
    steered = await web.post(session, "/steer", {"message_id": keep})
    assert (steered.status_code, steered.json()) == (202, {"steered": True})
    await web.stack.gate(session, "model").wait_until_reached()
    [second_input] = web.model_inputs(session, "turn-2")
    assert "Where is A-2?" in second_input and "superseded_by_steered_user_message" in second_input
    # During a model call a steer by text applies once the call ends: here the next turn's start.
    by_text = await web.post(session, "/steer", {"text": "And A-3?"})
    assert by_text.status_code == 202, by_text.text
    web.stack.gate(session, "model").release()
    third = await wait_for_turn_end(web.sessions, session, 3)
    assert [(message.turn_id, message.text) for message in third.messages if message.text] == [
        ("turn-1", "Refund A-1"),
        ("turn-1", "I can refund A-1."),
        ("turn-2", "Where is A-2?"),
        ("turn-2", "A-2 is on its way."),
        ("turn-3", "And A-3?"),
        ("turn-3", "A-3 too."),
    ]
    assert not web.stack.invocations.tool_calls(session, REFUND)
    assert not any(
        "Forget this" in text for turn in ("turn-2", "turn-3") for text in web.model_inputs(session, turn)
    )

    _assert_refused(await web.post(session, "/cancel", {}), 409, "no turn is running")
    await web.finish_with_a_normal_turn(session, 4)


async def test_cancel_stops_a_model_call_and_the_ui_stream_ends_the_turn(web: Web) -> None:
    session = web.stack.new_session_id("web-cancel")
    web.script(
        session,
        [ScriptedResponse(partial_text="Thinking about A-1... ", block_until_cancelled=True)],
        [ScriptedResponse(text="Yes.")],
    )
    await web.sessions.start_session(session)
    chunks: list[dict[str, Any]] = []
    async for chunk in chat_response(web.http, session, user_message("Where is A-1?")):
        chunks.append(chunk)
        if chunk["type"] == "text-delta":
            # The model call is running (it streamed its start) and never answers: stop it, naming the turn.
            cancelled = await web.post(session, "/cancel", {"turn_id": "turn-1"})
            assert (cancelled.status_code, cancelled.json()) == (202, {"cancel_requested": True})
    assert chunk_types(chunks) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert chunks[3]["delta"] == "Thinking about A-1... "
    finish = chunks[-1]
    assert finish["finishReason"] == "other"
    assert finish["messageMetadata"]["dex"]["turn_end"] == "turn_cancelled"
    assert finish["messageMetadata"]["dex"]["turn_id"] == "turn-1"

    await wait_until(
        "the model call's coroutine to be cancelled",
        lambda: web.stack.invocations.cancelled_model_calls(session, "turn-1"),
    )
    ended = await web.sessions.get_agent_snapshot(session)
    assert (
        ended.state is not None and ended.state.active_turn_id is None and ended.state.last_turn_error is None
    )
    # The cancelled call's partial text was never stored.
    assert [m.text for m in ended.messages if m.role is MessageRole.ASSISTANT] == []
    events = [event.type for event in await read_agent_events(web.sessions, session)]
    assert events.count("turn_cancelled") == 1 and "turn_failed" not in events
    _assert_refused(await web.post(session, "/cancel", {"turn_id": "turn-1"}), 409, "no turn is running")
    await web.finish_with_a_normal_turn(session, 2)


async def test_a_turn_that_a_worker_without_steering_started_is_refused_with_the_reason(web: Web) -> None:
    session = web.stack.new_session_id("web-earlier-worker")
    web.script(session, [ScriptedResponse(text="Done.", gate="model")], [ScriptedResponse(text="Yes.")])
    await web.sessions.start_session(session, "Hi")
    await web.stack.gate(session, "model").wait_until_reached()
    assert await web.stack.client.invoke_rpc(web.flows.main.write_state_as_earlier_worker, session)

    _assert_refused(
        await web.post(session, "/steer", {"text": "Stop"}), 409, "does not accept steering (a Worker without"
    )
    _assert_refused(await web.post(session, "/cancel", {}), 409, "cannot be cancelled (a Worker without")
    snapshot = (await web.http.get(f"{api(session)}/snapshot")).json()
    assert snapshot["state"]["accepts_turn_control"] is False
    assert snapshot["steered_messages"] == [] and snapshot["queued_messages"] == []
    web.stack.gate(session, "model").release()
    await wait_for_turn_end(web.sessions, session, 1)
    await web.finish_with_a_normal_turn(session, 2)


async def test_a_steer_and_a_cancel_of_one_turn_end_it_cancelled_and_start_the_next(web: Web) -> None:
    session = web.stack.new_session_id("web-both")
    web.script(
        session,
        [ScriptedResponse(block_until_cancelled=True)],
        [ScriptedResponse(text="A-2 is on its way.")],
        [ScriptedResponse(text="Yes.")],
    )
    await web.sessions.start_session(session, "Where is A-1?")
    await wait_until("the model call to start", lambda: web.stack.invocations.model_calls(session, "turn-1"))
    steered = await web.post(session, "/steer", {"text": "Where is A-2?"})
    assert steered.status_code == 202, steered.text
    cancelled = await web.post(session, "/cancel", {})
    assert cancelled.status_code == 202, cancelled.text
    done = await wait_for_turn_end(web.sessions, session, 2)
    assert [message.text for message in done.messages if message.text] == [
        "Where is A-1?",
        "Where is A-2?",
        "A-2 is on its way.",
    ]
    events = await read_agent_events(web.sessions, session)
    ends = [(event.type, event.turn_id) for event in events if event.type.startswith("turn_")]
    assert ends == [
        ("turn_started", "turn-1"),
        ("turn_cancelled", "turn-1"),
        ("turn_started", "turn-2"),
        ("turn_completed", "turn-2"),
    ], ends
    await web.finish_with_a_normal_turn(session, 3)


async def _events_until_turn_starts(web: Web, session: str, token: str, turn_id: str) -> list[SseEvent]:
    events: list[SseEvent] = []
    async with web.http.stream("GET", f"{api(session)}/events", params={"after": token}) as response:
        assert response.status_code == 200
        async for event in sse_events(response):
            events.append(event)
            if event.event == "turn_started" and event.json()["turn_id"] == turn_id:
                return events
    raise AssertionError(f"the event stream ended before {turn_id} started: {events}")


async def test_both_streams_deliver_a_steered_turns_end_though_the_next_turn_starts_at_once(web: Web) -> None:
    """The Step that ends a steered turn writes the next turn's start before it commits the end."""
    session = web.stack.new_session_id("web-steered-streams")
    read = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "read-1", gate="lookup")
    web.script(
        session,
        [ScriptedResponse(text="Looking.", tool_calls=(read,))],
        [ScriptedResponse(text="A-2 is on its way.")],
        [ScriptedResponse(text="Yes.")],
    )
    await web.sessions.start_session(session)
    token = (await web.http.get(f"{api(session)}/snapshot")).json()["resume_token"]
    plain = asyncio.create_task(_events_until_turn_starts(web, session, token, "turn-2"))
    ui = asyncio.create_task(chat(web.http, session, user_message("Where is A-1?")))
    gate = web.stack.gate(session, "lookup")
    await gate.wait_until_reached()
    # The read has started, so it runs to its end; the turn ends steered once its result is in.
    steered = await web.post(session, "/steer", {"text": "Where is A-2?"})
    assert steered.status_code == 202, steered.text
    gate.release()

    chunks = await ui
    assert chunk_types(chunks)[-3:] == ["tool-output-available", "finish-step", "finish"], chunks
    assert (chunks[-1]["finishReason"], chunks[-1]["messageMetadata"]["dex"]["turn_end"]) == (
        "other",
        "turn_steered",
    )
    events = await plain
    ends = [
        (event.event, event.json()["turn_id"])
        for event in events
        if event.event in ("turn_started", "turn_steered")
    ]
    assert ends == [("turn_started", "turn-1"), ("turn_steered", "turn-1"), ("turn_started", "turn-2")], ends
    done = await wait_for_turn_end(web.sessions, session, 2)
    assert done.messages[-1].text == "A-2 is on its way."
    assert len(web.stack.invocations.tool_calls(session, "lookup_order")) == 1
    await web.finish_with_a_normal_turn(session, 3)
