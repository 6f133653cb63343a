"""MCP tasks on the wire: the ``io.modelcontextprotocol/tasks`` extension, and protocol 2025-11-25's tasks.

mcp 2.3 speaks the 2026-07-28 protocol but implements none of the extension, so the source does it at the
JSON-RPC level: it declares the extension in every request's client capabilities (`tasks_extension`), reads
a ``tools/call`` answer whose ``resultType`` is ``task`` as a task handle, and sends ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` itself.

A server that negotiates 2025-11-25 (such as one built on the TypeScript SDK 1.x) has tasks of its own: a
``tools/call`` that carries ``task: {ttl}`` is answered ``{"task": {...}}``, ``tasks/get`` reports the status
without the outcome, and ``tasks/result`` returns the tool's result once the task ended. The method names
and parameters of ``tasks/get`` and ``tasks/cancel`` are the same in both, so `get_task` and `cancel_task`
speak whichever the connection negotiated. mcp 2.3 checks every result against the negotiated version and
takes a 2025-11-25 ``tools/call`` answer only as a complete result, so the task-augmented call and
``tasks/result`` go out through `send_unvalidated`.

Every failure to read a task is reported as `McpToolTaskError`, never as the JSON-RPC or validation error
underneath, so the caller cannot mistake a failed poll for a failed ``tools/call``.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from mcp import MCPError
from mcp.client.extension import ClientExtension
from mcp.client.session import ClientSession
from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    CallToolResult,
    GetTaskPayloadRequest,
    GetTaskPayloadRequestParams,
    Request,
    RequestParams,
)
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

__all__ = [
    "TASKS_2025_11_25_PROTOCOL",
    "TASKS_EXTENSION",
    "TERMINAL_TASK_STATUSES",
    "McpTaskState",
    "McpToolTaskError",
    "TaskStatus",
    "cancel_task",
    "get_task",
    "parse_created_task",
    "parse_task",
    "send_for_raw_result",
    "send_unvalidated",
    "speaks_2025_11_25_tasks",
    "tasks_extension",
    "update_task",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, declared in each request's client capabilities."""

TASKS_2025_11_25_PROTOCOL = "2025-11-25"
"""The protocol version whose own tasks (``tools/call`` with ``task``, ``tasks/result``) the source speaks."""

TaskStatus = Literal["working", "input_required", "completed", "cancelled", "failed"]
TERMINAL_TASK_STATUSES: frozenset[str] = frozenset({"completed", "cancelled", "failed"})

# The SDK's codes for a request that got no answer at all.
_NO_ANSWER_CODES = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT})


class McpToolTaskError(Exception):
    """A task an MCP tool started could not be followed, or ended in a way that leaves its effect unknown.

    It fails the Step attempt (a poll, or a tool Step that polls its task itself) instead of recording a
    result, so the tool's effect decides once the attempts run out: a read records ``failed``, a write
    ``outcome_unknown``, because the task may have taken effect.

    Attributes:
        server_name: The server's name.
        mcp_name: The tool's name on that server.
        task_id: The task.
    """

    def __init__(self, server_name: str, mcp_name: str, task_id: str, problem: str) -> None:
        """Create the error.

        Args:
            server_name: The server's name.
            mcp_name: The tool's name on that server.
            task_id: The task.
            problem: What went wrong, completing "MCP task <id> of tool <tool> on server <server> ...".
        """
        super().__init__(f"MCP task {task_id!r} of tool {mcp_name!r} on server {server_name!r} {problem}")
        self.server_name = server_name
        self.mcp_name = mcp_name
        self.task_id = task_id


class _RawResult(BaseModel):
    model_config = ConfigDict(extra="allow")


async def send_for_raw_result(session: ClientSession, request: Request[Any, Any]) -> dict[str, Any]:
    """Send ``request`` and return its result object as it came, for the caller to read by ``resultType``.

    Raises:
        MCPError: The server answered a JSON-RPC error, or no answer came.
    """
    return dict((await session.send_request(request, _RawResult)).model_extra or {})


async def send_unvalidated(session: ClientSession, request: Request[Any, Any]) -> dict[str, Any]:
    """Send ``request`` as `ClientSession.send_request` does, minus its check of the result's shape.

    mcp 2.3 validates a 2025-11-25 ``tools/call`` answer as a complete `CallToolResult`, which refuses the
    ``{"task": ...}`` answer a task-augmented call gets, and it has no public way to send one request
    unchecked. This uses the session's own stamping (the protocol version header) and dispatcher; the
    official-server tests fail loudly if a later mcp release moves either.

    Raises:
        MCPError: The server answered a JSON-RPC error, or no answer came.
    """
    stamp: Any = getattr(session, "_stamp", None)
    dispatcher: Any = getattr(session, "_dispatcher", None)
    if stamp is None or not hasattr(dispatcher, "send_raw_request"):
        # A later mcp 2.x moved what this relies on: say so rather than fail with an AttributeError.
        raise MCPError(
            INVALID_PARAMS,
            f"this mcp release ({_mcp_version()}) cannot send {request.method} of protocol "
            f"{TASKS_2025_11_25_PROTOCOL} unchecked; dex-agents is tested with mcp 2.3",
        )
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: Any = {}
    stamp(data, options)
    return await dispatcher.send_raw_request(data["method"], data.get("params"), options)


def _mcp_version() -> str:
    try:
        return importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def speaks_2025_11_25_tasks(session: ClientSession) -> bool:
    """Whether the connection negotiated 2025-11-25, whose own tasks replace the extension's."""
    return session.protocol_version == TASKS_2025_11_25_PROTOCOL


class _TasksExtension(ClientExtension):
    identifier = TASKS_EXTENSION


def tasks_extension() -> ClientExtension:
    """Return the extension for ``Client(extensions=[...])``: it declares task support on every request."""
    return _TasksExtension()


class _TaskParams(RequestParams):
    task_id: str


class _UpdateTaskParams(_TaskParams):
    input_responses: dict[str, dict[str, Any]]


# The tasks requests carry the task ID in the Mcp-Name header too, so an HTTP gateway can route them to the
# server instance that holds the task.
class _GetTask(Request[_TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskParams
    name_param = "taskId"


class _UpdateTask(Request[_UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: _UpdateTaskParams
    name_param = "taskId"


class _CancelTask(Request[_TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: _TaskParams
    name_param = "taskId"


class _WireTask(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    task_id: str = Field(min_length=1)
    status: TaskStatus
    status_message: str | None = None
    # The extension names both in milliseconds with an ``Ms`` suffix; 2025-11-25 without it.
    poll_interval_ms: float | None = Field(
        default=None, validation_alias=AliasChoices("pollIntervalMs", "pollInterval")
    )
    ttl_ms: float | None = Field(default=None, validation_alias=AliasChoices("ttlMs", "ttl"))
    input_requests: dict[str, dict[str, Any]] | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class McpTaskState:
    """What a server reports about a task: its creation answer, or a ``tasks/get`` answer.

    Attributes:
        task_id: The task's ID.
        status: ``working``, ``input_required``, ``completed``, ``cancelled`` or ``failed``.
        status_message: The server's description of the status, if any.
        poll_interval_ms: The server's suggested poll interval, if any.
        ttl_ms: How long the server keeps the task after it was created, if it says.
        input_requests: The requests the task waits on, by key, while ``input_required``.
        result: The tool's result once ``completed`` (a creation answer has none).
        error: The JSON-RPC error ``(code, message)`` of a ``failed`` task.
    """

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    poll_interval_ms: float | None = None
    ttl_ms: float | None = None
    input_requests: Mapping[str, Mapping[str, Any]] | None = None
    result: CallToolResult | None = None
    error: tuple[int, str] | None = None


def _error_of(raw: dict[str, Any] | None) -> tuple[int, str] | None:
    if raw is None:
        return None
    code, message = raw.get("code"), raw.get("message")
    if isinstance(code, bool) or not isinstance(code, int):
        raise ValueError(f"the task's error has no integer code: {raw!r:.200}")
    return code, message if isinstance(message, str) else ""


def parse_task(raw: Mapping[str, Any], *, needs_outcome: bool = True) -> McpTaskState:
    """Read a task as a server sent it.

    Args:
        raw: The result object of ``tasks/get``, or a ``tools/call`` answer whose ``resultType`` is ``task``.
        needs_outcome: Whether a ``completed`` task must carry its result and a ``failed`` one its error, as
            ``tasks/get`` answers must (a creation answer need not).

    Returns:
        The task.

    Raises:
        ValueError: If the object is not a task (`pydantic.ValidationError` is one).
    """
    wire = _WireTask.model_validate(raw)
    result = None if wire.result is None else CallToolResult.model_validate(wire.result)
    error = _error_of(wire.error)
    if needs_outcome and wire.status == "completed" and result is None:
        raise ValueError("a completed task carries no result")
    if needs_outcome and wire.status == "failed" and error is None:
        raise ValueError("a failed task carries no error")
    return McpTaskState(
        task_id=wire.task_id,
        status=wire.status,
        status_message=wire.status_message,
        poll_interval_ms=wire.poll_interval_ms,
        ttl_ms=wire.ttl_ms,
        input_requests=wire.input_requests,
        result=result,
        error=error,
    )


def parse_created_task(raw: Mapping[str, Any]) -> McpTaskState:
    """Read a 2025-11-25 task-augmented ``tools/call`` answer, ``{"task": {...}}``, as the task it created.

    Raises:
        ValueError: If the answer holds no task (`pydantic.ValidationError` is one).
    """
    task: object = raw.get("task")
    if not isinstance(task, dict):
        raise ValueError(f"the answer holds no task: {dict(raw)!r:.200}")
    return parse_task(cast(dict[str, Any], task), needs_outcome=False)


async def get_task(session: ClientSession, server_name: str, mcp_name: str, task_id: str) -> McpTaskState:
    """Send one ``tasks/get`` and return the task, with its outcome once it ended.

    On a 2025-11-25 connection, whose ``tasks/get`` reports no outcome, a task that completed or failed is
    read once more with ``tasks/result``.

    Raises:
        McpToolTaskError: The server no longer knows the task (JSON-RPC error -32602), answered another
            JSON-RPC error, or answered something that is not the task.
    """
    request = _GetTask(params=_TaskParams(task_id=task_id))
    legacy = speaks_2025_11_25_tasks(session)
    try:
        raw = await send_for_raw_result(session, request)
    except MCPError as error:
        if error.code == INVALID_PARAMS:
            problem = f"is no longer known to the server (JSON-RPC error {error.code}: {error.message})"
        else:
            problem = f"could not be read: tasks/get answered JSON-RPC error {error.code}: {error.message}"
        raise McpToolTaskError(server_name, mcp_name, task_id, problem) from error
    try:
        state = parse_task(raw, needs_outcome=not legacy)
    except ValueError as error:
        raise McpToolTaskError(
            server_name, mcp_name, task_id, f"could not be read: tasks/get answered no task ({_brief(error)})"
        ) from error
    if state.task_id != task_id:
        raise McpToolTaskError(
            server_name, mcp_name, task_id, f"could not be read: tasks/get answered task {state.task_id!r}"
        )
    if legacy and state.status in ("completed", "failed"):
        return await _with_outcome(session, server_name, mcp_name, state)
    return state


async def _with_outcome(
    session: ClientSession, server_name: str, mcp_name: str, state: McpTaskState
) -> McpTaskState:
    """Add a 2025-11-25 task's outcome, read with ``tasks/result``: the tool's result, or the error."""
    request = GetTaskPayloadRequest(params=GetTaskPayloadRequestParams(task_id=state.task_id))
    try:
        raw = await send_unvalidated(session, request)
    except MCPError as error:
        if state.status == "failed":
            return replace(state, error=(error.code, error.message))
        raise McpToolTaskError(
            server_name,
            mcp_name,
            state.task_id,
            f"completed, but tasks/result answered JSON-RPC error {error.code}: {error.message}",
        ) from error
    try:
        return replace(state, result=CallToolResult.model_validate(raw, by_name=False))
    except ValidationError as error:
        raise McpToolTaskError(
            server_name,
            mcp_name,
            state.task_id,
            f"{state.status}, but tasks/result answered no tool result ({_brief(error)})",
        ) from error


async def update_task(session: ClientSession, task_id: str, responses: dict[str, dict[str, Any]]) -> None:
    """Send one ``tasks/update`` with ``responses`` by input request key; any result is the acknowledgement.

    Raises:
        MCPError: The server answered a JSON-RPC error, or no answer came.
    """
    request = _UpdateTask(params=_UpdateTaskParams(task_id=task_id, input_responses=responses))
    await send_for_raw_result(session, request)


async def cancel_task(session: ClientSession, task_id: str) -> None:
    """Send one ``tasks/cancel``. Any answer, a JSON-RPC error included, means the server got it.

    Raises:
        Exception: Only when no answer came (the connection failed).
    """
    try:
        await send_for_raw_result(session, _CancelTask(params=_TaskParams(task_id=task_id)))
    except (MCPError, ValidationError) as error:
        # An unknown or already finished task answers an error; either way there is nothing left to stop.
        if isinstance(error, MCPError) and error.code in _NO_ANSWER_CODES:
            raise


def _brief(error: ValueError) -> str:
    if isinstance(error, ValidationError):
        problem = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"])
        return f"{where}: {problem['msg']}" if where else str(problem["msg"])
    return str(error)
