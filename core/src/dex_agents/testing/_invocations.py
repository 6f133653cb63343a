"""An append-only log of real model and tool calls, shared by the test and its Worker children."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["Invocation", "InvocationKind", "InvocationLog"]

InvocationKind = Literal[
    "model", "tool", "model_cancelled", "summary", "tool_question", "task_start", "task_poll", "task_cancel"
]


@dataclass(frozen=True)
class Invocation:
    """One real call of a model or a tool, as a Worker process made it, or the cancellation of a model call.

    Attributes:
        kind: ``"model"``, ``"tool"``, ``"summary"`` (a context summary call of ``CompactContext``), or
            ``"model_cancelled"`` when a scripted model or summary call's coroutine was cancelled while it
            waited (the entry repeats the call's session, turn, attempt and Step execution). A scripted
            tool that stops to ask the user logs ``"tool_question"`` instead of ``"tool"``, and a scripted
            task logs ``"task_start"``, ``"task_poll"`` and ``"task_cancel"``.
        session_id: The session (Flow) ID.
        turn_id: ``"turn-<n>"``.
        attempt: The Step attempt that made the call.
        step_execution_id: The Step execution that made the call (model calls; empty when unknown).
        tool_name: The tool (tool calls).
        tool_call_id: The tool call ID (tool calls).
        idempotency_key: The key the tool received (tool calls).
        model_input: The model-visible input texts (model calls), oldest first.
        pid: The Worker process that made the call.
        offered_tools: The tool names the model was offered (model calls), when the scripted model says.
        task_id: The task a task event belongs to.
    """

    kind: InvocationKind
    session_id: str
    turn_id: str
    attempt: int
    step_execution_id: str = ""
    tool_name: str = ""
    tool_call_id: str = ""
    idempotency_key: str = ""
    model_input: tuple[str, ...] = field(default=())
    pid: int = 0
    offered_tools: tuple[str, ...] = field(default=())
    task_id: str = ""

    @property
    def model_input_text(self) -> str:
        """All model-visible input texts joined by newlines."""
        return "\n".join(self.model_input)


class InvocationLog:
    """Counts real model and tool calls across processes.

    Each :meth:`record` appends one JSON line under an exclusive ``flock``, so concurrent Worker children
    (and a child killed mid-write) never interleave lines; a torn last line is ignored when reading.

    Args:
        path: The log file; created on first write.
    """

    def __init__(self, path: Path | str) -> None:
        self._path = Path(path)

    @property
    def path(self) -> Path:
        """The log file."""
        return self._path

    def record(self, invocation: Invocation) -> None:
        """Append one call.

        Args:
            invocation: The call; ``pid`` is filled in when it is 0.
        """
        data = asdict(invocation)
        if not data["pid"]:
            data["pid"] = os.getpid()
        line = (json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")
        self._path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            os.write(descriptor, line)
        finally:
            os.close(descriptor)

    def read(self) -> list[Invocation]:
        """Return every recorded call, in the order the calls were recorded."""
        if not self._path.exists():
            return []
        invocations: list[Invocation] = []
        for line in self._path.read_text(encoding="utf-8").splitlines():
            try:
                data: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue  # a Worker killed mid-write leaves a torn last line
            data["model_input"] = tuple(data.get("model_input", ()))
            data["offered_tools"] = tuple(data.get("offered_tools", ()))
            invocations.append(Invocation(**data))
        return invocations

    def model_calls(self, session_id: str, turn_id: str | None = None) -> list[Invocation]:
        """Return the model calls of one session (optionally one turn).

        Args:
            session_id: The session ID.
            turn_id: Only this turn, when given.

        Returns:
            The calls, oldest first.
        """
        return self._calls("model", session_id, turn_id)

    def summary_calls(self, session_id: str, turn_id: str | None = None) -> list[Invocation]:
        """Return the context summary calls of one session (optionally one turn), every attempt included.

        Args:
            session_id: The session ID.
            turn_id: Only this turn, when given.

        Returns:
            The calls, oldest first.
        """
        return self._calls("summary", session_id, turn_id)

    def cancelled_model_calls(self, session_id: str, turn_id: str | None = None) -> list[Invocation]:
        """Return the model calls of one session (optionally one turn) whose coroutine was cancelled.

        Args:
            session_id: The session ID.
            turn_id: Only this turn, when given.

        Returns:
            One entry per cancelled call, oldest first.
        """
        return self._calls("model_cancelled", session_id, turn_id)

    def _calls(self, kind: InvocationKind, session_id: str, turn_id: str | None) -> list[Invocation]:
        return [
            call
            for call in self.read()
            if call.kind == kind and call.session_id == session_id and turn_id in (None, call.turn_id)
        ]

    def tool_calls(
        self, session_id: str, tool_name: str | None = None, tool_call_id: str | None = None
    ) -> list[Invocation]:
        """Return the real tool runs of one session, optionally filtered.

        Args:
            session_id: The session ID.
            tool_name: Only this tool, when given.
            tool_call_id: Only this tool call, when given.

        Returns:
            The runs, oldest first.
        """
        return [
            call
            for call in self.read()
            if call.kind == "tool"
            and call.session_id == session_id
            and tool_name in (None, call.tool_name)
            and tool_call_id in (None, call.tool_call_id)
        ]

    def tool_task_events(
        self, session_id: str, kind: InvocationKind, tool_call_id: str | None = None
    ) -> list[Invocation]:
        """Return the entries of one kind, such as ``"task_start"``, of one session, optionally one call.

        Args:
            session_id: The session ID.
            kind: The kind of entry.
            tool_call_id: Only this tool call, when given.

        Returns:
            The entries, oldest first.
        """
        return [
            call
            for call in self.read()
            if call.kind == kind
            and call.session_id == session_id
            and tool_call_id in (None, call.tool_call_id)
        ]

    @staticmethod
    def texts(calls: Sequence[Invocation]) -> list[str]:
        """Return each model call's joined input text.

        Args:
            calls: Model calls.

        Returns:
            One string per call.
        """
        return [call.model_input_text for call in calls]
