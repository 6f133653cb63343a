"""The scripted Messages API server on loopback, and the values it speaks in."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dex_agents.testing import ProviderFault, text_chunks

from dex_agents_claude_agent_sdk._messages import TOOL_NAME_PREFIX, tool_result_text

__all__ = [
    "SYSTEM_REMINDER",
    "AnthropicApiServer",
    "ApiReply",
    "ApiRequest",
    "ApiToolUse",
    "Responder",
    "content_blocks",
    "result_text",
]

_MESSAGES_PATH = "/v1/messages"
_INPUT_PIECE = 8
SYSTEM_REMINDER = "<system-reminder>"
"""How the CLI's own reminders, which it adds to prompts and results, start."""


@dataclass(frozen=True)
class ApiToolUse:
    """A `tool_use` block of a scripted reply.

    Attributes:
        tool_use_id: The block's ID, which becomes the tool call ID.
        name: The tool's name: one of the runner's tools by its own name (the model sends it as
            `mcp__dex__<name>`), an `McpToolSource`'s tool (`<server>__<tool>`) and a session built-in
            (`ask_user`) included, or a name the CLI knows as it is: one of Claude Code's own tools
            (`Bash`, starting with a capital letter) or a tool of an MCP server in the options
            (`mcp__<server>__<tool>`).
        input: The call's arguments.
    """

    tool_use_id: str
    name: str
    input: Mapping[str, object]

    @property
    def cli_name(self) -> str:
        """The name the model sends to the CLI."""
        if self.name.startswith("mcp__") or self.name[:1].isupper():
            return self.name
        return f"{TOOL_NAME_PREFIX}{self.name}"


@dataclass(frozen=True)
class ApiReply:
    """One scripted Messages API response.

    Attributes:
        text: The answer's text, streamed in word chunks.
        tool_uses: Tool calls, after the text.
        input_tokens: The usage the response reports.
        output_tokens: The usage the response reports.
        cache_read_input_tokens: The usage the response reports.
        cache_creation_input_tokens: The usage the response reports.
        error_status: When set, the server answers with this HTTP status and an API error instead.
        error_message: The API error's message.
        fault: When set, the server answers the way a provider fails (`dex_agents.testing.ProviderFault`'s
            ``kind``; its ``attempts`` and ``requests`` count only in script-store mode, which sets this
            from the scripted response's ``provider_faults``): a 429 or 529 with ``Retry-After``, a 500,
            a context-length refusal (400 ``prompt is too long``), the answer after ``delay_seconds``,
            the answer's first half and then a reset connection, the answer without its ``stop_reason``,
            or tool uses whose input JSON is cut before its last character.
    """

    text: str = ""
    tool_uses: Sequence[ApiToolUse] = ()
    input_tokens: int = 10
    output_tokens: int = 5
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    error_status: int | None = None
    error_message: str = "scripted API error"
    fault: ProviderFault | None = None


@dataclass(frozen=True)
class ApiRequest:
    """One `POST /v1/messages` the server received.

    Attributes:
        prefix: The path before `/v1/messages`.
        body: The request's JSON body.
        headers: The request's headers, with lower-case names.
    """

    prefix: str
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict[str, str])

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The request's `messages`."""
        return cast(list[dict[str, Any]], self.body.get("messages", []))

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools offered to the model."""
        return [str(cast(dict[str, Any], tool).get("name")) for tool in self.body.get("tools", [])]

    @property
    def tool_results(self) -> dict[str, tuple[str, bool]]:
        """Every tool result the request holds, by tool use ID: its text and whether it is an error."""
        return {
            str(block.get("tool_use_id")): (result_text(block), bool(block.get("is_error")))
            for message in self.messages
            for block in content_blocks(message)
            if block.get("type") == "tool_result"
        }


Responder = Callable[[ApiRequest], Awaitable[ApiReply]]
"""Returns the reply to one request."""


def content_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return cast(list[dict[str, Any]], content or [])


def result_text(block: Mapping[str, Any]) -> str:
    # The CLI appends its own reminders to some results; they are not the tool's output.
    content = block.get("content")
    if isinstance(content, list):
        content = [
            part
            for part in cast(list[Any], content)
            if not str(cast(Mapping[str, Any], part).get("text", "")).lstrip().startswith(SYSTEM_REMINDER)
        ]
    return tool_result_text(content)


class AnthropicApiServer:
    """Serves scripted Messages API replies on 127.0.0.1 until closed.

    It answers `POST <prefix>/v1/messages` with the reply the responder returns (streamed when the request
    asks for it), and any other request with 404. When the client closes its connection before the reply
    is ready, the responder's coroutine is cancelled.

    Args:
        responder: Returns the reply to each request; an exception makes the server answer 500 with its
            message.
        on_unexpected: Called with `"<method> <target>"` for every request that is not
            `POST /v1/messages`.

    Attributes:
        requests: Every `POST /v1/messages` received, in order.
        unexpected_requests: Every other request, as `"<method> <target>"`.
    """

    def __init__(self, responder: Responder, on_unexpected: Callable[[str], object] | None = None) -> None:
        self._responder = responder
        self._on_unexpected = on_unexpected
        self._server: asyncio.Server | None = None
        self._ids = itertools.count(1)
        self.requests: list[ApiRequest] = []
        self.unexpected_requests: list[str] = []

    @property
    def port(self) -> int:
        """The listening port."""
        assert self._server is not None, "start() the server first"
        return cast(tuple[str, int], self._server.sockets[0].getsockname())[1]

    def base_url(self, prefix: str = "") -> str:
        """The `ANTHROPIC_BASE_URL` that reaches this server with ``prefix``."""
        return f"http://127.0.0.1:{self.port}{prefix}"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        """Stop listening and close open connections."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        request_line = await reader.readline()
        if not request_line:
            return False
        method, target, _ = request_line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            line = (await reader.readline()).decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await _read_body(reader, headers)
        path = target.split("?", 1)[0]
        if method != "POST" or not path.endswith(_MESSAGES_PATH):
            self.unexpected_requests.append(f"{method} {target}")
            if self._on_unexpected is not None:
                self._on_unexpected(f"{method} {target}")
            await _respond(writer, 404, "application/json", b'{"type":"error"}', keep_alive=True)
            return True
        request = ApiRequest(
            prefix=path[: -len(_MESSAGES_PATH)],
            body=cast(dict[str, Any], json.loads(body or b"{}")),
            headers=headers,
        )
        self.requests.append(request)
        reply = await self._reply_unless_abandoned(request, reader)
        if reply is None:
            return False
        fault = reply.fault.kind if reply.fault is not None else None
        refusal = _refusal(reply)
        if refusal is not None:
            status, error_type, message, headers = refusal
            payload = json.dumps({"type": "error", "error": {"type": error_type, "message": message}})
            await _respond(
                writer, status, "application/json", payload.encode(), keep_alive=False, headers=headers
            )
            return False
        if reply.fault is not None and fault == "slow_first_byte":
            await asyncio.sleep(reply.fault.delay_seconds)
        model = str(request.body.get("model", "claude-scripted"))
        message_id = f"msg_scripted_{next(self._ids)}"
        if request.body.get("stream"):
            await _stream_reply(writer, reply, model, message_id)
        else:
            payload = json.dumps(_whole_message(reply, model, message_id)).encode()
            if fault == "cut_stream":
                head = _head(200, "application/json", len(payload), "close")
                await _cut(writer, head + payload[: len(payload) // 2])
            else:
                await _respond(writer, 200, "application/json", payload, keep_alive=False)
        return False

    async def _reply_unless_abandoned(
        self, request: ApiRequest, reader: asyncio.StreamReader
    ) -> ApiReply | None:
        """The responder's reply, or `None` when the client hung up first (the responder is cancelled)."""
        replying = asyncio.ensure_future(self._responder(request))
        # A client waiting for its reply sends nothing more, so anything read here is its hang-up.
        hang_up = asyncio.ensure_future(reader.read(1))
        try:
            await asyncio.wait({replying, hang_up}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            hang_up.cancel()
            if not replying.done():
                replying.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await replying
        if replying.cancelled():
            return None
        error = replying.exception()
        if error is not None:
            return ApiReply(error_status=500, error_message=str(error))
        return replying.result()


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if "content-length" in headers:
        return await reader.readexactly(int(headers["content-length"]))
    if headers.get("transfer-encoding", "").lower() == "chunked":
        chunks: list[bytes] = []
        while True:
            size = int((await reader.readline()).strip().split(b";")[0], 16)
            if size == 0:
                await reader.readline()
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readline()
    return b""


# What the API answers for each refusing fault: status, error type, message, and whether it says when to
# come back (the API sends `retry-after` with its 429 and 529 answers).
_REFUSALS: dict[str, tuple[int, str, str, bool]] = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your rate limit (scripted)",
        True,
    ),
    "server_error": (500, "api_error", "Internal server error (scripted)", False),
    "overloaded": (529, "overloaded_error", "Overloaded (scripted)", True),
    "context_length": (
        400,
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
        False,
    ),
}


def _refusal(reply: ApiReply) -> tuple[int, str, str, dict[str, str]] | None:
    """The error answer of a reply that is one: status, error type, message and headers."""
    if reply.fault is not None and reply.fault.kind in _REFUSALS:
        status, error_type, message, says_when = _REFUSALS[reply.fault.kind]
        seconds = reply.fault.retry_after_seconds
        headers = (
            {"retry-after": f"{seconds:g}", "retry-after-ms": str(int(seconds * 1000))} if says_when else {}
        )
        return status, error_type, message, headers
    if reply.error_status is not None:
        error_type = "invalid_request_error" if reply.error_status == 400 else "api_error"
        return reply.error_status, error_type, reply.error_message, {}
    return None


def _head(
    status: int,
    content_type: str,
    length: int | None,
    connection: str,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}", f"content-type: {content_type}"]
    if length is not None:
        lines.append(f"content-length: {length}")
    lines += [f"connection: {connection}", *(f"{name}: {value}" for name, value in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    payload: bytes,
    *,
    keep_alive: bool,
    headers: Mapping[str, str] | None = None,
) -> None:
    connection = "keep-alive" if keep_alive else "close"
    writer.write(_head(status, content_type, len(payload), connection, headers) + payload)
    await writer.drain()


async def _cut(writer: asyncio.StreamWriter, sent: bytes) -> None:
    """Send part of an answer, then reset the connection, as a cut answer does."""
    writer.write(sent)
    await writer.drain()
    # Let the part reach the client before the reset, as a provider's cut stream does.
    await asyncio.sleep(0.05)
    writer.transport.abort()


def _usage(reply: ApiReply, output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": reply.cache_read_input_tokens,
        "cache_creation_input_tokens": reply.cache_creation_input_tokens,
    }


def _has_fault(reply: ApiReply, kind: str) -> bool:
    return reply.fault is not None and reply.fault.kind == kind


def _stop_reason(reply: ApiReply) -> str | None:
    if _has_fault(reply, "unfinished_stream"):
        return None
    return "tool_use" if reply.tool_uses else "end_turn"


def _input_json(reply: ApiReply, use: ApiToolUse) -> str:
    """A tool use's input as JSON text; cut before its last character for a malformed-arguments fault."""
    text = json.dumps(dict(use.input))
    return text[:-1] if _has_fault(reply, "malformed_arguments") else text


def _whole_message(reply: ApiReply, model: str, message_id: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for use in reply.tool_uses:
        # Cut JSON cannot be an object; the API would send the text it has.
        tool_input = _input_json(reply, use) if _has_fault(reply, "malformed_arguments") else dict(use.input)
        content.append({"type": "tool_use", "id": use.tool_use_id, "name": use.cli_name, "input": tool_input})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(reply, reply.output_tokens),
    }


async def _stream_reply(writer: asyncio.StreamWriter, reply: ApiReply, model: str, message_id: str) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"connection: close\r\n\r\n"
    )
    encoded = [
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
        for event in _stream_events(reply, model, message_id)
    ]
    if _has_fault(reply, "cut_stream"):
        # Whole events only, so the client reads a stream that breaks off, not a garbled event.
        await _cut(writer, head + b"".join(encoded[: max(1, len(encoded) // 2)]))
        return
    writer.write(head + b"".join(encoded))
    await writer.drain()


def _stream_events(reply: ApiReply, model: str, message_id: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    start = _whole_message(reply, model, message_id)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = _usage(reply, 1)
    events.append({"type": "message_start", "message": start})
    index = 0
    if reply.text:
        events.append(
            {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        )
        for chunk in text_chunks(reply.text):
            delta = {"type": "text_delta", "text": chunk}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    for use in reply.tool_uses:
        block: dict[str, Any] = {"type": "tool_use", "id": use.tool_use_id, "name": use.cli_name, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        text = _input_json(reply, use)
        # In pieces, as the API streams a tool use's input.
        for start in range(0, len(text), _INPUT_PIECE):
            delta = {"type": "input_json_delta", "partial_json": text[start : start + _INPUT_PIECE]}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
        index += 1
    stop_reason = _stop_reason(reply)
    if stop_reason is not None:
        events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": reply.output_tokens},
            }
        )
    events.append({"type": "message_stop"})
    return events
