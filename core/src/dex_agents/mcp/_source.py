"""`McpToolSource`: the tools of a Worker's MCP servers as agent tools whose calls run in tool Steps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta

from dex_agents.mcp._calling import McpCallLimits, call_mcp_tool
from dex_agents.mcp._connection import describe_error, run_on_new_connection
from dex_agents.mcp._definitions import McpToolDefinition, McpToolReference, agent_tool_name
from dex_agents.mcp._listing import (
    ServerListing,
    ToolOmission,
    build_definitions,
    list_server_tools,
    warn_about_omissions,
)
from dex_agents.mcp._servers import McpHttpServer, McpServer, validate_servers
from dex_agents.mcp._task_polling import McpTaskRef, poll_task_once
from dex_agents.mcp._task_wire import McpToolTaskError, cancel_task
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolExecutionError,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)
from dex_agents.values import AgentToolCall

__all__ = ["DEFAULT_HANDSHAKE_TIMEOUT", "DEFAULT_TASK_WAIT_TIMEOUT", "McpToolSource"]

DEFAULT_HANDSHAKE_TIMEOUT = timedelta(seconds=30)
"""How long starting or reaching a server and negotiating the protocol may take, per connection."""
DEFAULT_TASK_WAIT_TIMEOUT = timedelta(minutes=10)
"""How long one tool Step attempt polls a task that the session cannot poll in its own Steps."""

_logger = logging.getLogger("dex_agents.mcp")


class McpToolSource:
    """The tools of MCP servers, offered to a model as agent tools and called in the session's tool Steps.

    Build it on the Worker, in code, from the servers' configurations: a session never configures a
    server (a tool call record names only a server's name, which this source looks up in its own
    configuration), so no Flow input, user message or browser request can make the Worker start a
    command or call an address.

    A runner offers the tools (`list_tools`) and turns each call the model makes into a
    `DeferredToolCall` with `deferred_tool_call`, which resolves its policy and records which server and
    tool to call. The session runs each call in its own tool Step, where the runner's
    ``execute_deferred_tool_call`` passes it to `call_tool`. Every listing, call and poll opens its own
    connection, so a server that restarted in between costs nothing.

    A tool may answer with an MCP task (the ``io.modelcontextprotocol/tasks`` extension). The source is
    itself a `ToolTaskPoller` and `ToolTaskCanceller`: a runner's ``poll_tool_task`` and
    ``cancel_tool_task`` pass the calls this source owns (`owns_tool_call`) to `poll_tool_task` and
    `cancel_tool_task`, so a Streamable HTTP server's task is polled in the session's own Steps, and the
    questions it asks reach the user.

    Args:
        servers: The servers, each with a name unique within the source.
        handshake_timeout: How long starting or reaching a server and negotiating the protocol may take
            per connection (and listing its tools, again). A call's own duration is bounded by its Step.
        task_wait_timeout: How long one tool Step attempt polls a task that the session cannot poll in its
            own Steps: a stdio server's task, which ends with its connection, or any task when the runner
            polls none (`DeferredToolExecution.supports_tool_tasks`).

    Raises:
        ValueError: If there is no server, two servers share a name, or a timeout is not positive.
        TypeError: If a server is not an `McpStdioServer` or `McpHttpServer`.
    """

    def __init__(
        self,
        servers: Iterable[McpServer],
        *,
        handshake_timeout: timedelta = DEFAULT_HANDSHAKE_TIMEOUT,
        task_wait_timeout: timedelta = DEFAULT_TASK_WAIT_TIMEOUT,
    ) -> None:
        self._servers = validate_servers(tuple(servers))
        if not self._servers:
            raise ValueError("an McpToolSource needs at least one MCP server")
        for name, timeout in (
            ("handshake_timeout", handshake_timeout),
            ("task_wait_timeout", task_wait_timeout),
        ):
            if timeout <= timedelta(0):
                raise ValueError(f"{name} must be positive, got {timeout}")
        self._handshake_timeout = handshake_timeout
        self._task_wait_timeout = task_wait_timeout
        self._listings: dict[str, ServerListing] = {}
        self._listing_locks: dict[str, asyncio.Lock] = {}
        self._definitions: dict[str, McpToolDefinition] = {}
        self._warned: set[ToolOmission] = set()

    @property
    def servers(self) -> tuple[McpServer, ...]:
        """The servers, in the order given."""
        return tuple(self._servers.values())

    @property
    def handshake_timeout(self) -> timedelta:
        """How long starting or reaching a server and negotiating the protocol may take per connection."""
        return self._handshake_timeout

    @property
    def task_wait_timeout(self) -> timedelta:
        """How long one tool Step attempt polls a task the session cannot poll in its own Steps."""
        return self._task_wait_timeout

    async def list_tools(self, *, refresh: bool = False) -> tuple[McpToolDefinition, ...]:
        """Return every server's tools as agent tool definitions named ``<server>__<tool>``.

        Each server is listed once and its listing cached on its own; a server that cannot be listed is
        left out with a warning (logger ``dex_agents.mcp``) and listed again at the next call. A tool
        whose name an earlier tool already has (servers in the order given, tools in listing order), or
        whose name models do not accept (1 to 64 letters, digits, ``_`` or ``-``), is left out with a
        warning too.

        Args:
            refresh: Drop every cached listing first and list every server again.

        Returns:
            The definitions, servers in the order given and tools in each server's order.
        """
        if refresh:
            self._listings.clear()
        missing = [server for name, server in self._servers.items() if name not in self._listings]
        await asyncio.gather(*(self._list(server) for server in missing))
        listings = [self._listings[name] for name in self._servers if name in self._listings]
        definitions, omissions = build_definitions(listings)
        warn_about_omissions(omissions, self._warned)
        self._definitions = definitions
        return tuple(definitions.values())

    async def _list(self, server: McpServer) -> None:
        lock = self._listing_locks.setdefault(server.name, asyncio.Lock())
        async with lock:
            if server.name in self._listings:
                return
            try:
                listing = await list_server_tools(server, self._handshake_timeout.total_seconds())
            except Exception as error:
                _logger.warning(
                    "MCP server %r could not be listed, so its tools are left out: %s",
                    server.name,
                    describe_error(error),
                )
                return
            self._listings[server.name] = listing

    def tool(self, name: str) -> McpToolDefinition | None:
        """Return the definition of tool ``name`` from the last `list_tools`, or `None`."""
        return self._definitions.get(name)

    def agent_tool_names(self) -> tuple[str, ...]:
        """Return the ``<server>__<tool>`` names the last `list_tools` in this process returned; never lists.

        Empty before the first listing. A session counts a ``tool_policies`` key of a server with no name
        here as real (see `dex_agents.ToolNamesRunner`), so a runner may return these beside its other
        tools at any time: the keys of a listed server are checked, the others wait for its listing.
        """
        return tuple(self._definitions)

    def describe_tool(self, tool_name: str) -> str | None:
        """Return tool ``tool_name``'s description from the last `list_tools`, for tracing; never lists.

        A Worker that has not listed the servers since it started (a tool Step right after a restart)
        answers `None`.
        """
        definition = self._definitions.get(tool_name)
        return definition.description or None if definition is not None else None

    def merge_tool_policies(
        self, application_policies: Mapping[str, ToolPolicy] | None = None
    ) -> dict[str, ToolPolicy]:
        """Return the servers' configured tool policies under the names the model sees, merged with yours.

        Pass the result as the session's ``tool_policies`` (such as ``AgentSessionOptions.tool_policies``
        or an adapter's option of that name). It needs no listing, so building a Flow never contacts a
        server.

        Args:
            application_policies: Your policies by tool name; they win over a server's.

        Returns:
            The merged policies.

        Raises:
            TypeError: If one of your policies is not a `ToolPolicy`.
        """
        merged = {
            agent_tool_name(server.name, mcp_name): policy
            for server in self._servers.values()
            for mcp_name, policy in server.tool_policies.items()
        }
        for name, policy in (application_policies or {}).items():
            if not isinstance(policy, ToolPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(
                    f"the policy of tool {name!r} must be a ToolPolicy, got {type(policy).__name__}"
                )
            merged[name] = policy
        return merged

    def deferred_tool_call(
        self, turn: AgentTurnContext, *, tool_call_id: str, tool_name: str, arguments: str
    ) -> DeferredToolCall:
        """Return the `DeferredToolCall` for a model's call of one of this source's tools.

        Its policy is the session's policy for the tool when it has one, else the server's configured
        policy, else the effect the tool's annotations declare (``readOnlyHint``: ``read``;
        ``idempotentHint``: ``idempotent_write``, whatever ``destructiveHint`` says), else the session's
        default effect. Its ``tool_source_reference`` names the server and the tool's MCP name, so the
        tool Step calls the server without listing it. A name the last `list_tools` did not return gets
        `UNKNOWN_TOOL_POLICY` and no reference: its Step records ``failed`` without running anything.

        Args:
            turn: The turn the model call belongs to.
            tool_call_id: The call's ID.
            tool_name: The tool name the model called (``<server>__<tool>``).
            arguments: The call's arguments as JSON text.

        Returns:
            The deferred call.
        """
        definition = self._definitions.get(tool_name)
        if definition is None:
            return DeferredToolCall(tool_call_id, tool_name, arguments, UNKNOWN_TOOL_POLICY)
        configured = self._servers[definition.server_name].tool_policies.get(definition.mcp_name)
        if configured is not None and tool_name not in turn.tool_policies:
            policy = configured
        else:
            policy = turn.resolve_tool_policy(tool_name, framework_policy=definition.annotation_policy)
        reference = McpToolReference(definition.server_name, definition.mcp_name, definition.task_support)
        return DeferredToolCall(
            tool_call_id, tool_name, arguments, policy, tool_source_reference=reference.encode()
        )

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        """Whether ``record`` is a call `deferred_tool_call` built for one of this source's servers."""
        reference = McpToolReference.decode(record.tool_source_reference)
        return reference is not None and reference.server_name in self._servers

    def _task_target(self, record: AgentToolCall, action: str) -> tuple[McpServer, McpTaskRef]:
        """The server of a record's task and the task, or `LookupError` naming why there is none."""
        reference = McpToolReference.decode(record.tool_source_reference)
        server = None if reference is None else self._servers.get(reference.server_name)
        if reference is None or server is None or not record.task_id:
            if reference is None:
                problem = f"{record.tool_name!r} is not a tool of this agent's MCP servers"
            elif server is None:
                problem = f"MCP server {reference.server_name!r} is not configured on this Worker"
            else:
                problem = "the call started no task"
            raise LookupError(
                f"{problem}, so task {record.task_id!r} of {record.tool_name!r} cannot be {action}"
            )
        return server, McpTaskRef(server.name, reference.mcp_name, record.task_id)

    async def call_tool(self, execution: DeferredToolExecution) -> DeferredToolOutcome:
        """Run one call in its tool Step: one ``tools/call`` on a new connection to the call's server.

        Use it only from ``execute_deferred_tool_call`` (or a framework tool that runs inside it). The
        request carries ``execution.idempotency_key`` in ``_meta`` under
        ``io.superdurable.dex/idempotencyKey``, the same on every attempt.

        When the server answers with a task, its handle is first saved as the attempt's heartbeat
        checkpoint (`DeferredToolExecution.save_heartbeat_checkpoint`), so a retried attempt follows the same
        task instead of calling the tool again. A Streamable HTTP server's task is then handed to the
        session as `ToolTaskStarted` when the runner polls tasks (`supports_tool_tasks`); any other task is
        polled here, with a heartbeat per poll, for up to ``task_wait_timeout``.

        On a connection that negotiated protocol 2025-11-25, a tool whose listing declared
        ``execution.taskSupport: "required"`` is called as a task (``task: {ttl}``, the TTL four times
        ``task_wait_timeout``). Such a task belongs to the connection that created it (the TypeScript SDK
        binds it to the protocol session, which the call ends), so it is polled here whatever the
        transport, and no handle is saved: a retried attempt cannot reach it and calls the tool again.

        Args:
            execution: The approved call, as the tool Step passes it.

        An elicitation the server sends during a ``read`` or ``idempotent_write`` call abandons the call and
        becomes the user's question (`ToolInputRequested`); once answered, the session runs the tool Step
        again and this call is sent again, the answer given when the server asks the same again. Other
        calls' elicitations are answered ``cancel``. See the MCP how-to's "Client capabilities".

        Returns:
            The tool's output (its content as text, else its structured content as JSON),
            `ToolTaskStarted`, or `ToolInputRequested`.

        Raises:
            ToolExecutionError: The tool reported an error, the server answered with a JSON-RPC error, the
                call has no reference to a server of this source, the request was never sent (the server
                could not be started or reached, or its handshake failed), or the tool's task ended with an
                error or asked for input the session cannot ask: the call records ``failed``.
            McpToolCallInterruptedError: The request was sent and no result came back: the Step attempt
                fails, so a read or idempotent write is sent again and another call records
                ``outcome_unknown``.
            McpToolTaskError: The tool's task could not be followed to its end: the Step attempt fails.
        """
        record = execution.tool_call
        reference = McpToolReference.decode(record.tool_source_reference)
        if reference is None:
            raise ToolExecutionError(
                f"{record.tool_name!r} is not a tool of this agent's MCP servers, so nothing ran"
            )
        server = self._servers.get(reference.server_name)
        if server is None:
            raise ToolExecutionError(
                f"MCP server {reference.server_name!r} is not configured on this Worker, so "
                f"{reference.mcp_name!r} did not run"
            )
        limits = McpCallLimits(
            self._handshake_timeout.total_seconds(), self._task_wait_timeout.total_seconds()
        )
        return await call_mcp_tool(
            server, reference.mcp_name, execution, limits, task_support=reference.task_support
        )

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        """Poll a task this source's `call_tool` handed to the session: one ``tasks/get`` on a new connection.

        Call it from the runner's ``poll_tool_task`` for a call this source owns. It writes an
        ``mcp.task_status`` event when the status changed since the last poll. A task that asks one form
        elicitation with a single string, enum or boolean field becomes a question for the user
        (`ToolInputRequested`); the next poll sends the answer, the decline or the passed deadline with
        ``tasks/update``, on its first attempt only and only while the task still lists that request.

        Args:
            poll: The session's poll of the call's task.

        Returns:
            The task's result, a question, or `ToolTaskPending` with the next interval: the server's,
            rounded up to whole seconds, or double the last one up to a minute when that is longer.

        Raises:
            ToolExecutionError: The task ended with a tool error or a JSON-RPC error, or asked for input the
                session cannot ask (it is cancelled): the call records ``failed``.
            McpToolTaskError: The server no longer knows the task, could not be reached, could not be given
                the answer, or cancelled the task: the poll fails, and after three attempts the call is
                recorded by its effect.
        """
        server, ref = self._task_target(poll.tool_call, "polled")
        try:
            return await run_on_new_connection(
                server,
                self._handshake_timeout.total_seconds(),
                lambda session: poll_task_once(session, ref, poll),
            )
        except (ToolExecutionError, McpToolTaskError):
            raise
        except Exception as error:
            raise ref.error(f"could not be polled: {describe_error(error)}") from error

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        """Ask the server to stop a task that ``cancel_turn`` abandoned: one ``tasks/cancel``.

        Any answer counts, an error included (the task may be unknown or finished), so it is idempotent by
        task ID. A call this source does not own, or a task only its own connection could reach, is left
        alone.

        Args:
            cancellation: The abandoned task.

        Raises:
            McpToolTaskError: The server could not be reached; the session tries again.
        """
        try:
            server, ref = self._task_target(cancellation.tool_call, "cancelled")
        except LookupError as error:
            _logger.warning("%s", error)
            return
        if not isinstance(server, McpHttpServer):
            return  # a stdio server's task ended with the connection that started it
        task_id = ref.task_id
        try:
            await run_on_new_connection(
                server, self._handshake_timeout.total_seconds(), lambda session: cancel_task(session, task_id)
            )
        except Exception as error:
            raise ref.error(f"could not be cancelled: {describe_error(error)}") from error
