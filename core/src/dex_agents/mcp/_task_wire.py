"""The MCP tasks extension (``io.modelcontextprotocol/tasks``) on the wire.

mcp 2.3 speaks the 2026-07-28 protocol but implements none of this extension, so the source does it at the
JSON-RPC level: it declares the extension in every request's client capabilities (`tasks_extension`), reads
a ``tools/call`` answer whose ``resultType`` is ``task`` as a task handle, and sends ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` itself. Every failure to read a task is reported as
`McpToolTaskError`, never as the JSON-RPC or validation error underneath, so the caller cannot mistake a
failed poll for a failed ``tools/call``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp import MCPError
from mcp.client.extension import ClientExtension
from mcp.client.session import ClientSession
from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    REQUEST_TIMEOUT,
    CallToolResult,
    Request,
    RequestParams,
)
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

__all__ = [
    "TASKS_EXTENSION",
    "TERMINAL_TASK_STATUSES",
    "McpTaskState",
    "McpToolTaskError",
    "TaskStatus",
    "cancel_task",
    "get_task",
    "parse_task",
    "send_for_raw_result",
    "tasks_extension",
    "update_task",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, declared in each request's client capabilities."""

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
    poll_interval_ms: float | None = None
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
        input_requests: The requests the task waits on, by key, while ``input_required``.
        result: The tool's result once ``completed`` (a creation answer has none).
        error: The JSON-RPC error ``(code, message)`` of a ``failed`` task.
    """

    task_id: str
    status: TaskStatus
    status_message: str | None = None
    poll_interval_ms: float | None = None
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
        input_requests=wire.input_requests,
        result=result,
        error=error,
    )


async def get_task(session: ClientSession, server_name: str, mcp_name: str, task_id: str) -> McpTaskState:
    """Send one ``tasks/get`` and return the task.

    Raises:
        McpToolTaskError: The server no longer knows the task (JSON-RPC error -32602), answered another
            JSON-RPC error, or answered something that is not the task.
    """
    request = _GetTask(params=_TaskParams(task_id=task_id))
    try:
        raw = await send_for_raw_result(session, request)
    except MCPError as error:
        if error.code == INVALID_PARAMS:
            problem = f"is no longer known to the server (JSON-RPC error {error.code}: {error.message})"
        else:
            problem = f"could not be read: tasks/get answered JSON-RPC error {error.code}: {error.message}"
        raise McpToolTaskError(server_name, mcp_name, task_id, problem) from error
    try:
        state = parse_task(raw)
    except ValueError as error:
        raise McpToolTaskError(
            server_name, mcp_name, task_id, f"could not be read: tasks/get answered no task ({_brief(error)})"
        ) from error
    if state.task_id != task_id:
        raise McpToolTaskError(
            server_name, mcp_name, task_id, f"could not be read: tasks/get answered task {state.task_id!r}"
        )
    return state


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
