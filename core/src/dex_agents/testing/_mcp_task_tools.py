"""The inventory server's task tools: MCP tasks (``io.modelcontextprotocol/tasks``) served with mcp 2.x.

mcp 2.x has no tasks of its own on the server side either, but it lets an extension add request methods
and intercept ``tools/call``, which is all the extension needs: a tool call from a client that declared
the extension creates a task in this process's memory, and ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` serve it. A task moves on only when it is polled, so a test decides its pace without
timing anything. Over Streamable HTTP the tasks outlive each connection (any connection can poll them) and
die with the process; over stdio they die with the connection, as a stdio server's do.

This module imports mcp, so only the server process imports it, and only with mcp 2.x.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.types import (
    CLIENT_CAPABILITIES_META_KEY,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    CallToolRequestParams,
    RequestParams,
)

__all__ = ["SHIP_ORDER", "SHIP_WITH_CARRIER", "TASKS_EXTENSION", "InventoryTasks"]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
SHIP_ORDER = "ship_order"
SHIP_WITH_CARRIER = "ship_with_carrier"


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class _Task:
    """One task in the server's memory."""

    task_id: str
    tool: str
    sku: str
    polls_to_finish: int
    poll_interval_ms: int
    status: str = "working"
    polls: int = 0
    questions: int = 0
    question_key: str | None = None
    carrier: str | None = None
    declined: bool = False
    # A response takes effect one tasks/get after its acknowledgement, as an eventually consistent
    # server's may: that tasks/get still lists the request.
    pending_response: dict[str, Any] | None = None
    response_seen: bool = False
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)

    def wire(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": None,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status == "input_required" and self.question_key is not None:
            value["inputRequests"] = {self.question_key: _carrier_question(self.sku)}
        if self.status == "completed":
            value["result"] = {"content": [{"type": "text", "text": self._result_text()}], "isError": False}
        return value

    def move(self, status: str) -> None:
        self.status = status
        self.updated_at = _now()

    def _result_text(self) -> str:
        if self.tool == SHIP_ORDER:
            return f"shipped {self.sku}"
        if self.declined:
            return f"{self.sku} was not shipped: no carrier was chosen"
        return f"shipped {self.sku} with {self.carrier}"


def _carrier_question(sku: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": f"Which carrier ships {sku}?",
            "requestedSchema": {
                "type": "object",
                "properties": {"carrier": {"type": "string"}},
                "required": ["carrier"],
            },
        },
    }


class _TaskParams(RequestParams):
    task_id: str


class _UpdateParams(_TaskParams):
    input_responses: dict[str, dict[str, Any]]


def _declares_tasks(meta: Mapping[str, Any] | None) -> bool:
    capabilities: object = (meta or {}).get(CLIENT_CAPABILITIES_META_KEY)
    if not isinstance(capabilities, dict):
        return False
    extensions: object = cast(dict[str, object], capabilities).get("extensions")
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


class InventoryTasks(Extension):
    """The tasks extension of the inventory server, holding its tasks in memory.

    Args:
        log: Appends one line to the server's request log.
        prefix: The prefix of every tool name the server offers.
    """

    identifier = TASKS_EXTENSION

    def __init__(self, log: Callable[[str], None], prefix: str) -> None:
        self._log = log
        self._prefix = prefix
        self._tasks: dict[str, _Task] = {}

    def methods(self) -> Sequence[MethodBinding]:
        """Serve ``tasks/get``, ``tasks/update`` and ``tasks/cancel``."""
        return (
            MethodBinding("tasks/get", _TaskParams, self._get),
            MethodBinding("tasks/update", _UpdateParams, self._update),
            MethodBinding("tasks/cancel", _TaskParams, self._cancel),
        )

    async def intercept_tool_call(
        self, params: CallToolRequestParams, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Create a task for a task tool's call when the client declared the extension."""
        tool = params.name.removeprefix(self._prefix)
        if tool not in (SHIP_ORDER, SHIP_WITH_CARRIER) or not params.name.startswith(self._prefix):
            return await call_next(ctx)
        if not _declares_tasks(ctx.meta):
            if tool == SHIP_WITH_CARRIER:
                raise MCPError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"{params.name} runs only as a task: declare the {TASKS_EXTENSION} extension",
                )
            return await call_next(ctx)
        arguments = params.arguments or {}
        sku = str(arguments.get("sku", "-"))
        self._log(f"tools/call {params.name} {sku}")
        task = _Task(
            task_id=uuid.uuid4().hex,
            tool=tool,
            sku=sku,
            polls_to_finish=max(1, int(arguments.get("polls", 1))),
            poll_interval_ms=int(arguments.get("poll_interval_ms", 1000)),
        )
        self._tasks[task.task_id] = task
        # The task exists before the answer goes out, so a tasks/get right after it finds the task.
        self._log(f"tasks/create {params.name} {sku}")
        return {"resultType": "task", **task.wire()}

    def _task(self, task_id: str) -> _Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise MCPError(INVALID_PARAMS, f"Failed to retrieve task: task {task_id} not found")
        return task

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> HandlerResult:
        del ctx
        if params.task_id not in self._tasks:
            self._log(f"tasks/get {params.task_id} unknown")
        task = self._task(params.task_id)
        if task.pending_response is not None and not task.response_seen:
            task.response_seen = True  # acknowledged, not yet applied: the task still lists the request
        elif task.status in ("working", "input_required"):
            if task.pending_response is not None:
                self._apply(task, task.pending_response)
            task.polls += 1
            self._advance(task)
        self._log(f"tasks/get {self._prefix}{task.tool} {task.sku} {task.status}")
        return {"resultType": "complete", **task.wire()}

    def _advance(self, task: _Task) -> None:
        if task.status != "working":
            return
        if task.tool == SHIP_ORDER:
            if task.polls >= task.polls_to_finish:
                task.move("completed")
        elif task.carrier is not None or task.declined:
            task.move("completed")
        else:
            # Each request gets a new key: a key names one request over the task's whole life.
            task.questions += 1
            task.question_key = f"carrier-{task.questions}"
            task.move("input_required")

    @staticmethod
    def _apply(task: _Task, response: Mapping[str, Any]) -> None:
        task.pending_response, task.response_seen = None, False
        action, content = response.get("action"), response.get("content")
        carrier = cast(dict[str, object], content).get("carrier") if isinstance(content, dict) else None
        if action == "accept" and isinstance(carrier, str):
            task.carrier = carrier
            task.move("working")
        elif action == "decline":
            task.declined = True
            task.move("working")
        else:
            task.move("cancelled")

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: _UpdateParams) -> HandlerResult:
        del ctx
        task = self._task(params.task_id)
        for key, response in params.input_responses.items():
            content: object = response.get("content")
            carrier = cast(dict[str, object], content).get("carrier") if isinstance(content, dict) else None
            action = response.get("action")
            self._log(f"tasks/update {self._prefix}{task.tool} {task.sku} {key} {action} {carrier or '-'}")
            # Only the outstanding request takes a response; any other is ignored, as the extension asks.
            if task.status == "input_required" and key == task.question_key and task.pending_response is None:
                task.pending_response = response
        return {"resultType": "complete"}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: _TaskParams) -> HandlerResult:
        del ctx
        task = self._task(params.task_id)
        self._log(f"tasks/cancel {self._prefix}{task.tool} {task.sku}")
        if task.status in ("working", "input_required"):
            task.move("cancelled")
        return {"resultType": "complete"}
