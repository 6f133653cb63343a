"""The tools one CLI run offers through the runner's MCP server, with each tool's policy for the turn.

Three kinds share the server: the user's `@tool` tools, the tools of the runner's `McpToolSource`s, and
the session's enabled built-ins (`ask_user`, `durable_wait`, `write_todos`), which the session carries
out itself, so their calls are always deferred and never run in the CLI. An enabled built-in's name is
reserved: a user tool of that name is not offered while it is enabled. A planning turn offers `write_todos`
alone (the runner also turns Claude Code's own tools and the options' MCP servers off for it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from claude_agent_sdk import SdkMcpTool
from dex_agents import BUILT_IN_TOOL_DEFINITIONS, BUILT_IN_TOOL_NAMES, WRITE_TODOS, InteractionMode
from dex_agents.mcp import McpToolSource
from dex_agents.runner import UNKNOWN_TOOL_POLICY, AgentTurnContext, DeferredToolCall, ToolPolicy
from dex_agents.values import ToolEffect

from dex_agents_claude_agent_sdk._effects import tool_policy
from dex_agents_claude_agent_sdk._mcp import mcp_sdk_tool, source_policy

__all__ = ["RunTool", "RunTools", "gather_run_tools", "is_planning_turn"]

# The session overrides a built-in call's policy; this one only keeps it out of the inline path.
_BUILT_IN_POLICY = ToolPolicy(ToolEffect.READ)


@dataclass(frozen=True)
class RunTool:
    """One tool of a run.

    Attributes:
        tool: What the CLI is offered; its handler runs the tool inline (a read).
        policy: The tool's policy in this turn.
        is_built_in: A session built-in: always deferred, never run in the CLI.
        source: The `McpToolSource` the tool comes from, if any.
    """

    tool: SdkMcpTool[Any]
    policy: ToolPolicy
    is_built_in: bool = False
    source: McpToolSource | None = None


@dataclass(frozen=True)
class RunTools:
    """The tools of one run by name (the name the model calls them by, without the CLI's prefix)."""

    by_name: Mapping[str, RunTool]

    def policy(self, name: str) -> ToolPolicy:
        """The tool's policy in this turn; a name the run does not offer gets `UNKNOWN_TOOL_POLICY`."""
        tool = self.by_name.get(name)
        return tool.policy if tool is not None else UNKNOWN_TOOL_POLICY

    def deferred_call(
        self, turn: AgentTurnContext, tool_call_id: str, name: str, arguments: str
    ) -> DeferredToolCall:
        """The `DeferredToolCall` of a deferred call; an MCP tool's carries its `tool_source_reference`."""
        tool = self.by_name.get(name)
        if tool is not None and tool.source is not None:
            return tool.source.deferred_tool_call(
                turn, tool_call_id=tool_call_id, tool_name=name, arguments=arguments
            )
        return DeferredToolCall(tool_call_id, name, arguments, self.policy(name))


async def gather_run_tools(
    turn: AgentTurnContext, user_tools: Mapping[str, SdkMcpTool[Any]], sources: Sequence[McpToolSource]
) -> RunTools:
    """List the run's tools: the enabled built-ins, the user's tools, and each source's (``tools/list``).

    Raises:
        ValueError: If a source's tool has the name of a user tool or of another source's tool.
    """
    tools: dict[str, RunTool] = {}
    planning = is_planning_turn(turn)
    for name in BUILT_IN_TOOL_NAMES:
        if name in turn.enabled_built_in_tools and (name == WRITE_TODOS or not planning):
            tools[name] = RunTool(_built_in_tool(name), _BUILT_IN_POLICY, is_built_in=True)
    if planning:
        return RunTools(tools)
    for name, tool in user_tools.items():
        if name not in tools:
            tools[name] = RunTool(tool, turn.resolve_tool_policy(name, framework_policy=tool_policy(tool)))
    for source in sources:
        for definition in await source.list_tools():
            if definition.name in tools:
                raise ValueError(
                    f"tool names must be unique: MCP tool {definition.name!r} has the name of another tool"
                )
            tools[definition.name] = RunTool(
                mcp_sdk_tool(source, definition, turn),
                source_policy(source, turn, definition.name),
                source=source,
            )
    return RunTools(tools)


def is_planning_turn(turn: AgentTurnContext) -> bool:
    """Whether the turn plans (`InteractionMode.PLANNING`): the model may only write the plan."""
    return InteractionMode(turn.interaction_mode) is InteractionMode.PLANNING


def _built_in_tool(name: str) -> SdkMcpTool[Any]:
    definition = BUILT_IN_TOOL_DEFINITIONS[name]

    async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        # Never reached: the hook defers every built-in call, and a resumed one gets its record's result.
        del arguments
        text = f"{name} was not run: the session carries it out in a step of its own."
        return {"content": [{"type": "text", "text": text}], "is_error": True}

    return SdkMcpTool(
        name=name,
        description=definition.description,
        input_schema=definition.parameters_json_schema,
        handler=handler,
    )
