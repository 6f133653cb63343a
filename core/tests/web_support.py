"""Serving the web app on a real port for the web tests, and reading SSE responses back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from playwright.async_api import Page
from starlette.types import ASGIApp

from dex_agents import AgentSessionClient
from dex_agents.testing import ScriptedResponse, wait_for_agent_snapshot, wait_until
from dex_agents.testing.matrix import MatrixHarness
from dex_agents.web import EventStreamTimings, create_agent_web_app


@contextlib.asynccontextmanager
async def serve(app: ASGIApp) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in this event loop; yield its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await wait_until("uvicorn to listen", lambda: server.started or task.done(), timeout=20)
        if task.done():
            task.result()
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@dataclass(frozen=True)
class SseEvent:
    """One Server-Sent Event as a browser parses it."""

    data: str
    event: str | None = None
    id: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


async def sse_events(response: httpx.Response) -> AsyncIterator[SseEvent]:
    """Parse a streaming ``text/event-stream`` response into events (comments skipped)."""
    fields: dict[str, str] = {}
    data: list[str] = []
    async for line in response.aiter_lines():
        if line == "":
            if data:
                yield SseEvent("\n".join(data), fields.get("event"), fields.get("id"))
            fields, data = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        else:
            fields[name] = value


JSON_HEADERS = {"content-type": "application/json"}

#: Set to a directory to save the pictures of the page (``web-chat.png`` and others) there; the docs
#: site's are in ``docs/pages/assets`` (``DEX_AGENTS_WEB_SCREENSHOTS=../docs/pages/assets`` from ``core/``).
SCREENSHOTS_ENV = "DEX_AGENTS_WEB_SCREENSHOTS"


async def save_screenshot(page: Page, name: str) -> None:
    """Save the page as ``<name>.png`` in the `SCREENSHOTS_ENV` directory, when it is set."""
    if directory := os.environ.get(SCREENSHOTS_ENV):
        await page.screenshot(path=os.path.join(directory, f"{name}.png"))


def api(session_id: str) -> str:
    """The app's API path of one session."""
    return f"/api/sessions/{session_id}"


def user_message(text: str) -> dict[str, Any]:
    """A ``useChat`` user message."""
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


def chunk_types(chunks: list[dict[str, Any]]) -> list[str]:
    """The ``type`` of each UI message chunk."""
    return [chunk["type"] for chunk in chunks]


async def chat_response(
    web: httpx.AsyncClient, session_id: str, message: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    """POST ``message`` to the chat endpoint and yield the UI message chunks up to ``[DONE]``.

    Raises:
        AssertionError: If the response is not a UI message stream or ends without ``[DONE]``.
    """
    async with web.stream(
        "POST", f"{api(session_id)}/chat", json={"id": session_id, "messages": [message]}
    ) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in sse_events(response):
            if event.data == "[DONE]":
                return
            yield event.json()
    raise AssertionError("the stream ended without [DONE]")


async def chat(web: httpx.AsyncClient, session_id: str, message: dict[str, Any]) -> list[dict[str, Any]]:
    """POST ``message`` to the chat endpoint and return the whole stream's UI message chunks."""
    return [chunk async for chunk in chat_response(web, session_id, message)]


def answered_message(
    chunks: list[dict[str, Any]],
    *,
    approvals: dict[str, tuple[bool, str | None]] | None = None,
    outputs: dict[str, object] | None = None,
    declines: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The assistant message ``useChat`` sends back once the user answered what the stream asked.

    Args:
        chunks: The stream's UI message chunks.
        approvals: ``{approvalId: (approved, reason)}`` for its approval requests.
        outputs: ``{toolCallId: output}`` the user gave tool parts (``addToolOutput``), such as answers.
        declines: ``{toolCallId: errorText}`` for tool parts the user set to ``output-error``.
    """
    approvals, outputs, declines = approvals or {}, outputs or {}, declines or {}
    parts: list[dict[str, Any]] = []

    def part_of(call_id: str) -> dict[str, Any]:
        return next(part for part in parts if part["toolCallId"] == call_id)

    for chunk in chunks:
        if chunk["type"] == "tool-input-available":
            parts.append(
                {
                    "type": "dynamic-tool",
                    "toolName": chunk["toolName"],
                    "toolCallId": chunk["toolCallId"],
                    "state": "input-available",
                    "input": chunk["input"],
                }
            )
        elif chunk["type"] == "tool-output-available":
            part_of(chunk["toolCallId"]).update(state="output-available", output=chunk["output"])
        elif chunk["type"] == "tool-approval-request" and chunk["approvalId"] in approvals:
            approved, reason = approvals[chunk["approvalId"]]
            part_of(chunk["toolCallId"]).update(
                state="approval-responded",
                approval={"id": chunk["approvalId"], "approved": approved, "reason": reason},
            )
    for call_id, output in outputs.items():
        part_of(call_id).update(state="output-available", output=output)
    for call_id, error_text in declines.items():
        part_of(call_id).update(state="output-error", errorText=error_text)
    finish = chunks[-1]
    return {"id": "a1", "role": "assistant", "parts": parts, "metadata": finish["messageMetadata"]}


@contextlib.asynccontextmanager
async def serve_for_node(
    sessions: AgentSessionClient, node_project: Path, timings: EventStreamTimings
) -> AsyncIterator[str]:
    """Serve an open app over ``sessions`` for a Node client project; yield its base URL.

    Fails the test when Node or the project's ``node_modules`` (``npm ci``, which ci.sh runs) is missing.
    """
    if shutil.which("node") is None or not (node_project / "node_modules").is_dir():
        pytest.fail(f"these tests need Node and `npm ci` in {node_project} (ci.sh runs it)")
    app = create_agent_web_app(sessions, allow_any_session=True, timings=timings)
    async with serve(app) as url:
        yield url


#: How long a Node driver may take.
NODE_SECONDS = 120


async def node_report(process: asyncio.subprocess.Process) -> dict[str, Any]:
    """Wait for a Node driver and return the JSON report it printed last; it must have exited 0."""
    stdout, stderr = await asyncio.wait_for(process.communicate(), NODE_SECONDS)
    assert process.returncode == 0, stderr.decode()
    report: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    return report


def script_approval_turn(harness: MatrixHarness, session: str) -> None:
    """Script a turn that reads (``lookup-1``), then asks to write (``refund-1``, approved), then answers."""
    lookup = harness.call(harness.tools.read, "lookup-1")
    refund = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session,
        [
            ScriptedResponse(text="Checking.", tool_calls=(lookup,)),
            ScriptedResponse(tool_calls=(refund,)),
            ScriptedResponse(text="Refunded."),
        ],
    )


async def session_waiting_for_approval(harness: MatrixHarness, name: str) -> str:
    """Start a session whose first turn waits for the approval of ``refund-1``; return its ID."""
    session = harness.stack.new_session_id(name)
    write = harness.call(harness.tools.approval_write, "refund-1")
    harness.script(
        session, [ScriptedResponse(text="Refunding.", tool_calls=(write,)), ScriptedResponse(text="Done.")]
    )
    await harness.sessions.start_session(session, "Refund A-1")
    await wait_for_agent_snapshot(
        harness.sessions, session, lambda snapshot: snapshot if snapshot.pending_interrupts else None
    )
    return session
