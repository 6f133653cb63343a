"""One ``tools/call`` inside a tool Step, and what each way it can fail means for the session.

The call carries the session's idempotency key in ``_meta``, the same on every attempt, so a server can
drop a repeated request. How a failure is reported decides what the session does next:

- The server answered (an ``isError`` result, or a JSON-RPC error other than the "no result" codes
  below), or the request was never sent (the server could not be started or reached, or the handshake
  failed): `ToolExecutionError`, so the call records ``failed`` with a message for the model and is not
  retried. A call that was never sent did not run.
- The request was sent and no result came back (the connection dropped, the answer was unreadable or not
  a tool result, or the MCP SDK reported an HTTP error status as -32603 or an unreadable body as -32700,
  which a gateway can send after the server ran the call): `McpToolCallInterruptedError`, which fails the
  Step attempt, so the tool's effect decides: ``CallTool`` sends a new request (with the same key) for a
  read or an idempotent write, and ``CallSingleAttemptTool`` records ``outcome_unknown``.

A server may answer ``tools/call`` with a task instead (the MCP tasks extension). The task's handle is
saved as the attempt's heartbeat checkpoint before anything else, so a retried attempt finds it and
follows the same task instead of calling the tool again; a task is then handed to the session
(``ToolTaskStarted``) or followed inside the Step (see `dex_agents.mcp._task_polling`).

On a connection that negotiated 2025-11-25, a tool that requires task augmentation is sent ``task: {ttl}``
and answers with a task of that protocol. Only ``required`` tools get it: such a task belongs to the
connection that created it, so it is followed inside this Step, where a plain call of an ``optional`` tool
would give the same result with fewer requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp import MCPError
from mcp.client.session import ClientSession
from mcp.types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    InputRequiredResult,
    PaginatedRequestParams,
    RequestParamsMeta,
    TaskMetadata,
)
from pydantic import ValidationError

from dex_agents._tools._arguments import parse_tool_arguments
from dex_agents.mcp._call_questions import CallElicitations, prepare_call_elicitations
from dex_agents.mcp._connection import (
    McpConnectError,
    McpConnectionLostError,
    describe_error,
    run_on_new_connection,
)
from dex_agents.mcp._definitions import TaskSupport
from dex_agents.mcp._render import render_tool_result
from dex_agents.mcp._roots import McpRoot
from dex_agents.mcp._servers import McpHttpServer, McpServer
from dex_agents.mcp._task_polling import McpTaskRef, first_poll_interval, wait_in_step
from dex_agents.mcp._task_state import TaskCheckpoint
from dex_agents.mcp._task_wire import (
    McpTaskState,
    McpToolTaskError,
    parse_created_task,
    parse_task,
    send_for_raw_result,
    send_unvalidated,
    speaks_2025_11_25_tasks,
)
from dex_agents.runner import (
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskStarted,
)

__all__ = ["IDEMPOTENCY_KEY_META_KEY", "McpCallLimits", "McpToolCallInterruptedError", "call_mcp_tool"]

IDEMPOTENCY_KEY_META_KEY = "io.superdurable.dex/idempotencyKey"
"""Where ``tools/call`` carries the session's idempotency key in ``_meta``."""

# The SDK's codes for a request that got no answer (connection closed, request timeout), and the codes it
# reports for an HTTP error status (-32603) and an unreadable body (-32700). Any of them can follow a call
# the server ran, so none proves that the tool did not run.
_NO_RESULT_CODES = frozenset({CONNECTION_CLOSED, REQUEST_TIMEOUT, INTERNAL_ERROR, PARSE_ERROR})
_ToolsCallAnswer = CallToolResult | InputRequiredResult | McpTaskState
# A listing that never ends must not hang the call it was meant to repair.
_MAX_LISTING_PAGES = 100
# The SDK's own cap on input_required rounds of one call.
_MAX_INPUT_ROUNDS = 10


@dataclass(frozen=True)
class McpCallLimits:
    """How long one tool Step attempt may spend on its connection.

    Attributes:
        handshake_seconds: Starting or reaching the server and negotiating the protocol.
        task_wait_seconds: Polling a task inside the Step before the attempt gives up.
    """

    handshake_seconds: float
    task_wait_seconds: float

    @property
    def task_ttl_ms(self) -> int:
        """The TTL a 2025-11-25 task is asked for: four times the wait, so it outlives every poll."""
        return int(4 * self.task_wait_seconds * 1000)


class McpToolCallInterruptedError(Exception):
    """An MCP server got ``tools/call`` and no result came back, so the tool may have run.

    It fails the tool Step's attempt instead of recording a result, so the tool's effect decides what
    happens: another attempt for a read or an idempotent write, ``outcome_unknown`` for the others.

    Attributes:
        server_name: The server's name.
        mcp_name: The tool's name on that server.
        reason: What happened instead of a result.
    """

    def __init__(self, server_name: str, mcp_name: str, reason: str) -> None:
        """Create the error.

        Args:
            server_name: The server's name.
            mcp_name: The tool's name on that server.
            reason: What happened instead of a result.
        """
        super().__init__(
            f"MCP server {server_name!r} got tools/call for {mcp_name!r} and no result came back, so the "
            f"tool may have run: {reason}"
        )
        self.server_name = server_name
        self.mcp_name = mcp_name
        self.reason = reason


def _read_answer(raw: Mapping[str, Any]) -> _ToolsCallAnswer:
    """Read a ``tools/call`` answer by its ``resultType``; an absent one means a complete result."""
    kind = raw.get("resultType")
    if kind == "task":
        return parse_task(raw, needs_outcome=False)
    if kind == "input_required":
        return InputRequiredResult.model_validate(raw, by_name=False)
    return CallToolResult.model_validate(raw, by_name=False)


async def _list_until(session: ClientSession, mcp_name: str) -> None:
    cursor: str | None = None
    for _ in range(_MAX_LISTING_PAGES):
        page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        cursor = page.next_cursor
        if cursor is None or any(tool.name == mcp_name for tool in page.tools):
            return


async def _send_tools_call(
    session: ClientSession,
    mcp_name: str,
    arguments: dict[str, Any],
    idempotency_key: str,
    task: TaskMetadata | None = None,
    input_required: tuple[InputRequiredResult, dict[str, Any]] | None = None,
) -> _ToolsCallAnswer:
    meta: RequestParamsMeta = {IDEMPOTENCY_KEY_META_KEY: idempotency_key}
    if task is not None and input_required is None and speaks_2025_11_25_tasks(session):
        augmented = CallToolRequest(
            params=CallToolRequestParams(name=mcp_name, arguments=arguments, task=task, _meta=meta)
        )
        raw = await send_unvalidated(session, augmented)
        # A server may run a task-optional call plainly even when asked for a task.
        return parse_created_task(raw) if "task" in raw else CallToolResult.model_validate(raw, by_name=False)
    request = CallToolRequest(
        params=CallToolRequestParams(
            name=mcp_name,
            arguments=arguments,
            _meta=meta,
            # The answers to an input_required answer, with the state it echoes (2026-07-28).
            input_responses=None if input_required is None else input_required[1],
            request_state=None if input_required is None else input_required[0].request_state,
        )
    )
    # Sent as a plain request rather than through the session's call_tool, which lists every tool after
    # the call to check the result against an output schema, and knows no task; the call needs neither.
    try:
        return _read_answer(await send_for_raw_result(session, request))
    except MCPError as error:
        if error.code != HEADER_MISMATCH:
            raise
    # A 2026-07-28 HTTP server refused the call before running it: the tool mirrors arguments into
    # headers, which the SDK writes only for a tool it listed on this connection. List it and send again.
    await _list_until(session, mcp_name)
    return _read_answer(await send_for_raw_result(session, request))


def _describe_input_requests(result: InputRequiredResult) -> str:
    described: list[str] = []
    for key, request in (result.input_requests or {}).items():
        question = request.params.message if isinstance(request, ElicitRequest) else None
        described.append(
            f"{key} ({request.method}: {question!r})" if question else f"{key} ({request.method})"
        )
    return ", ".join(described) or "no request named"


def _tool_result(mcp_name: str, result: CallToolResult) -> ToolExecutionResult:
    output = render_tool_result(result)
    if result.is_error:
        raise ToolExecutionError(output or f"MCP tool {mcp_name!r} reported an error without a message")
    return ToolExecutionResult(output)


class _ToolStep:
    """One tool Step attempt's call: ``tools/call``, then the task it may start."""

    def __init__(
        self,
        server: McpServer,
        mcp_name: str,
        execution: DeferredToolExecution,
        limits: McpCallLimits,
        task_support: TaskSupport | None,
        elicitations: CallElicitations,
    ) -> None:
        self.server = server
        self.mcp_name = mcp_name
        self.execution = execution
        self.limits = limits
        self.task = TaskMetadata(ttl=limits.task_ttl_ms) if task_support == "required" else None
        self.elicitations = elicitations
        self.roots = tuple(root for root in server.roots if isinstance(root, McpRoot))
        # Only a Streamable HTTP server's task outlives the connection that created it, so only its handle
        # is worth saving and only it can be handed to the session's own poll Steps.
        self.pollable_anywhere = isinstance(server, McpHttpServer)

    def ref(self, task_id: str) -> McpTaskRef:
        return McpTaskRef(self.server.name, self.mcp_name, task_id)

    async def resume(self, saved: TaskCheckpoint) -> ToolExecutionResult | ToolTaskStarted:
        """Follow the task an earlier attempt started, without calling the tool again."""
        if self.execution.supports_tool_tasks:
            return ToolTaskStarted(saved.task_id, saved.poll_interval_seconds)
        ref = self.ref(saved.task_id)
        # It was working when the earlier attempt saw it; the first poll comes after the saved interval.
        handed_over = McpTaskState(
            saved.task_id, "working", poll_interval_ms=saved.poll_interval_seconds * 1000
        )

        async def work(session: ClientSession) -> ToolExecutionResult:
            return await self._follow(session, handed_over)

        try:
            return await run_on_new_connection(self.server, self.limits.handshake_seconds, work)
        except (ToolExecutionError, McpToolTaskError):
            raise
        except Exception as error:
            raise ref.error(f"could not be polled: {describe_error(error)}") from error

    async def call(
        self, arguments: dict[str, Any]
    ) -> ToolExecutionResult | ToolTaskStarted | ToolInputRequested:
        """Send ``tools/call`` and return its result, hand over or follow the task it started, or ask."""

        async def work(session: ClientSession) -> ToolExecutionResult | ToolTaskStarted | ToolInputRequested:
            key = self.execution.idempotency_key
            answer = await self.elicitations.run(
                lambda: _send_tools_call(session, self.mcp_name, arguments, key, self.task)
            )
            for _ in range(_MAX_INPUT_ROUNDS):
                if not isinstance(answer, InputRequiredResult):
                    break
                responses = self.elicitations.respond(answer, self.roots)
                if isinstance(responses, ToolInputRequested):
                    return responses  # nothing ran: the call is sent afresh once the user answered
                given = (answer, dict[str, Any](responses))
                answer = await self.elicitations.run(
                    lambda given=given: _send_tools_call(
                        session, self.mcp_name, arguments, key, input_required=given
                    )
                )
            if isinstance(answer, ToolInputRequested):
                return answer  # an elicitation became the user's question; the call was abandoned
            if isinstance(answer, CallToolResult):
                return _tool_result(self.mcp_name, answer)
            if isinstance(answer, InputRequiredResult):
                # Nothing ran yet: the server still waits for input after every round of answers.
                raise ToolExecutionError(
                    f"MCP tool {self.mcp_name!r} of server {self.server.name!r} still asked for input after "
                    f"{_MAX_INPUT_ROUNDS} rounds of answers: {_describe_input_requests(answer)}"
                )
            interval = first_poll_interval(answer.poll_interval_ms)
            # A 2025-11-25 task belongs to this connection's protocol session: no other connection can poll
            # it, so neither a saved handle nor the session's poll Steps could reach it.
            if self.pollable_anywhere and not speaks_2025_11_25_tasks(session):
                saved = TaskCheckpoint(self.server.name, self.mcp_name, answer.task_id, interval)
                await self.execution.save_heartbeat_checkpoint(saved.encode())
                if self.execution.supports_tool_tasks:
                    return ToolTaskStarted(answer.task_id, interval)
            return await self._follow(session, answer)

        return await run_on_new_connection(
            self.server, self.limits.handshake_seconds, work, elicitation=self.elicitations.handle
        )

    async def _follow(self, session: ClientSession, state: McpTaskState) -> ToolExecutionResult:
        ref = self.ref(state.task_id)
        return await wait_in_step(session, ref, state, self.execution, self.limits.task_wait_seconds)


async def call_mcp_tool(
    server: McpServer,
    mcp_name: str,
    execution: DeferredToolExecution,
    limits: McpCallLimits,
    *,
    task_support: TaskSupport | None = None,
) -> ToolExecutionResult | ToolTaskStarted | ToolInputRequested:
    """Call one tool on a new connection to ``server`` and return what the model sees, or its task.

    A task handle an earlier attempt of the same tool Step saved (its heartbeat checkpoint) is followed
    instead of calling the tool again.

    Args:
        server: The server, from the Worker's configuration.
        mcp_name: The tool's name on that server.
        execution: The tool Step's call: its arguments, idempotency key, checkpoint and heartbeat.
        limits: How long the handshake, and polling a task inside the Step, may take.
        task_support: The tool's listed ``execution.taskSupport``; ``required`` sends the call as a task
            when the connection negotiated 2025-11-25.

    Returns:
        The tool's output (its content blocks as text, else its structured content as JSON),
        `ToolTaskStarted` for a Streamable HTTP server's task when the runner polls tasks, or the question
        an elicitation during the call became (see `dex_agents.mcp._call_questions`).

    Raises:
        ToolExecutionError: The tool reported an error, the server answered with a JSON-RPC error, the
            tool asked for input, the arguments are not a JSON object, the request was never sent, or the
            task the tool started ended with an error or asked for input.
        McpToolCallInterruptedError: The request was sent and no result came back.
        McpToolTaskError: The tool started a task that could not be followed to its end.
    """
    parsed = parse_tool_arguments(execution.tool_call.arguments, tool_name=f"{server.name}__{mcp_name}")
    elicitations = prepare_call_elicitations(execution, server.name, mcp_name)
    if isinstance(elicitations, ToolInputRequested):
        return elicitations  # the answer did not fit the form: asked again before anything is sent
    step = _ToolStep(server, mcp_name, execution, limits, task_support, elicitations)
    saved = TaskCheckpoint.decode(execution.heartbeat_checkpoint, server.name, mcp_name)
    if saved is not None:
        return await step.resume(saved)
    try:
        return await step.call(parsed)
    except (ToolExecutionError, McpToolTaskError):
        raise
    except McpConnectError as error:
        raise ToolExecutionError(
            f"MCP server {server.name!r} could not be reached, so {mcp_name!r} did not run: {error}"
        ) from error
    except McpConnectionLostError as error:
        raise McpToolCallInterruptedError(server.name, mcp_name, f"the connection failed: {error}") from error
    except MCPError as error:
        if error.code in _NO_RESULT_CODES:
            raise McpToolCallInterruptedError(
                server.name, mcp_name, f"JSON-RPC error {error.code}: {error.message}"
            ) from error
        raise ToolExecutionError(
            f"MCP server {server.name!r} refused {mcp_name!r} with JSON-RPC error {error.code}: "
            f"{error.message}"
        ) from error
    except ValidationError as error:
        problem = error.errors(include_url=False)[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise McpToolCallInterruptedError(
            server.name, mcp_name, f"the answer is not a tool result ({where}: {problem['msg']})"
        ) from error
    except Exception as error:
        # Anything else went wrong after the request went out, so the tool may have run.
        raise McpToolCallInterruptedError(server.name, mcp_name, describe_error(error)) from error
