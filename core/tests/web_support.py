"""Serving the web app on a real port for the web tests, and reading SSE responses back."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from dex_agents.testing import wait_until


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
