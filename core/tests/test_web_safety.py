"""The web app's safe defaults over real sessions: access per action, hosts, headers, caps, bodies, errors.

Each test builds the app the way an application would and drives it over a real loopback port (or, for the
error mapping, through the ASGI interface with a session client that fails on purpose).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import grpc
import httpx
import pytest
from dex import DexServiceError, ErrorSubStatus
from starlette.requests import Request

from dex_agents import AgentSessionClient
from dex_agents.limits import MAX_USER_MESSAGE_BYTES
from dex_agents.testing import ScriptedResponse, wait_for_agent_snapshot, wait_for_turn_end, wait_until
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings, SessionAction, create_agent_web_app
from tests.web_support import JSON_HEADERS, api, serve, session_waiting_for_approval, user_message

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMINGS = EventStreamTimings(long_poll_seconds=2, settle_seconds=1)


@contextlib.asynccontextmanager
async def _served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        yield http


def _approving_chat_message() -> dict[str, Any]:
    """What ``useChat`` sends back once the user approved ``refund-1``."""
    part = {
        "type": "dynamic-tool",
        "toolName": "refund",
        "toolCallId": "refund-1",
        "state": "approval-responded",
        "input": {},
        "approval": {"id": "refund-1", "approved": True, "reason": None},
    }
    return {"id": "a1", "role": "assistant", "parts": [part], "metadata": {"dex": {"turn_id": "turn-1"}}}


async def test_viewing_and_acting_are_separate_rights(harness: MatrixHarness) -> None:
    session = await session_waiting_for_approval(harness, "web-rights")
    asked: list[tuple[str, SessionAction]] = []

    async def rule(request: Request, session_id: str, action: SessionAction) -> bool:
        user = request.headers.get("x-user")
        asked.append((str(user), action))
        if session_id != session:
            return False
        return user == "owner" or (user == "viewer" and action is SessionAction.VIEW)

    app = create_agent_web_app(harness.sessions, access=rule, timings=TIMINGS)
    async with _served(app) as http:
        viewer = {"x-user": "viewer"}
        seen = await http.get(f"{api(session)}/snapshot", headers=viewer)
        assert seen.status_code == 200 and seen.json()["pending_interrupts"][0]["interrupt_id"] == "refund-1"
        assert (await http.get(f"/sessions/{session}", headers=viewer)).status_code == 200
        for path, body in [
            ("/interrupts/refund-1/approve", {}),
            ("/interrupts/refund-1/reject", {}),
            ("/messages", {"text": "hi"}),
            ("/steer", {"text": "faster"}),
            ("/cancel", {}),
        ]:
            refused = await http.post(f"{api(session)}{path}", json=body, headers=viewer)
            assert refused.status_code == 403, (path, refused.text)
            assert "may view the session" in refused.json()["error"], refused.text
        chat_approval = await http.post(
            f"{api(session)}/chat",
            json={"id": session, "messages": [_approving_chat_message()]},
            headers=viewer,
        )
        assert chat_approval.status_code == 403 and "not approve" in chat_approval.json()["error"]
        chat_send = await http.post(
            f"{api(session)}/chat", json={"id": session, "messages": [user_message("hi")]}, headers=viewer
        )
        assert chat_send.status_code == 403 and "not send" in chat_send.json()["error"]

        stranger = {"x-user": "stranger"}
        assert (await http.get(f"{api(session)}/snapshot", headers=stranger)).status_code == 404
        hidden = await http.post(f"{api(session)}/interrupts/refund-1/approve", json={}, headers=stranger)
        assert hidden.status_code == 404 and "no session" in hidden.json()["error"]
        other = harness.stack.new_session_id("web-rights-other")
        assert (await http.get(f"{api(other)}/snapshot", headers={"x-user": "owner"})).status_code == 404

        snapshot = await harness.sessions.get_agent_snapshot(session)
        assert [item.interrupt_id for item in snapshot.pending_interrupts] == ["refund-1"]
        assert harness.tool_runs(session, harness.tools.approval_write) == []
        approved = await http.post(
            f"{api(session)}/interrupts/refund-1/approve", json={}, headers={"x-user": "owner"}
        )
        assert approved.status_code == 200, approved.text
    await wait_for_turn_end(harness.sessions, session, 1)
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
    assert ("viewer", SessionAction.APPROVE) in asked and ("viewer", SessionAction.CANCEL) in asked


async def test_the_older_session_access_hook_still_decides_viewing_and_acting(harness: MatrixHarness) -> None:
    session = await session_waiting_for_approval(harness, "web-old-hook")

    async def only_with_token(request: Request, session_id: str) -> bool:
        del session_id
        return request.headers.get("authorization") == "Bearer good"

    app = create_agent_web_app(harness.sessions, session_access=only_with_token, timings=TIMINGS)
    async with _served(app) as http:
        assert (await http.get(f"{api(session)}/snapshot")).status_code == 404
        refused = await http.post(f"{api(session)}/interrupts/refund-1/approve", json={})
        assert refused.status_code == 404
        good = {"authorization": "Bearer good"}
        assert (await http.get(f"{api(session)}/snapshot", headers=good)).status_code == 200
        approved = await http.post(f"{api(session)}/interrupts/refund-1/approve", json={}, headers=good)
        assert approved.status_code == 200, approved.text
    await wait_for_turn_end(harness.sessions, session, 1)


async def test_a_request_for_another_host_answers_400(harness: MatrixHarness) -> None:
    session = await session_waiting_for_approval(harness, "web-host")
    app = create_agent_web_app(harness.sessions, allow_any_session=True, timings=TIMINGS)
    async with _served(app) as http:
        # A DNS-rebinding page: its own name, resolved to 127.0.0.1, in Host.
        rebound = {"host": "rebind.attacker.example:8000"}
        approve = await http.post(f"{api(session)}/interrupts/refund-1/approve", json={}, headers=rebound)
        assert approve.status_code == 400 and "allowed_hosts" in approve.json()["error"], approve.text
        assert "rebind.attacker.example" in approve.json()["error"]
        assert approve.headers["x-content-type-options"] == "nosniff"
        assert (await http.get(f"{api(session)}/snapshot", headers=rebound)).status_code == 400
        assert (await http.get(f"/sessions/{session}", headers=rebound)).status_code == 400
        for loopback in ("localhost:8000", "127.0.0.1", "[::1]:8000"):
            response = await http.get(f"{api(session)}/snapshot", headers={"host": loopback})
            assert response.status_code == 200, (loopback, response.text)
        snapshot = await harness.sessions.get_agent_snapshot(session)
        assert [item.interrupt_id for item in snapshot.pending_interrupts] == ["refund-1"]

    named = create_agent_web_app(
        harness.sessions, allow_any_session=True, allowed_hosts=["chat.example.com"], timings=TIMINGS
    )
    async with _served(named) as http:
        assert (await http.get(f"{api(session)}/snapshot")).status_code == 400
        assert (
            await http.get(f"{api(session)}/snapshot", headers={"host": "chat.example.com"})
        ).status_code == 200
        approved = await http.post(
            f"{api(session)}/interrupts/refund-1/approve", json={}, headers={"host": "chat.example.com"}
        )
        assert approved.status_code == 200
    await wait_for_turn_end(harness.sessions, session, 1)


async def test_every_response_carries_the_security_headers(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("web-headers")
    harness.script(session, [ScriptedResponse(text="Hi.")])
    await harness.sessions.start_session(session, "Hello")
    await wait_for_turn_end(harness.sessions, session, 1)
    app = create_agent_web_app(harness.sessions, allow_any_session=True, timings=TIMINGS)
    async with _served(app) as http:
        responses = [
            await http.get(f"/sessions/{session}"),
            await http.get("/static/chat.js"),
            await http.get("/static/chat.css"),
            await http.get(f"{api(session)}/snapshot"),
            await http.get(f"{api('no spaces')}/snapshot"),
            await http.post(
                f"{api(session)}/messages", content=b"{}", headers={"content-type": "text/plain"}
            ),
            await http.get("/nowhere"),
        ]
        async with http.stream("GET", f"{api(session)}/events?after=") as stream:
            responses.append(stream)
        assert [response.status_code for response in responses] == [200, 200, 200, 200, 400, 415, 404, 200]
        for response in responses:
            policy = response.headers["content-security-policy"]
            assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy, response.url
            assert "unsafe-inline" not in policy
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["x-frame-options"] == "DENY"
            assert response.headers["referrer-policy"] == "no-referrer"
        # The page loads its script from a file: nothing inline for the policy to block.
        assert "<script>" not in responses[0].text and 'src="../static/chat.js"' in responses[0].text


async def test_open_streams_are_capped_per_session_and_per_app(harness: MatrixHarness) -> None:
    sessions = [harness.stack.new_session_id(f"web-caps-{index}") for index in range(3)]
    for session in sessions:
        harness.script(session, [ScriptedResponse(text="Hi.")])
        await harness.sessions.start_session(session, "Hello")
        await wait_for_turn_end(harness.sessions, session, 1)
    first, second, third = sessions
    app = create_agent_web_app(
        harness.sessions, allow_any_session=True, max_streams_per_session=2, max_streams=3, timings=TIMINGS
    )
    async with _served(app) as http, contextlib.AsyncExitStack() as streams:

        async def open_events(session: str) -> httpx.Response:
            return await streams.enter_async_context(http.stream("GET", f"{api(session)}/events?after="))

        assert (await open_events(first)).status_code == 200
        held = await open_events(first)
        assert held.status_code == 200
        refused = await open_events(first)
        assert refused.status_code == 429, await refused.aread()
        assert "already has 2 open streams" in json.loads(await refused.aread())["error"]
        chat = await http.post(f"{api(first)}/chat", json={"id": first, "messages": [user_message("hi")]})
        assert chat.status_code == 429 and "open streams" in chat.json()["error"]
        assert (await open_events(second)).status_code == 200
        full = await open_events(third)
        assert full.status_code == 429
        assert "already serves 3 open streams" in json.loads(await full.aread())["error"]
        # A snapshot is no stream: it answers while the streams are at their caps.
        assert (await http.get(f"{api(third)}/snapshot")).status_code == 200

        await held.aclose()

        async def third_opens() -> bool:
            async with http.stream("GET", f"{api(third)}/events?after=") as response:
                return response.status_code == 200

        # The server learns of the closed connection a moment later; then its slot is free again.
        await wait_until("a closed stream's slot to be released", third_opens, timeout=30)


async def test_the_snapshot_of_large_messages_fits_and_older_messages_page(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("web-large")
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        *([ScriptedResponse(text=f"Noted {index}.")] for index in range(4)),
        [ScriptedResponse(text="Refunding.", tool_calls=(write,)), ScriptedResponse(text="Done.")],
        *([ScriptedResponse(text=f"Noted {index}.")] for index in range(4, 7)),
    )
    await harness.sessions.start_session(session)
    app = create_agent_web_app(harness.sessions, allow_any_session=True, timings=TIMINGS)
    large = [chr(ord("a") + index) * MAX_USER_MESSAGE_BYTES for index in range(7)]

    async def send(http: httpx.AsyncClient, text: str) -> None:
        sent = await http.post(f"{api(session)}/messages", json={"text": text})
        assert sent.status_code == 202, sent.text

    async with _served(app) as http:
        for turn, text in enumerate(large[:4], start=1):
            await send(http, text)
            await wait_for_turn_end(harness.sessions, session, turn)
        # Four 256 KiB messages, then a turn that waits for an approval: the page must see the approval.
        await send(http, "Refund A-1")
        await wait_for_agent_snapshot(
            harness.sessions, session, lambda snapshot: snapshot if snapshot.pending_interrupts else None
        )
        response = await http.get(f"{api(session)}/snapshot")
        assert response.status_code == 200, response.text[:500]
        assert [item["interrupt_id"] for item in response.json()["pending_interrupts"]] == ["refund-1"]
        approved = await http.post(f"{api(session)}/interrupts/refund-1/approve", json={})
        assert approved.status_code == 200
        await wait_for_turn_end(harness.sessions, session, 5)

        for turn, text in enumerate(large[4:], start=6):
            await send(http, text)
            await wait_for_turn_end(harness.sessions, session, turn)
        response = await http.get(f"{api(session)}/snapshot")
        assert response.status_code == 200, response.text[:500]
        snapshot = response.json()
        # Seven large messages do not fit one snapshot: it holds the newest, and says where older ones start.
        assert len(response.content) < 2 * 1024 * 1024
        assert snapshot["next_before_sequence"] is not None
        texts = [message["text"] for message in snapshot["messages"]]
        assert large[-1] in texts and large[0] not in texts

        before = snapshot["next_before_sequence"]
        pages = 0
        while before is not None:
            page = await http.get(f"{api(session)}/messages", params={"before": before, "limit": 200})
            assert page.status_code == 200, page.text[:500]
            assert all("framework_item" not in message for message in page.json()["messages"])
            texts = [message["text"] for message in page.json()["messages"]] + texts
            before = page.json()["next_before_sequence"]
            pages += 1
        assert pages >= 1
        users = [text for text in texts if text is not None and len(text) == MAX_USER_MESSAGE_BYTES]
        assert users == large
        assert large[3] in texts[: texts.index("Refund A-1")]

        missing = await http.get(f"{api(session)}/messages")
        assert missing.status_code == 400 and "?before=" in missing.json()["error"]
        wrong = await http.get(f"{api(session)}/messages", params={"before": "1", "limit": "0"})
        assert wrong.status_code == 400 and "limit must be 1-200" in wrong.json()["error"]


async def test_deep_nesting_and_lone_surrogates_answer_400(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("web-bodies")
    harness.script(session, [ScriptedResponse(text="Hi.")])
    await harness.sessions.start_session(session)
    app = create_agent_web_app(harness.sessions, allow_any_session=True, timings=TIMINGS)
    async with _served(app) as http:
        for depth in (65, 1000, 100_000):
            body = b'{"text": ' + b"[" * depth + b"]" * depth + b"}"
            for path in ("/messages", "/chat", "/interrupts/x/approve"):
                response = await http.post(f"{api(session)}{path}", content=body, headers=JSON_HEADERS)
                assert response.status_code == 400, (depth, path, response.text)
                assert "nests arrays and objects more than 64 deep" in response.json()["error"]
        shallow = b'{"text": ' + b"[" * 62 + b"]" * 62 + b"}"
        response = await http.post(f"{api(session)}/messages", content=shallow, headers=JSON_HEADERS)
        assert response.status_code == 400 and "must be a string" in response.json()["error"]

        surrogate = b'{"text": "refund \\ud800 now"}'
        for path in ("/messages", "/steer"):
            response = await http.post(f"{api(session)}{path}", content=surrogate, headers=JSON_HEADERS)
            assert response.status_code == 400, response.text
            assert "not valid Unicode: a lone surrogate (U+D800)" in response.json()["error"]
        in_a_key = b'{"text": "hi", "\\udfff": 1}'
        response = await http.post(f"{api(session)}/messages", content=in_a_key, headers=JSON_HEADERS)
        assert response.status_code == 400 and "lone surrogate" in response.json()["error"]
        # A proper pair is fine.
        pair = b'{"text": "refund \\ud83d\\ude00"}'
        response = await http.post(f"{api(session)}/messages", content=pair, headers=JSON_HEADERS)
        assert response.status_code == 202, response.text
    ended = await wait_for_turn_end(harness.sessions, session, 1)
    assert ended.messages[0].text == "refund \N{GRINNING FACE}"


async def test_session_settings_stay_out_of_the_browser_json_unless_asked(harness: MatrixHarness) -> None:
    session = harness.stack.new_session_id("web-settings")
    harness.script(session, [ScriptedResponse(text="Hi.")])
    settings = {"model": "secret-model", "api_base": "https://internal.example"}
    await harness.sessions.start_session(session, session_settings=settings)
    await wait_for_agent_snapshot(harness.sessions, session, lambda snapshot: snapshot.state)
    hidden_app = create_agent_web_app(harness.sessions, allow_any_session=True, timings=TIMINGS)
    async with _served(hidden_app) as http:
        response = await http.get(f"{api(session)}/snapshot")
        assert response.status_code == 200 and "session_settings" not in response.json()
        assert "secret-model" not in response.text
    shown_app = create_agent_web_app(
        harness.sessions, allow_any_session=True, include_session_settings=True, timings=TIMINGS
    )
    async with _served(shown_app) as http:
        assert (await http.get(f"{api(session)}/snapshot")).json()["session_settings"] == settings


class _FailingSessions:
    """A session client whose snapshot fails the way an engine or a misused client does."""

    def __init__(self, error: Exception, flow: Any) -> None:
        self._error = error
        self.flow = flow

    async def get_agent_snapshot(self, session_id: str) -> Any:
        raise self._error


async def test_5xx_answers_name_a_request_id_and_no_engine_details(
    harness: MatrixHarness, caplog: pytest.LogCaptureFixture
) -> None:
    engine = DexServiceError(
        grpc.StatusCode.UNAVAILABLE,
        ErrorSubStatus.UNCATEGORIZED,
        "sqlite at /srv/dex/secret.db: database is locked",
        "InvokeRPC",
        "flow-7f3a",
    )
    wrong_loop = RuntimeError("<Future pending> attached to a different loop")
    for error, status in ((engine, 503), (wrong_loop, 500)):
        failing = cast(AgentSessionClient, _FailingSessions(error, harness.sessions.flow))
        app = create_agent_web_app(failing, allow_any_session=True)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dex_agents.web"):
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                response = await http.get(f"{api('session-1')}/snapshot")
        assert response.status_code == status, response.text
        body = response.json()
        assert set(body) == {"error", "request_id"} and len(body["request_id"]) == 32
        for secret in ("sqlite", "secret.db", "flow-7f3a", "different loop", "Future"):
            assert secret not in response.text
        assert response.headers["x-request-id"] == body["request_id"]
        assert response.headers["x-content-type-options"] == "nosniff"
        # The log has the details, under the same ID.
        logged = "\n".join(
            record.getMessage() + (str(record.exc_info[1]) if record.exc_info else "")
            for record in caplog.records
        )
        assert body["request_id"] in logged and ("database is locked" in logged or "different loop" in logged)
