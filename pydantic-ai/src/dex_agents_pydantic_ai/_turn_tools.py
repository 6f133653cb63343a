"""The tools a turn offers beside the agent's own: the session's built-ins and an MCP tool source's.

Both kinds have only a name, a description and a JSON Schema, and neither runs through Pydantic AI: the
session carries out a built-in call itself, and an `McpToolSource` call runs in its tool Step through the
source. So each kind reaches Pydantic AI as an `ExternalToolset` added to the run (`Agent.iter(toolsets=)`),
which offers its tools to the model like any other and never runs them; the runner stops before
`CallToolsNode` anyway and defers every call. What differs is the deferral: a built-in call needs no
policy of its own (the session routes it), and an MCP call takes its policy and its
`tool_source_reference` from the source.

A `planning` turn offers the model `write_todos` alone. The agent's own toolsets are still built as
Pydantic AI builds them; `PlanningTools`, a capability added to the run, filters the function tools of
the request with Pydantic AI's own `prepare_tools` hook, so the hidden tools are neither shown to the model
nor callable. Output tools stay: they are how the agent's run ends, and no policy applies to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BUILT_IN_TOOL_NAMES,
    WRITE_TODOS,
    AgentTurnContext,
    DeferredToolCall,
    InteractionMode,
    ToolEffect,
    ToolPolicy,
)
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolSource

__all__ = ["BUILT_IN_TOOLSET_ID", "MCP_TOOLSET_ID", "PlanningTools", "TurnTools", "list_turn_tools"]

BUILT_IN_TOOLSET_ID = "dex-built-in-tools"
"""The toolset of the session's built-in tools; Pydantic AI names it in a tool name conflict."""
MCP_TOOLSET_ID = "dex-mcp-tools"
"""The toolset of the runner's `McpToolSource`; Pydantic AI names it in a tool name conflict."""

# The session replaces a built-in call's policy with its own (read, no approval); this is only what the
# call carries until then.
_BUILT_IN_POLICY = ToolPolicy(ToolEffect.READ, requires_approval=False)


@dataclass(frozen=True)
class TurnTools:
    """The extra tools of one model call, and how to defer their calls.

    Attributes:
        toolsets: The toolsets to add to the run, none when the turn has no extra tools.
        built_in_names: The built-in tools the session enables in this turn.
        mcp_names: The tools the MCP source listed for this call.
    """

    toolsets: tuple[AbstractToolset[Any], ...] = ()
    built_in_names: frozenset[str] = frozenset()
    mcp_names: frozenset[str] = frozenset()
    capabilities: tuple[AbstractCapability[Any], ...] = ()
    """Capabilities to add to the run: `PlanningTools` in a planning turn."""

    def deferred_call(
        self,
        turn: AgentTurnContext,
        mcp_tools: McpToolSource | None,
        *,
        tool_call_id: str,
        tool_name: str,
        arguments: str,
    ) -> DeferredToolCall | None:
        """Return the deferral of a call to one of these tools, or `None` for any other tool.

        Args:
            turn: The turn the model call belongs to.
            mcp_tools: The runner's MCP source, if any.
            tool_call_id: The call's ID.
            tool_name: The tool the model called.
            arguments: The call's arguments as JSON text.

        Returns:
            The deferred call, with the source's policy and reference for an MCP tool.
        """
        if tool_name in self.built_in_names:
            return DeferredToolCall(tool_call_id, tool_name, arguments, _BUILT_IN_POLICY)
        if tool_name in self.mcp_names and mcp_tools is not None:
            return mcp_tools.deferred_tool_call(
                turn, tool_call_id=tool_call_id, tool_name=tool_name, arguments=arguments
            )
        return None


async def list_turn_tools(turn: AgentTurnContext, mcp_tools: McpToolSource | None) -> TurnTools:
    """Return the built-ins the turn enables and the MCP source's tools, as toolsets for the run.

    The source lists its servers here, in the model Step (each server's listing is cached by the source;
    a server that cannot be listed is left out with a warning and tried again at the next call).

    Args:
        turn: The turn whose model call is about to be made.
        mcp_tools: The runner's MCP source, if any.

    Returns:
        The toolsets and the names they hold; in a planning turn only ``write_todos``, with the
        `PlanningTools` capability that hides the agent's own function tools.
    """
    toolsets: list[AbstractToolset[Any]] = []
    built_ins = [name for name in BUILT_IN_TOOL_NAMES if name in turn.enabled_built_in_tools]
    if InteractionMode(turn.interaction_mode) is InteractionMode.PLANNING:
        # The session rejects every other call of a planning turn, so nothing else is offered, and the
        # MCP source is not even listed.
        planning = [name for name in built_ins if name == WRITE_TODOS]
        toolsets.append(_built_in_toolset(planning))
        return TurnTools(tuple(toolsets), frozenset(planning), capabilities=(PlanningTools(),))
    if built_ins:
        toolsets.append(_built_in_toolset(built_ins))
    mcp_names: list[str] = []
    if mcp_tools is not None:
        listed = await mcp_tools.list_tools()
        if listed:
            toolsets.append(
                ExternalToolset(
                    [
                        ToolDefinition(
                            name=tool.name,
                            description=tool.description,
                            parameters_json_schema=dict(tool.input_schema),
                        )
                        for tool in listed
                    ],
                    id=MCP_TOOLSET_ID,
                )
            )
            mcp_names = [tool.name for tool in listed]
    return TurnTools(tuple(toolsets), frozenset(built_ins), frozenset(mcp_names))


def _built_in_toolset(names: list[str]) -> ExternalToolset[Any]:
    return ExternalToolset(
        [
            ToolDefinition(
                name=definition.name,
                description=definition.description,
                parameters_json_schema=definition.parameters_json_schema,
            )
            for definition in (BUILT_IN_TOOL_DEFINITIONS[name] for name in names)
        ],
        id=BUILT_IN_TOOLSET_ID,
    )


@dataclass
class PlanningTools(AbstractCapability[Any]):
    """Offers the model only ``write_todos`` among the function tools: the run of a planning turn."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        """Added per run by the runner; never part of an agent spec."""
        return None

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """Keep ``write_todos`` (the session's built-in) and drop every other function tool."""
        del ctx
        return [tool_def for tool_def in tool_defs if tool_def.name == WRITE_TODOS]
