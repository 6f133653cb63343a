"""The AG-UI endpoint driven by the real ``@ag-ui/client`` (``HttpAgent``) in Node, and its refusals.

``tests/ag_ui`` pins ``@ag-ui/client`` in its lockfile (``ci.sh`` runs ``npm ci`` there); ``agent.mjs`` runs
the client's own run pipeline (verification, enforcement, ``pendingInterrupts`` and ``resume``) against the
app over a devserver and a Worker, parses every event with ``@ag-ui/core``'s schemas, and prints what it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from starlette.requests import Request

from dex_agents import ASK_USER
from dex_agents.testing import ScriptedQuestion, ScriptedResponse, ScriptedToolCall, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings, SessionAction, create_agent_web_app
from tests.builtin_support import CANCEL, BuiltIns, call
from tests.web_support import (
    NODE_SECONDS,
    api,
    node_report,
    script_approval_turn,
    serve,
    serve_for_node,
    session_waiting_for_approval,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

NODE_PROJECT = Path(__file__).parent / "ag_ui"
TIMINGS = EventStreamTimings(long_poll_seconds=2, settle_seconds=1)
WAREHOUSE = ScriptedQuestion("Which warehouse takes the return?", ("Berlin", "Lyon"), allows_free_text=False)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def base_url(module_harness: MatrixHarness) -> AsyncIterator[str]:
    async with serve_for_node(module_harness.sessions, NODE_PROJECT, TIMINGS) as url:
        yield url


async def _node(scenario: str, endpoint: str, session: str, *extra: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "node",
        "agent.mjs",
        scenario,
        endpoint,
        session,
        *extra,
        cwd=NODE_PROJECT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _report(process: asyncio.subprocess.Process) -> dict[str, Any]:
    report = await node_report(process)
    print(f"@ag-ui/client {report['version']}: {json.dumps(report)}")  # what the client saw
    assert report["invalidEvents"] == [], "every event validates against @ag-ui/core's EventSchemas"
    assert report["warnings"] == [], "the client's enforcement stripped nothing"
    assert report["errors"] == []
    return report


def _runs(report: dict[str, Any]) -> list[list[str]]:
    """Each run's event types, in order."""
    runs: dict[str, list[str]] = {}
    for entry in report["events"]:
        run, kind = entry.split(":", 1)
        runs.setdefault(run, []).append(kind)
    return list(runs.values())


def _tool_calls(messages: list[dict[str, Any]]) -> list[str]:
    ids: list[str] = []
    for message in messages:
        calls: list[dict[str, Any]] = message.get("toolCalls") or []
        ids += [call["id"] for call in calls]
    return ids


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [message["toolCallId"] for message in messages if message["role"] == "tool"]


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    return [
        message["content"]
        for message in messages
        if message["role"] == "assistant" and isinstance(message.get("content"), str) and message["content"]
    ]


def _assert_the_approval_interrupt(interrupts: list[dict[str, Any]]) -> None:
    [interrupt] = interrupts
    assert interrupt["id"] == "refund-1" and interrupt["toolCallId"] == "refund-1"
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["responseSchema"]["required"] == ["approved"]


async def test_http_agent_streams_text_and_tools_and_resumes_an_approval(
    harness: MatrixHarness, base_url: str
) -> None:
    session = harness.stack.new_session_id("ag-ui-approve")
    script_approval_turn(harness, session)
    await harness.sessions.start_session(session)
    report = await _report(await _node("approval", f"{base_url}{api(session)}/ag-ui", session))

    asked = report["asked"]
    assert asked["outcome"] == "interrupt"
    _assert_the_approval_interrupt(asked["interrupts"])
    assert [item["id"] for item in asked["pending"]] == ["refund-1"]
    assert _tool_calls(asked["messages"]) == ["lookup-1", "refund-1"]
    assert _tool_results(asked["messages"]) == ["lookup-1"]
    assert _texts(asked["messages"]) == ["Checking."]

    resumed = report["resumed"]
    assert resumed["outcome"] == "success" and resumed["pending"] == []
    assert _tool_results(resumed["messages"]) == ["lookup-1", "refund-1"]
    assert _texts(resumed["messages"]) == ["Checking.", "Refunded."]
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1

    first, second = _runs(report)
    assert first[0] == "RUN_STARTED" and first[-1] == "RUN_FINISHED"
    assert second[0] == "RUN_STARTED" and second[-1] == "RUN_FINISHED"
    for kind in ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_STARTED"):
        assert kind in first and kind in second, kind
    for kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT", "STATE_SNAPSHOT"):
        assert kind in first, kind
    assert "TOOL_CALL_RESULT" in second and "TOOL_CALL_START" not in second, "the resumed run adds only news"
    outcomes = [event["outcome"]["type"] for event in report["runFinished"]]
    assert outcomes == ["interrupt", "success"]
    await wait_for_turn_end(harness.sessions, session, 1)


async def test_an_approval_interrupt_survives_a_worker_kill(harness: MatrixHarness, base_url: str) -> None:
    session = harness.stack.new_session_id("ag-ui-restart")
    script_approval_turn(harness, session)
    await harness.sessions.start_session(session)
    process = await _node("restart", f"{base_url}{api(session)}/ag-ui", session)
    assert process.stdout is not None and process.stdin is not None
    line = await asyncio.wait_for(process.stdout.readline(), NODE_SECONDS)
    assert json.loads(line) == {"phase": "interrupted"}, line
    await harness.replace_worker()  # SIGKILL while the approval waits
    process.stdin.write(b"continue\n")
    await process.stdin.drain()
    report = await _report(process)

    assert report["asked"]["outcome"] == "interrupt"
    shown = report["shownAgain"]
    # A fresh client is shown the interrupt the session still waits for.
    assert shown["outcome"] == "interrupt"
    _assert_the_approval_interrupt(shown["interrupts"])
    assert [message["content"] for message in shown["messages"] if message["role"] == "user"] == [
        "Refund A-1"
    ]
    assert _tool_calls(shown["messages"]) == ["lookup-1", "refund-1"]
    assert report["resumed"]["outcome"] == "success"
    assert _texts(report["resumed"]["messages"])[-1] == "Refunded."
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
    first, second, third = _runs(report)
    assert "MESSAGES_SNAPSHOT" in second and "MESSAGES_SNAPSHOT" not in first + third


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def built_ins_url(built_ins_stack: BuiltIns) -> AsyncIterator[str]:
    async with serve_for_node(built_ins_stack.sessions, NODE_PROJECT, TIMINGS) as url:
        yield url


async def test_questions_are_interrupts_that_resume_answers(built_ins: BuiltIns, built_ins_url: str) -> None:
    session = built_ins.stack.new_session_id("ag-ui-questions")
    questions = (
        ScriptedToolCall(ASK_USER, {"question": "Which warehouse?", "choices": ["Berlin", "Lyon"]}, "ask-1"),
        call(CANCEL, "cancel-1", asks=(WAREHOUSE,)),
    )
    built_ins.script(
        session,
        [ScriptedResponse(text="Two questions.", tool_calls=questions), ScriptedResponse(text="Done.")],
    )
    await built_ins.sessions.start_session(session)
    answers = {"ask-1": {"answer": "Hamburg"}, "cancel-1-input-1": {"answer": "Lyon"}}
    endpoint = f"{built_ins_url}{api(session)}/ag-ui"
    report = await _report(await _node("answers", endpoint, session, json.dumps(answers)))

    asked = report["asked"]
    assert asked["outcome"] == "interrupt"
    interrupts = {item["id"]: item for item in asked["interrupts"]}
    assert set(interrupts) == {"ask-1", "cancel-1-input-1"}
    assert {item["reason"] for item in interrupts.values()} == {"question"}
    warehouse = interrupts["cancel-1-input-1"]
    assert warehouse["message"] == WAREHOUSE.question and warehouse["toolCallId"] == "cancel-1"
    assert warehouse["responseSchema"]["properties"]["answer"]["enum"] == ["Berlin", "Lyon"]
    assert interrupts["ask-1"]["metadata"]["dex"]["choices"] == ["Berlin", "Lyon"]
    assert _tool_calls(asked["messages"]) == ["ask-1", "cancel-1", "cancel-1-input-1"]

    resumed = report["resumed"]
    assert resumed["outcome"] == "success" and resumed["pending"] == []
    assert _texts(resumed["messages"])[-1] == "Done."
    last = built_ins.model_calls(session)[-1].model_input_text
    assert '{"status":"answered","answer":"Hamburg"}' in last and 'with answers ["Lyon"]' in last, last


async def test_the_lockfile_pins_ag_ui_client_1() -> None:
    lock = json.loads((NODE_PROJECT / "package-lock.json").read_text())
    version = lock["packages"]["node_modules/@ag-ui/client"]["version"]
    assert version.split(".")[0] == "1"


# The refusals, over plain HTTP: the AG-UI route goes through the same rules as every other route.


@contextlib.asynccontextmanager
async def _served(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as url, httpx.AsyncClient(base_url=url, timeout=60) as http:
        yield http


def _run_input(session: str, **fields: Any) -> dict[str, Any]:
    return {"threadId": session, "runId": "run-1", "messages": [], **fields}


async def _events(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data:").strip())
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]


async def test_the_ag_ui_route_checks_viewing_and_each_action(harness: MatrixHarness) -> None:
    session = await session_waiting_for_approval(harness, "ag-ui-rights")

    async def rule(request: Request, session_id: str, action: SessionAction) -> bool:
        user = request.headers.get("x-user")
        if session_id != session:
            return False
        return user == "owner" or (user == "viewer" and action is SessionAction.VIEW)

    app = create_agent_web_app(harness.sessions, access=rule, timings=TIMINGS)
    async with _served(app) as http:
        url = f"{api(session)}/ag-ui"
        viewer, stranger = {"x-user": "viewer"}, {"x-user": "stranger"}
        shown = await http.post(url, json=_run_input(session), headers=viewer)
        assert shown.status_code == 200, shown.text
        events = await _events(shown)
        opening = [event["type"] for event in events][:3]
        assert opening == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
        assert events[-1]["type"] == "RUN_FINISHED"
        assert [item["id"] for item in events[-1]["outcome"]["interrupts"]] == ["refund-1"]

        message = {"id": "m1", "role": "user", "content": "hi"}
        sent = await http.post(url, json=_run_input(session, messages=[message]), headers=viewer)
        assert sent.status_code == 403 and "not send" in sent.json()["error"], sent.text
        approve = [{"interruptId": "refund-1", "status": "resolved", "payload": {"approved": True}}]
        approving = await http.post(url, json=_run_input(session, resume=approve), headers=viewer)
        assert approving.status_code == 403 and "not approve" in approving.json()["error"]
        reject = [{"interruptId": "refund-1", "status": "cancelled"}]
        rejecting = await http.post(url, json=_run_input(session, resume=reject), headers=viewer)
        assert rejecting.status_code == 403 and "not reject" in rejecting.json()["error"]
        assert (await http.post(url, json=_run_input(session), headers=stranger)).status_code == 404
        assert harness.tool_runs(session, harness.tools.approval_write) == []

        resumed = await http.post(url, json=_run_input(session, resume=approve), headers={"x-user": "owner"})
        assert resumed.status_code == 200
        finished = (await _events(resumed))[-1]
        assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "success"
        await wait_for_turn_end(harness.sessions, session, 1)
        # A client that resumes again (another tab answered first) is shown the session, not refused.
        again = await http.post(url, json=_run_input(session, resume=approve), headers={"x-user": "owner"})
        assert [event["type"] for event in await _events(again)] == [
            "RUN_STARTED",
            "MESSAGES_SNAPSHOT",
            "STATE_SNAPSHOT",
            "RUN_FINISHED",
        ]
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1


async def test_the_ag_ui_route_refuses_bad_input_other_hosts_and_too_many_streams(
    harness: MatrixHarness,
) -> None:
    session = await session_waiting_for_approval(harness, "ag-ui-refusals")
    app = create_agent_web_app(
        harness.sessions, allow_any_session=True, max_streams_per_session=1, timings=TIMINGS
    )
    async with _served(app) as http:
        url = f"{api(session)}/ag-ui"
        not_input = await http.post(url, json={"threadId": session})
        assert not_input.status_code == 400 and "RunAgentInput" in not_input.json()["error"]
        other_thread = await http.post(url, json=_run_input("another-session"))
        assert other_thread.status_code == 400 and "threadId" in other_thread.json()["error"]
        bad_payload = [{"interruptId": "refund-1", "status": "resolved", "payload": {"yes": 1}}]
        refused = await http.post(url, json=_run_input(session, resume=bad_payload))
        assert refused.status_code == 400 and "approved" in refused.json()["error"]
        rebound = await http.post(url, json=_run_input(session), headers={"host": "rebind.attacker.example"})
        assert rebound.status_code == 400 and "allowed_hosts" in rebound.json()["error"]
        assert rebound.headers["x-content-type-options"] == "nosniff"
        async with http.stream("GET", f"{api(session)}/events?after=") as held:
            assert held.status_code == 200
            capped = await http.post(url, json=_run_input(session))
            assert capped.status_code == 429 and "open streams" in capped.json()["error"]
        assert harness.tool_runs(session, harness.tools.approval_write) == []
