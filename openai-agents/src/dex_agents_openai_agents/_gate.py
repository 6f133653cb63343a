"""A gated copy of the user's agent graph: every tool call stops the SDK run instead of running.

The SDK runs a function tool inside its run loop unless the tool needs approval. The gated graph is a
copy of every agent reachable through handoffs in which each function tool (MCP tools included) needs
approval, so a model response with tool calls ends the run with one interruption per call. On resume,
an approved call reaches the gated tool's invoker, which returns the result the session recorded for
that call instead of running anything. The user's own agents and tools are left untouched; the tool
Steps run the original tools. An agent's own OpenAI model is a finish-checked copy in the gated graph
(`_provider_models`).

A model Step may offer every agent more tools than its own (`turn_tools_scope`): the session's enabled
built-ins and an `McpToolSource`'s tools, which exist only as definitions. They are gated the same way
(`recorded_result_tool`), and a turn tool hides an agent's own tool of the same name.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import types
import weakref
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, cast

from agents import (
    Agent,
    CodeInterpreterTool,
    FileSearchTool,
    FunctionTool,
    Handoff,
    HostedMCPTool,
    ImageGenerationTool,
    Model,
    ProgrammaticToolCallingTool,
    RunContextWrapper,
    Tool,
    ToolSearchTool,
    WebSearchTool,
    handoff,
)
from agents.tool_context import ToolContext

from dex_agents_openai_agents._provider_models import finish_checked_model

__all__ = [
    "GatedAgentGraph",
    "UndeferrableToolError",
    "listed_mcp_tools",
    "mcp_listing_scope",
    "offered_tools",
    "offered_tools_scope",
    "planning_scope",
    "recorded_result_tool",
    "recorded_results_scope",
    "turn_tools_scope",
]

# Provider-side tools run inside the model call itself; there is nothing local to defer.
_HOSTED_TOOL_TYPES: tuple[type[Any], ...] = (
    FileSearchTool,
    WebSearchTool,
    CodeInterpreterTool,
    ImageGenerationTool,
    HostedMCPTool,
    ToolSearchTool,
    ProgrammaticToolCallingTool,
)

_recorded_results: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "dex_agents_openai_agents_recorded_results", default=None
)


_listed_mcp_tools: contextvars.ContextVar[dict[str, FunctionTool] | None] = contextvars.ContextVar(
    "dex_agents_openai_agents_listed_mcp_tools", default=None
)


_turn_tools: contextvars.ContextVar[tuple[FunctionTool, ...]] = contextvars.ContextVar(
    "dex_agents_openai_agents_turn_tools", default=()
)


_planning: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dex_agents_openai_agents_planning", default=False
)


@contextlib.contextmanager
def planning_scope(planning: bool) -> Iterator[None]:
    """While a planning turn's model Step runs, offer every agent only the turn tools, and no handoffs.

    Args:
        planning: Whether the Step belongs to a planning turn; the turn tools then hold only
            ``write_todos``.
    """
    token = _planning.set(planning)
    try:
        yield
    finally:
        _planning.reset(token)


def _outside_planning(is_enabled: Any) -> Callable[[RunContextWrapper[Any], Any], Awaitable[bool]]:
    """Wrap a handoff's ``is_enabled``: off in a planning turn, else as the user's handoff says."""

    async def enabled(context: RunContextWrapper[Any], agent: Any) -> bool:
        if _planning.get():
            return False
        if isinstance(is_enabled, bool):
            return is_enabled
        result = is_enabled(context, agent)
        return bool(await result) if inspect.isawaitable(result) else bool(result)

    return enabled


_offered_tools: contextvars.ContextVar[dict[str, list[Tool]] | None] = contextvars.ContextVar(
    "dex_agents_openai_agents_offered_tools", default=None
)


@contextlib.contextmanager
def offered_tools_scope() -> Iterator[None]:
    """Keep the tools the SDK gets for each agent's model calls during one model Step, for tracing."""
    token = _offered_tools.set({})
    try:
        yield
    finally:
        _offered_tools.reset(token)


def offered_tools(agent_name: str) -> list[Tool]:
    """Return the tools the SDK last got for the agent's model call in this Step (empty if none)."""
    offered = _offered_tools.get()
    return list(offered.get(agent_name, ())) if offered is not None else []


@contextlib.contextmanager
def turn_tools_scope(tools: Sequence[FunctionTool]) -> Iterator[None]:
    """Offer ``tools`` to every agent of the gated graph while one model Step runs.

    Args:
        tools: Gated tools (see `recorded_result_tool`) added after each agent's own.
    """
    token = _turn_tools.set(tuple(tools))
    try:
        yield
    finally:
        _turn_tools.reset(token)


def listed_mcp_tools() -> dict[str, FunctionTool]:
    """Return the MCP tools listed so far in this model Step by name (empty outside `mcp_listing_scope`)."""
    listed = _listed_mcp_tools.get()
    return listed if listed is not None else {}


@contextlib.contextmanager
def mcp_listing_scope() -> Iterator[dict[str, FunctionTool]]:
    """Collect the MCP tools the SDK lists during one model Step, apart from every other Step."""
    token = _listed_mcp_tools.set({})
    try:
        yield listed_mcp_tools()
    finally:
        _listed_mcp_tools.reset(token)


class UndeferrableToolError(ValueError):
    """The agent has a tool that the SDK would run in process, which no Step could contain."""


@contextlib.contextmanager
def recorded_results_scope(results: Mapping[str, str]) -> Iterator[None]:
    """Make the session's recorded results visible to the gated tools while the SDK resumes a run.

    Args:
        results: The model-visible result text of every approved call, by tool call ID.
    """
    token = _recorded_results.set(dict(results))
    try:
        yield
    finally:
        _recorded_results.reset(token)


async def _return_recorded_result(ctx: ToolContext[Any], arguments: str) -> str:
    del arguments
    results = _recorded_results.get()
    if results is None or ctx.tool_call_id not in results:
        # Never fall through to the real tool: a tool run inside RunModel would repeat on every retry.
        raise RuntimeError(
            f"tool {ctx.tool_name!r} (call {ctx.tool_call_id!r}) was about to run inside the model Step "
            "without a recorded result; dex-agents-openai-agents runs tools only in tool Steps"
        )
    return results[ctx.tool_call_id]


def recorded_result_tool(name: str, description: str, parameters: Mapping[str, Any]) -> FunctionTool:
    """Return a gated tool that exists only as a definition: its calls always run in tool Steps.

    Args:
        name: The name the model calls it by.
        description: What it does, for the model.
        parameters: The JSON schema of its arguments, sent to the model as it is (not made strict).

    Returns:
        A tool that needs approval and, once approved, returns the session's recorded result.
    """
    schema = dict(parameters)
    # The Responses API wants an object schema with properties, as the SDK gives its own MCP tools.
    schema.setdefault("properties", {})
    return FunctionTool(
        name=name,
        description=description,
        params_json_schema=schema,
        on_invoke_tool=_return_recorded_result,
        strict_json_schema=False,
        needs_approval=True,
    )


def _gate_function_tool(tool: FunctionTool) -> FunctionTool:
    # Tool guardrails run around the real tool in its tool Step; on a recorded result they would judge a
    # call that already ran.
    gated = dataclasses.replace(
        tool,
        needs_approval=True,
        on_invoke_tool=_return_recorded_result,
        tool_input_guardrails=None,
        tool_output_guardrails=None,
    )
    # The MCP annotations the SDK keeps on the tool give the call's effect; keep them on the copy.
    annotations = getattr(tool, "_mcp_annotations", None)
    if annotations is not None:
        setattr(gated, "_mcp_annotations", annotations)  # noqa: B010 - a private SDK attribute
    return gated


def _check_tool(agent: Agent[Any], tool: Tool) -> Tool:
    if isinstance(tool, FunctionTool):
        return _gate_function_tool(tool)
    if isinstance(tool, _HOSTED_TOOL_TYPES):
        return tool
    raise UndeferrableToolError(
        f"agent {agent.name!r} has a {type(tool).__name__}, which the OpenAI Agents SDK runs in the "
        "Worker process inside the model call; dex-agents-openai-agents cannot give it its own Step. "
        "Wrap the operation in a @function_tool instead."
    )


class GatedAgentGraph:
    """The gated copy of an agent and of every agent reachable from it through handoffs.

    Args:
        root: The user's starting agent.

    Raises:
        UndeferrableToolError: If an agent has a local tool the SDK cannot defer (shell, computer,
            apply-patch or custom tools).
    """

    def __init__(self, root: Agent[Any]) -> None:
        self._gated: dict[int, Agent[Any]] = {}
        self._originals: dict[str, Agent[Any]] = {}
        # Handoff objects hold their target through a weak reference; these keep the copies alive.
        self._keep_alive: list[object] = []
        self._handoff_targets: dict[str, dict[str, str]] = {}
        self.root = self._gate_agent(root)

    def original_agent(self, name: str) -> Agent[Any] | None:
        """Return the user's agent with this name, if the graph has one."""
        return self._originals.get(name)

    def gated_agent(self, name: str) -> Agent[Any] | None:
        """Return the gated copy of the agent with this name, if the graph has one."""
        original = self._originals.get(name)
        return None if original is None else self._gated[id(original)]

    def handoff_targets(self, agent_name: str) -> Mapping[str, str]:
        """Return the agent's handoff tool names and the name of the agent each one hands off to."""
        return self._handoff_targets.get(agent_name, {})

    def original_agents(self) -> Iterator[Agent[Any]]:
        """Yield every agent of the user's graph."""
        yield from self._originals.values()

    def _gate_agent(self, agent: Agent[Any]) -> Agent[Any]:
        existing = self._gated.get(id(agent))
        if existing is not None:
            return existing
        gated = agent.clone(tools=[_check_tool(agent, tool) for tool in agent.tools])
        if isinstance(agent.model, Model):
            # An answer the provider never said it finished must fail the Step, not end the turn.
            gated.model = finish_checked_model(agent.model)
        self._gated[id(agent)] = gated
        self._originals.setdefault(agent.name, agent)
        self._keep_alive.append(gated)
        if agent.mcp_servers:
            gated.get_mcp_tools = types.MethodType(_gated_get_mcp_tools, gated)  # type: ignore[method-assign]
        gated.get_all_tools = types.MethodType(_gated_get_all_tools, gated)  # type: ignore[method-assign]
        gated.handoffs = [self._gate_handoff(item) for item in agent.handoffs]
        targets = self._handoff_targets.setdefault(agent.name, {})
        for item in agent.handoffs:
            if isinstance(item, Agent):
                targets[Handoff.default_tool_name(item)] = item.name
            else:
                targets[item.tool_name] = item.agent_name
        return gated

    def _gate_handoff(self, item: Agent[Any] | Handoff[Any, Any]) -> Agent[Any] | Handoff[Any, Any]:
        if isinstance(item, Agent):
            # The handoff the SDK would build for the agent, switched off in planning turns.
            return handoff(self._gate_agent(item), is_enabled=_outside_planning(True))
        target_ref = item._agent_ref  # pyright: ignore[reportPrivateUsage]
        target = target_ref() if target_ref is not None else None
        if not isinstance(target, Agent):
            return item
        gated_target = self._gate_agent(cast(Agent[Any], target))
        original_invoke = item.on_invoke_handoff

        async def invoke_gated(context: RunContextWrapper[Any], arguments: str) -> Agent[Any]:
            # The user's handoff callback still runs (with its on_handoff and input handling); the run
            # continues with the gated copy of the agent it returns.
            next_agent = await original_invoke(context, arguments)
            return self._gate_agent(next_agent)

        gated = dataclasses.replace(
            item, on_invoke_handoff=invoke_gated, is_enabled=_outside_planning(item.is_enabled)
        )
        gated._agent_ref = weakref.ref(gated_target)  # pyright: ignore[reportPrivateUsage]
        self._keep_alive.append(gated)
        return gated


async def _gated_get_mcp_tools(self: Agent[Any], run_context: RunContextWrapper[Any]) -> list[Tool]:
    # Listing is a read the model call needs (tools/list); calling happens only in tool Steps.
    tools = await Agent.get_mcp_tools(self, run_context)
    listed = _listed_mcp_tools.get()
    if listed is not None:
        listed.update((tool.name, tool) for tool in tools if isinstance(tool, FunctionTool))
    return [_gate_function_tool(tool) if isinstance(tool, FunctionTool) else tool for tool in tools]


async def _gated_get_all_tools(self: Agent[Any], run_context: RunContextWrapper[Any]) -> list[Tool]:
    # The SDK asks this for the model call's tools and again to find an approved call's tool on resume.
    extra = _turn_tools.get()
    # A planning turn offers the model only the turn tools (write_todos): no tool of the agent, none of
    # its MCP servers, no hosted tool.
    tools = [] if _planning.get() else await Agent.get_all_tools(self, run_context)
    if extra:
        names = {tool.name for tool in extra}
        tools = [*(tool for tool in tools if getattr(tool, "name", None) not in names), *extra]
    offered = _offered_tools.get()
    if offered is not None:
        # The listing right before a model call is the one the call offers; a later one replaces it.
        offered[self.name] = list(tools)
    return tools
