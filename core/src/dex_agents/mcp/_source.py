"""`McpToolSource`: the tools of a Worker's MCP servers as agent tools whose calls run in tool Steps."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from datetime import timedelta

from dex_agents.mcp._calling import call_mcp_tool
from dex_agents.mcp._connection import describe_error
from dex_agents.mcp._definitions import McpToolDefinition, McpToolReference, agent_tool_name
from dex_agents.mcp._listing import (
    ServerListing,
    ToolOmission,
    build_definitions,
    list_server_tools,
    warn_about_omissions,
)
from dex_agents.mcp._servers import McpServer, validate_servers
from dex_agents.runner import (
    UNKNOWN_TOOL_POLICY,
    AgentTurnContext,
    DeferredToolCall,
    DeferredToolExecution,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.values import AgentToolCall

__all__ = ["DEFAULT_HANDSHAKE_TIMEOUT", "McpToolSource"]

DEFAULT_HANDSHAKE_TIMEOUT = timedelta(seconds=30)
"""How long starting or reaching a server and negotiating the protocol may take, per connection."""

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
    ``execute_deferred_tool_call`` passes it to `call_tool`. Every listing and every call opens its own
    connection, so a server that restarted in between costs nothing.

    Args:
        servers: The servers, each with a name unique within the source.
        handshake_timeout: How long starting or reaching a server and negotiating the protocol may take
            per connection (and listing its tools, again). A call's own duration is bounded by its Step.

    Raises:
        ValueError: If there is no server, two servers share a name, or the timeout is not positive.
        TypeError: If a server is not an `McpStdioServer` or `McpHttpServer`.
    """

    def __init__(
        self, servers: Iterable[McpServer], *, handshake_timeout: timedelta = DEFAULT_HANDSHAKE_TIMEOUT
    ) -> None:
        self._servers = validate_servers(tuple(servers))
        if not self._servers:
            raise ValueError("an McpToolSource needs at least one MCP server")
        if handshake_timeout <= timedelta(0):
            raise ValueError(f"handshake_timeout must be positive, got {handshake_timeout}")
        self._handshake_timeout = handshake_timeout
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
            policy = turn.resolve_tool_policy(tool_name, framework_effect=definition.effect)
        reference = McpToolReference(definition.server_name, definition.mcp_name)
        return DeferredToolCall(
            tool_call_id, tool_name, arguments, policy, tool_source_reference=reference.encode()
        )

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        """Whether ``record`` is a call `deferred_tool_call` built for one of this source's servers."""
        reference = McpToolReference.decode(record.tool_source_reference)
        return reference is not None and reference.server_name in self._servers

    async def call_tool(self, execution: DeferredToolExecution) -> ToolExecutionResult:
        """Run one call in its tool Step: one ``tools/call`` on a new connection to the call's server.

        Use it only from ``execute_deferred_tool_call`` (or a framework tool that runs inside it). The
        request carries ``execution.idempotency_key`` in ``_meta`` under
        ``io.superdurable.dex/idempotencyKey``, the same on every attempt.

        Args:
            execution: The approved call, as the tool Step passes it.

        Returns:
            The tool's output: its content as text, else its structured content as JSON.

        Raises:
            ToolExecutionError: The tool reported an error, the server answered with a JSON-RPC error, the
                call has no reference to a server of this source, or the request was never sent (the
                server could not be started or reached, or its handshake failed): the call records
                ``failed`` and nothing is retried.
            McpToolCallInterruptedError: The request was sent and no result came back: the Step attempt
                fails, so a read or idempotent write is sent again and another call records
                ``outcome_unknown``.
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
        return await call_mcp_tool(
            server,
            reference.mcp_name,
            record.arguments,
            execution.idempotency_key,
            self._handshake_timeout.total_seconds(),
        )
