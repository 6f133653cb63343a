"""What the source keeps about a task between attempts and polls: its checkpoint and its continuation.

Both are JSON objects with a marker, because both fields are shared: a heartbeat checkpoint may come from
other code, and a tool call record's ``input_continuation`` from another tool source. Anything without the
marker, or not well formed, reads as none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast

from dex_agents.mcp._definitions import decode_json_object

__all__ = ["AskedRequest", "TaskCheckpoint", "TaskContinuation"]

_CHECKPOINT_SOURCE = "dex-agents.mcp/task-handle"
_CONTINUATION_SOURCE = "dex-agents.mcp/task"


def _json_text(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _marked_object(text: str | None, marker: str) -> dict[str, Any] | None:
    fields = decode_json_object(text)
    return fields if fields is not None and fields.get("source") == marker else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class TaskCheckpoint:
    """The handle of a task that ``tools/call`` created, saved as the tool Step's heartbeat checkpoint.

    Attributes:
        server_name: The server that holds the task.
        mcp_name: The tool that created it.
        task_id: The task.
        poll_interval_seconds: Seconds until the first poll.
    """

    server_name: str
    mcp_name: str
    task_id: str
    poll_interval_seconds: int

    def encode(self) -> str:
        """Return the checkpoint text."""
        return _json_text(
            {
                "source": _CHECKPOINT_SOURCE,
                "server": self.server_name,
                "tool": self.mcp_name,
                "task_id": self.task_id,
                "poll_interval_seconds": self.poll_interval_seconds,
            }
        )

    @classmethod
    def decode(cls, text: str | None, server_name: str, mcp_name: str) -> TaskCheckpoint | None:
        """Read a checkpoint this module wrote for tool ``mcp_name`` of ``server_name``; else `None`."""
        fields = _marked_object(text, _CHECKPOINT_SOURCE)
        if fields is None or fields.get("server") != server_name or fields.get("tool") != mcp_name:
            return None
        task_id, interval = _text(fields.get("task_id")), fields.get("poll_interval_seconds")
        if task_id is None or isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            return None
        return cls(server_name, mcp_name, task_id, interval)


@dataclass(frozen=True)
class AskedRequest:
    """An input request of a task that the session asked the user as a question.

    Attributes:
        key: The request's key in the task's ``inputRequests``.
        fingerprint: The SHA-256 of the request, so a different request under the same key never gets the
            answer.
    """

    key: str
    fingerprint: str


@dataclass(frozen=True)
class TaskContinuation:
    """What one poll of a task leaves for the next, kept as the record's ``input_continuation``.

    Attributes:
        status: The status the last poll saw, so a poll reports only a change.
        request: The request the session asked the user about, while the task may still list it.
        sent_at: When the answer to ``request`` went out with ``tasks/update`` (the Worker's clock, seconds
            since the epoch); `None` before it did.
        declined: Whether the user declined one of the task's questions, so a task cancelled since then is
            the server giving up on the tool, not an outcome.
    """

    status: str
    request: AskedRequest | None = None
    sent_at: float | None = None
    declined: bool = False

    def encode(self) -> str:
        """Return the continuation text."""
        value: dict[str, Any] = {"source": _CONTINUATION_SOURCE, "status": self.status}
        if self.request is not None:
            value["request"] = {"key": self.request.key, "fingerprint": self.request.fingerprint}
        if self.sent_at is not None:
            value["sent_at"] = self.sent_at
        if self.declined:
            value["declined"] = True
        return _json_text(value)

    @classmethod
    def decode(cls, text: str | None) -> TaskContinuation | None:
        """Read a continuation this module wrote; anything else reads as `None`."""
        fields = _marked_object(text, _CONTINUATION_SOURCE)
        status = None if fields is None else _text(fields.get("status"))
        if fields is None or status is None:
            return None
        request: AskedRequest | None = None
        raw_request: object = fields.get("request")
        if isinstance(raw_request, dict):
            asked = cast(dict[str, Any], raw_request)
            key, fingerprint = _text(asked.get("key")), _text(asked.get("fingerprint"))
            if key is not None and fingerprint is not None:
                request = AskedRequest(key, fingerprint)
        sent_at: object = fields.get("sent_at")
        sent = float(sent_at) if isinstance(sent_at, int | float) and not isinstance(sent_at, bool) else None
        return cls(status, request, sent if request is not None else None, fields.get("declined") is True)
