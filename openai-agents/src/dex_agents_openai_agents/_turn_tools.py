"""The tools a model Step offers every agent besides its own: the session's built-ins and an MCP source's.

Neither kind is a tool of the user's agents. A built-in (`ask_user`, `durable_wait`, `write_todos`) is
carried out by the session itself, so its call only needs deferring. An `McpToolSource` tool is a
definition listed from the Worker's MCP servers; its call is deferred through the source, which resolves
its policy and records which server and tool to call, and the tool Step hands it back to the source. Both
reach the SDK as gated tools (`recorded_result_tool`), so a call stops the run like any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from agents import FunctionTool
from dex_agents import BUILT_IN_TOOL_DEFINITIONS, BUILT_IN_TOOL_NAMES, WRITE_TODOS
from dex_agents.runner import AgentTurnContext, DeferredToolCall, ToolPolicy
from dex_agents.values import InteractionMode, ToolEffect

from dex_agents_openai_agents._gate import recorded_result_tool

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["OfferedTurnTools", "TurnTools"]

# The session records a built-in call with this policy whatever the runner says; say the same.
_BUILT_IN_POLICY = ToolPolicy(ToolEffect.READ, requires_approval=False)

_BUILT_IN_TOOLS = MappingProxyType(
    {
        name: recorded_result_tool(name, definition.description, definition.parameters_json_schema)
        for name, definition in BUILT_IN_TOOL_DEFINITIONS.items()
    }
)


@dataclass(frozen=True)
class OfferedTurnTools:
    """What one model Step offers besides the agents' own tools, and how their calls are deferred.

    Attributes:
        tools: The gated tools, built-ins first.
        built_in_names: The enabled built-ins.
        mcp_names: The MCP source's tools as this Step listed them.
        mcp_source: The source, if the runner has one.
    """

    tools: tuple[FunctionTool, ...] = ()
    built_in_names: frozenset[str] = frozenset()
    mcp_names: frozenset[str] = frozenset()
    mcp_source: McpToolSource | None = None

    @property
    def names(self) -> frozenset[str]:
        """Every name offered here."""
        return self.built_in_names | self.mcp_names

    def defer(
        self, turn: AgentTurnContext, *, tool_call_id: str, tool_name: str, arguments: str
    ) -> DeferredToolCall | None:
        """Return the deferred call for a call of one of these tools, or `None` for any other tool."""
        if tool_name in self.built_in_names:
            return DeferredToolCall(tool_call_id, tool_name, arguments, _BUILT_IN_POLICY)
        if self.mcp_source is not None and tool_name in self.mcp_names:
            return self.mcp_source.deferred_tool_call(
                turn, tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments
            )
        return None


class TurnTools:
    """Builds each model Step's `OfferedTurnTools`.

    Args:
        mcp_source: The MCP servers whose tools every agent is offered, or `None`.
    """

    def __init__(self, mcp_source: McpToolSource | None) -> None:
        self._mcp_source = mcp_source

    @property
    def mcp_source(self) -> McpToolSource | None:
        """The MCP tool source, if any."""
        return self._mcp_source

    async def offered(self, turn: AgentTurnContext) -> OfferedTurnTools:
        """Return the tools ``turn``'s model Step offers: its enabled built-ins, then the source's tools.

        A planning turn offers ``write_todos`` alone (when the session enables it).

        The source lists each server once per Worker and answers from its cache after that; a server that
        cannot be listed is left out with a warning (see `McpToolSource.list_tools`).
        """
        built_ins = [name for name in BUILT_IN_TOOL_NAMES if name in turn.enabled_built_in_tools]
        planning = turn.interaction_mode is InteractionMode.PLANNING
        if planning:
            built_ins = [name for name in built_ins if name == WRITE_TODOS]
        tools: list[FunctionTool] = [_BUILT_IN_TOOLS[name] for name in built_ins]
        mcp_names: Sequence[str] = ()
        if self._mcp_source is not None and not planning:
            # An enabled built-in's name is the session's; the source cannot take it.
            listed = [d for d in await self._mcp_source.list_tools() if d.name not in built_ins]
            tools.extend(recorded_result_tool(d.name, d.description, d.input_schema) for d in listed)
            mcp_names = [d.name for d in listed]
        return OfferedTurnTools(tuple(tools), frozenset(built_ins), frozenset(mcp_names), self._mcp_source)
