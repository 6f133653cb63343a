"""The chat endpoint driven by the real Vercel AI SDK clients, ``ai`` 5, 6 and 7, in Node.

``tests/ai_sdk`` pins the three majors in its lockfile (``ci.sh`` runs ``npm ci`` there); ``chat.mjs`` runs
a version's own stream parser, chunk schema and ``useChat`` logic (``AbstractChat`` with
``DefaultChatTransport``) against the app over a devserver and a Worker, and prints what it saw.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from dex_agents.testing import ScriptedResponse, read_agent_events, wait_until
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings
from tests.web_support import api, node_report, script_approval_turn, serve_for_node

pytestmark = pytest.mark.asyncio(loop_scope="module")

NODE_PROJECT = Path(__file__).parent / "ai_sdk"
TIMINGS = EventStreamTimings(long_poll_seconds=2, settle_seconds=1)
MAJORS = [5, 6, 7]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def base_url(module_harness: MatrixHarness) -> AsyncIterator[str]:
    async with serve_for_node(module_harness.sessions, NODE_PROJECT, TIMINGS) as url:
        yield url


async def _node(major: int, scenario: str, endpoint: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "node",
        "chat.mjs",
        str(major),
        scenario,
        endpoint,
        cwd=NODE_PROJECT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def _report(process: asyncio.subprocess.Process) -> dict[str, Any]:
    report = await node_report(process)
    print(f"ai {report['version']}: {json.dumps(report)}")  # the test output shows what each client saw
    assert report["invalidChunks"] == [], "every chunk validates against the version's uiMessageChunkSchema"
    assert report["errors"] == []
    return report


def _tool_parts(message: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (part["toolCallId"], part["state"]) for part in message["parts"] if part["type"] == "dynamic-tool"
    ]


def _steps(message: dict[str, Any]) -> list[list[str]]:
    """Each step's parts: a tool part as its call ID, a text part as its text."""
    steps: list[list[str]] = []
    for part in message["parts"]:
        if part["type"] == "step-start":
            steps.append([])
        elif part["type"] == "dynamic-tool":
            steps[-1].append(part["toolCallId"])
        elif part["type"] == "text":
            steps[-1].append(part["text"])
    return steps


@pytest.mark.parametrize("major", MAJORS)
async def test_use_chat_approves_and_the_turn_continues(
    harness: MatrixHarness, base_url: str, major: int
) -> None:
    session = harness.stack.new_session_id(f"ai-sdk-approve-{major}")
    script_approval_turn(harness, session)
    await harness.sessions.start_session(session)
    report = await _report(await _node(major, "approval", f"{base_url}{api(session)}/chat"))
    waiting = "approval-requested" if major >= 6 else "input-available"
    assert _tool_parts(report["asked"]) == [("lookup-1", "output-available"), ("refund-1", waiting)]
    # useChat reads the last step: the call that waits must be in it, or the answer is never sent.
    assert _steps(report["asked"]) == [["Checking.", "lookup-1"], ["refund-1"]]
    assert _tool_parts(report["answered"]) == [
        ("lookup-1", "output-available"),
        ("refund-1", "output-available"),
    ]
    assert _steps(report["answered"]) == [["Checking.", "lookup-1"], ["refund-1"], ["Refunded."]]
    assert report["answered"]["metadata"]["dex"]["turn_end"] == "turn_completed"
    assert report["validUIMessages"] is True
    assert [request["method"] for request in report["requests"]] == ["POST", "POST", "GET"]
    assert report["requests"][2]["url"].endswith(f"{api(session)}/chat/chat-1/stream")
    assert report["resumeAfterTheTurn"]["messages"] == 0  # 204: nothing to resume
    assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
    types = set(report["chunkTypes"])
    if major < 7:
        assert "reset-step" not in types
    if major < 6:
        assert not types & {"tool-approval-request", "tool-output-denied"}


@pytest.mark.parametrize("major", MAJORS)
async def test_use_chat_rejects_and_the_model_reacts(
    harness: MatrixHarness, base_url: str, major: int
) -> None:
    session = harness.stack.new_session_id(f"ai-sdk-reject-{major}")
    refund = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(session, [ScriptedResponse(tool_calls=(refund,)), ScriptedResponse(text="Not refunded.")])
    await harness.sessions.start_session(session)
    report = await _report(await _node(major, "rejection", f"{base_url}{api(session)}/chat"))
    # ai 5 has no denied state: the call ends as an output error that says why.
    ended = "output-denied" if major >= 6 else "output-error"
    assert _tool_parts(report["answered"]) == [("refund-1", ended)]
    assert _steps(report["answered"]) == [["refund-1"], ["Not refunded."]]
    if major < 6:
        refund_part = next(part for part in report["answered"]["parts"] if part["type"] == "dynamic-tool")
        assert "not today" in refund_part["errorText"]
    assert not harness.tool_runs(session, harness.tools.approval_write)
    assert "not today" in harness.model_calls(session)[-1].model_input_text


@pytest.mark.parametrize("major", MAJORS)
async def test_resume_stream_rebuilds_the_turn_that_waits(
    harness: MatrixHarness, base_url: str, major: int
) -> None:
    session = harness.stack.new_session_id(f"ai-sdk-resume-{major}")
    script_approval_turn(harness, session)
    await harness.sessions.start_session(session)
    report = await _report(await _node(major, "resume", f"{base_url}{api(session)}/chat"))
    assert report["resumeRequest"]["method"] == "GET"
    assert _steps(report["resumed"]) == _steps(report["asked"]) == [["Checking.", "lookup-1"], ["refund-1"]]
    assert _tool_parts(report["resumed"]) == _tool_parts(report["asked"])


@pytest.mark.parametrize("major", MAJORS)
async def test_a_worker_killed_mid_stream_ends_in_a_valid_message(
    harness: MatrixHarness, base_url: str, major: int
) -> None:
    session = harness.stack.new_session_id(f"ai-sdk-kill-{major}")
    harness.script(session, [ScriptedResponse(text="Shipped.", partial_text="Draft ", gate="answer")])
    await harness.sessions.start_session(session)
    process = await _node(major, "stream", f"{base_url}{api(session)}/chat")
    await harness.stack.gate(session, "answer").wait_until_reached(timeout=60)

    async def first_attempts_text() -> bool:
        events = await read_agent_events(harness.sessions, session, quiet=timedelta(seconds=1))
        return any(event.type == "text_delta" for event in events)

    await wait_until("the first attempt's text on the Stream", first_attempts_text)
    await harness.replace_worker()
    report = await _report(process)
    assert report["validUIMessages"] is True
    texts = [part["text"] for part in report["streamed"]["parts"] if part["type"] == "text"]
    assert texts == ["Draft Shipped."], "the killed attempt's text is gone, the retry's is whole"
    assert ("reset-step" in report["chunkTypes"]) is (major >= 7)


async def test_the_lockfile_pins_one_release_of_each_major() -> None:
    lock = json.loads((NODE_PROJECT / "package-lock.json").read_text())
    versions = {name: lock["packages"][f"node_modules/{name}"]["version"] for name in ("ai5", "ai6", "ai7")}
    assert [int(version.split(".")[0]) for version in versions.values()] == MAJORS
