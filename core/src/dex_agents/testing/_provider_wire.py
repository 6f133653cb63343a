"""The three provider APIs the scripted provider server speaks: requests read as texts, answers written.

OpenAI's Chat Completions (``POST /v1/chat/completions``), OpenAI's Responses (``POST /v1/responses``) and
Anthropic's Messages (``POST /v1/messages``), each streaming (server-sent events as the providers send them:
text in pieces, tool-call arguments in pieces, usage, the finish reason last) or not. A request is read into
the texts a scripted model logs (``system: ...``, ``user: ...``, ``assistant: ...``,
``assistant calls <tool> <arguments> [<id>]``, ``tool <tool> [<id>] ok|error: <result>``), the tool call
IDs it holds results for, and the tools it offers.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from dex_agents.testing._text_chunks import text_chunks

__all__ = [
    "ProviderApi",
    "ProviderReply",
    "ReadRequest",
    "ReplyToolCall",
    "error_answer",
    "read_request",
    "reply_body",
    "reply_events",
]

ProviderApi = Literal["chat_completions", "responses", "messages"]

_ARGUMENT_PIECE = 8


@dataclass(frozen=True)
class ReadRequest:
    """What a model call's request holds, as a scripted model sees it."""

    texts: list[str]
    answered_tool_call_ids: frozenset[str]
    offered_tools: list[str]
    stream: bool
    model: str
    include_usage: bool = False


@dataclass(frozen=True)
class ReplyToolCall:
    """A tool call of an answer: its ID, tool name, and arguments as JSON text (possibly malformed)."""

    tool_call_id: str
    tool_name: str
    arguments: str


@dataclass(frozen=True)
class ProviderReply:
    """An answer to write in one API's shape.

    Attributes:
        finished: ``False`` leaves out what says the answer is complete (the finish reason).
    """

    text: str
    tool_calls: Sequence[ReplyToolCall] = field(default_factory=tuple[ReplyToolCall, ...])
    input_tokens: int = 10
    output_tokens: int = 5
    finished: bool = True


def _as_mapping(value: object) -> Mapping[str, Any]:
    return cast(Mapping[str, Any], value) if isinstance(value, Mapping) else {}


def _as_list(value: object) -> list[Any]:
    return cast(list[Any], value) if isinstance(value, list) else []


def _content_text(content: object) -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in _as_list(content):
        fields = _as_mapping(part)
        if isinstance(fields.get("text"), str):
            parts.append(fields["text"])
        elif fields.get("type") == "tool_result":
            parts.append(_content_text(fields.get("content")))
    return "".join(parts)


def _arguments_text(arguments: object) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"))


class _Reader:
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.answered: set[str] = set()
        self.names: dict[str, str] = {}

    def say(self, role: object, text: str) -> None:
        if text:
            self.texts.append(f"{role}: {text}")

    def call(self, call_id: str, name: str, arguments: object) -> None:
        self.names[call_id] = name
        self.texts.append(f"assistant calls {name} {_arguments_text(arguments)} [{call_id}]")

    def result(self, call_id: str, text: str, *, is_error: bool = False) -> None:
        self.answered.add(call_id)
        outcome = "error" if is_error else "ok"
        self.texts.append(f"tool {self.names.get(call_id, '?')} [{call_id}] {outcome}: {text}")


def _read_chat_completions(body: Mapping[str, Any], reader: _Reader) -> list[str]:
    for message in _as_list(body.get("messages")):
        fields = _as_mapping(message)
        role = fields.get("role")
        if role == "tool":
            reader.result(str(fields.get("tool_call_id")), _content_text(fields.get("content")))
            continue
        reader.say(role, _content_text(fields.get("content")))
        for call in _as_list(fields.get("tool_calls")):
            function = _as_mapping(_as_mapping(call).get("function"))
            reader.call(
                str(_as_mapping(call).get("id")), str(function.get("name")), function.get("arguments")
            )
    return [
        str(_as_mapping(_as_mapping(tool).get("function")).get("name"))
        for tool in _as_list(body.get("tools"))
    ]


def _read_responses(body: Mapping[str, Any], reader: _Reader) -> list[str]:
    if isinstance(body.get("instructions"), str):
        reader.say("system", body["instructions"])
    items = body.get("input")
    for item in [{"role": "user", "content": items}] if isinstance(items, str) else _as_list(items):
        fields = _as_mapping(item)
        kind = fields.get("type", "message")
        if kind == "message":
            reader.say(fields.get("role"), _content_text(fields.get("content")))
        elif kind == "function_call":
            reader.call(str(fields.get("call_id")), str(fields.get("name")), fields.get("arguments"))
        elif kind == "function_call_output":
            reader.result(str(fields.get("call_id")), _content_text(fields.get("output")))
    return [str(_as_mapping(tool).get("name")) for tool in _as_list(body.get("tools"))]


def _read_messages(body: Mapping[str, Any], reader: _Reader) -> list[str]:
    reader.say("system", _content_text(body.get("system")))
    for message in _as_list(body.get("messages")):
        fields = _as_mapping(message)
        content = fields.get("content")
        if isinstance(content, str):
            reader.say(fields.get("role"), content)
            continue
        for block in _as_list(content):
            part = _as_mapping(block)
            kind = part.get("type")
            if kind == "text":
                reader.say(fields.get("role"), str(part.get("text", "")))
            elif kind == "tool_use":
                reader.call(str(part.get("id")), str(part.get("name")), part.get("input"))
            elif kind == "tool_result":
                text = _content_text(part.get("content"))
                reader.result(str(part.get("tool_use_id")), text, is_error=bool(part.get("is_error")))
    return [str(_as_mapping(tool).get("name")) for tool in _as_list(body.get("tools"))]


def read_request(api: ProviderApi, body: Mapping[str, Any]) -> ReadRequest:
    """Read a model call's request body.

    Args:
        api: The API the request came to.
        body: The request's JSON body.

    Returns:
        The request as texts, the tool call IDs it answers, the tools it offers, and how to answer it.
    """
    reader = _Reader()
    readers = {"chat_completions": _read_chat_completions, "responses": _read_responses}
    offered = readers.get(api, _read_messages)(body, reader)
    options = _as_mapping(body.get("stream_options"))
    return ReadRequest(
        texts=reader.texts,
        answered_tool_call_ids=frozenset(reader.answered),
        offered_tools=offered,
        stream=bool(body.get("stream")),
        model=str(body.get("model", "")),
        include_usage=bool(options.get("include_usage")),
    )


def _pieces(text: str) -> list[str]:
    return [text[index : index + _ARGUMENT_PIECE] for index in range(0, len(text), _ARGUMENT_PIECE)] or [""]


def _identifier(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


# Chat Completions.


def _chat_usage(reply: ProviderReply) -> dict[str, int]:
    total = reply.input_tokens + reply.output_tokens
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": total,
    }


def _chat_finish(reply: ProviderReply) -> str | None:
    if not reply.finished:
        return None
    return "tool_calls" if reply.tool_calls else "stop"


def _chat_body(reply: ProviderReply, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.tool_call_id,
                "type": "function",
                "function": {"name": call.tool_name, "arguments": call.arguments},
            }
            for call in reply.tool_calls
        ]
    return {
        "id": _identifier("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _chat_finish(reply), "logprobs": None}],
        "usage": _chat_usage(reply),
    }


def _chat_events(reply: ProviderReply, model: str, include_usage: bool) -> list[str]:
    identifier = _identifier("chatcmpl")
    created = int(time.time())

    def chunk(delta: Mapping[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": dict(delta), "finish_reason": finish, "logprobs": None}
        data = {
            "id": identifier,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }
        return _data_event(data)

    events = [chunk({"role": "assistant", "content": ""})]
    events += [chunk({"content": piece}) for piece in text_chunks(reply.text)]
    for index, call in enumerate(reply.tool_calls):
        start = {"index": index, "id": call.tool_call_id, "type": "function"}
        events.append(
            chunk({"tool_calls": [{**start, "function": {"name": call.tool_name, "arguments": ""}}]})
        )
        events += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(call.arguments)
        ]
    events.append(chunk({}, _chat_finish(reply)))
    if include_usage:
        usage: dict[str, Any] = {
            "id": identifier,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [],
            "usage": _chat_usage(reply),
        }
        events.append(_data_event(usage))
    events.append("data: [DONE]\n\n")
    return events


# Responses.


def _responses_usage(reply: ProviderReply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _responses_items(reply: ProviderReply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text:
        items.append(
            {
                "type": "message",
                "id": _identifier("msg"),
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
            }
        )
    items += [
        {
            "type": "function_call",
            "id": _identifier("fc"),
            "call_id": call.tool_call_id,
            "name": call.tool_name,
            "arguments": call.arguments,
            "status": "completed",
        }
        for call in reply.tool_calls
    ]
    return items


def _response_object(
    identifier: str, model: str, status: str, output: list[dict[str, Any]], usage: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "id": identifier,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
    }


def _responses_body(reply: ProviderReply, model: str) -> dict[str, Any]:
    status = "completed" if reply.finished else "in_progress"
    return _response_object(
        _identifier("resp"), model, status, _responses_items(reply), _responses_usage(reply)
    )


def _responses_events(reply: ProviderReply, model: str) -> list[str]:
    identifier = _identifier("resp")
    sequence = 0
    events: list[str] = []

    def emit(kind: str, **data: Any) -> None:
        nonlocal sequence
        events.append(_named_event(kind, {"type": kind, "sequence_number": sequence, **data}))
        sequence += 1

    emit("response.created", response=_response_object(identifier, model, "in_progress", [], None))
    emit("response.in_progress", response=_response_object(identifier, model, "in_progress", [], None))
    items = _responses_items(reply)
    for index, item in enumerate(items):
        if item["type"] == "message":
            text = reply.text
            emit("response.output_item.added", output_index=index, item={**item, "content": []})
            part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
            for piece in text_chunks(text):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=text,
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={**part, "text": text},
            )
        else:
            emit("response.output_item.added", output_index=index, item={**item, "arguments": ""})
            for piece in _pieces(item["arguments"]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=piece,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=item["arguments"],
            )
        emit("response.output_item.done", output_index=index, item=item)
    if reply.finished:
        done = _response_object(identifier, model, "completed", items, _responses_usage(reply))
        emit("response.completed", response=done)
    return events


# Messages.


def _messages_usage(reply: ProviderReply) -> dict[str, Any]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _messages_stop(reply: ProviderReply) -> str | None:
    if not reply.finished:
        return None
    return "tool_use" if reply.tool_calls else "end_turn"


def _tool_input(arguments: str) -> object:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # malformed on purpose: Anthropic's JSON body cannot carry it any other way


def _messages_body(reply: ProviderReply, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {
            "type": "tool_use",
            "id": call.tool_call_id,
            "name": call.tool_name,
            "input": _tool_input(call.arguments),
        }
        for call in reply.tool_calls
    ]
    return {
        "id": _identifier("msg"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _messages_stop(reply),
        "stop_sequence": None,
        "usage": _messages_usage(reply),
    }


def _messages_events(reply: ProviderReply, model: str) -> list[str]:
    start: dict[str, Any] = {**_messages_body(reply, model), "content": [], "stop_reason": None}
    start["usage"] = {**_messages_usage(reply), "output_tokens": 1}
    events = [_named_event("message_start", {"type": "message_start", "message": start})]
    index = 0

    def block(kind: str, **data: Any) -> None:
        events.append(_named_event(kind, {"type": kind, "index": index, **data}))

    if reply.text:
        block("content_block_start", content_block={"type": "text", "text": ""})
        for piece in text_chunks(reply.text):
            block("content_block_delta", delta={"type": "text_delta", "text": piece})
        block("content_block_stop")
        index += 1
    for call in reply.tool_calls:
        block(
            "content_block_start",
            content_block={"type": "tool_use", "id": call.tool_call_id, "name": call.tool_name, "input": {}},
        )
        for piece in _pieces(call.arguments):
            block("content_block_delta", delta={"type": "input_json_delta", "partial_json": piece})
        block("content_block_stop")
        index += 1
    if reply.finished:
        delta = {
            "type": "message_delta",
            "delta": {"stop_reason": _messages_stop(reply), "stop_sequence": None},
        }
        events.append(
            _named_event("message_delta", {**delta, "usage": {"output_tokens": reply.output_tokens}})
        )
    events.append(_named_event("message_stop", {"type": "message_stop"}))
    return events


def _data_event(data: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


def _named_event(kind: str, data: Mapping[str, Any]) -> str:
    return f"event: {kind}\n{_data_event(data)}"


def reply_body(api: ProviderApi, reply: ProviderReply, model: str) -> dict[str, Any]:
    """The JSON body of a non-streaming answer."""
    if api == "chat_completions":
        return _chat_body(reply, model)
    if api == "responses":
        return _responses_body(reply, model)
    return _messages_body(reply, model)


def reply_events(api: ProviderApi, reply: ProviderReply, model: str, *, include_usage: bool) -> list[str]:
    """The server-sent events of a streaming answer, each a complete event text."""
    if api == "chat_completions":
        return _chat_events(reply, model, include_usage)
    if api == "responses":
        return _responses_events(reply, model)
    return _messages_events(reply, model)


_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    429: "requests",
    500: "server_error",
    503: "server_error",
}


def error_answer(api: ProviderApi, status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """The JSON body of an error answer, in the shape the API's own clients parse."""
    if api == "messages":
        return {
            "type": "error",
            "error": {"type": _ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message},
        }
    error = {
        "message": message,
        "type": _OPENAI_ERROR_TYPES.get(status, "server_error"),
        "param": None,
        "code": code,
    }
    return {"error": error}
