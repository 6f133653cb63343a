"""The `TurnScope` of each model Step: the tools it offers beside the graph's own, and what `_settings` chose.

The session's tools are LangChain tools made from definitions: the enabled built-ins from
`BUILT_IN_TOOL_DEFINITIONS`, and each tool an `McpToolSource` lists. Their bodies never run: every call
stops at the tool gate, the session carries out a built-in call itself, and the runner passes an MCP call
to the source in its tool Step.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dex_agents import (
    BUILT_IN_TOOL_DEFINITIONS,
    BUILT_IN_TOOL_NAMES,
    WRITE_TODOS,
    AgentTurnContext,
    InteractionMode,
    build_plan_note,
)
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from dex_agents_langgraph._messages import history_from_stored_messages
from dex_agents_langgraph._settings import InstructionsForSettings, ModelForSettings, SettingsChoice
from dex_agents_langgraph._turn_scope import TurnScope

if TYPE_CHECKING:
    from dex_agents.mcp import McpToolDefinition, McpToolSource

__all__ = ["TurnSetup", "TurnSetupError"]

_logger = logging.getLogger("dex_agents_langgraph")


class TurnSetupError(Exception):
    """The turn cannot start: its settings choose no usable model, or a tool name is taken twice."""


async def _carried_out_by_the_session(**arguments: object) -> str:
    del arguments
    raise ToolException(
        "this tool runs only through the Dex session: its call stops at DexToolGate, and the session carries "
        "it out (a built-in) or the runner calls it in its tool Step (an MCP tool)"
    )


def _definition_tool(name: str, description: str, parameters: Mapping[str, object]) -> BaseTool:
    return StructuredTool(
        name=name,
        description=description,
        args_schema=dict(parameters),
        coroutine=_carried_out_by_the_session,
    )


_BUILT_IN_TOOLS: Mapping[str, BaseTool] = {
    name: _definition_tool(
        name,
        BUILT_IN_TOOL_DEFINITIONS[name].description,
        BUILT_IN_TOOL_DEFINITIONS[name].parameters_json_schema,
    )
    for name in BUILT_IN_TOOL_NAMES
}


class TurnSetup:
    """Builds the `TurnScope` of each model Step from the turn and the runner's options.

    Args:
        graph_tool_names: The names of the graph's own tools (its `ToolNode`'s).
        model_for_settings: The runner's model hook, if any.
        instructions_for_settings: The runner's instructions hook, if any.
        mcp_tools: The runner's MCP source, if any.
    """

    def __init__(
        self,
        graph_tool_names: frozenset[str],
        *,
        model_for_settings: ModelForSettings | None,
        instructions_for_settings: InstructionsForSettings | None,
        mcp_tools: McpToolSource | None,
    ) -> None:
        self._graph_tool_names = graph_tool_names
        self._settings = SettingsChoice(model_for_settings, instructions_for_settings)
        self._mcp_tools = mcp_tools
        self._mcp_tool_cache: dict[str, tuple[McpToolDefinition, BaseTool]] = {}
        self._warned_collisions: set[str] = set()

    async def scope_for(self, turn: AgentTurnContext) -> TurnScope:
        """Return the scope of a model Step of ``turn``.

        Raises:
            TurnSetupError: If a hook raises or returns something unusable, or the graph has a tool named
                like an enabled built-in; every attempt of the turn would fail alike.
        """
        settings = turn.session_settings
        try:
            model = self._settings.model(settings)
            instructions = self._settings.instructions(settings)
        except Exception as error:
            raise TurnSetupError(
                f"the session settings chose no usable model or instructions: {type(error).__name__}: {error}"
            ) from error
        note = build_plan_note(turn.plan, turn.interaction_mode)
        earlier: frozenset[str] = frozenset()
        if note is not None:
            earlier_turns = [message for message in turn.messages if message.turn_id != turn.turn_id]
            earlier = frozenset(
                message.id for message in history_from_stored_messages(earlier_turns) if message.id
            )
        if turn.interaction_mode is InteractionMode.PLANNING:
            # A planning turn offers the model write_todos alone; the session rejects any other call.
            planning_tools = (_BUILT_IN_TOOLS[WRITE_TODOS],)
            return TurnScope(
                settings,
                planning_tools,
                model,
                instructions,
                planning=True,
                plan_note=note,
                earlier_message_ids=earlier,
            )
        built_ins = self._built_in_tools(turn.enabled_built_in_tools)
        taken = self._graph_tool_names | {tool.name for tool in built_ins}
        mcp = await self._mcp_turn_tools(taken)
        return TurnScope(
            settings, (*built_ins, *mcp), model, instructions, plan_note=note, earlier_message_ids=earlier
        )

    def _built_in_tools(self, enabled: Sequence[str]) -> list[BaseTool]:
        tools: list[BaseTool] = []
        for name in BUILT_IN_TOOL_NAMES:
            if name not in enabled:
                continue
            if name in self._graph_tool_names:
                raise TurnSetupError(
                    f"the graph has a tool named {name!r}, which this session reserves for its built-in "
                    f"tool; rename the tool, or leave {name!r} out of AgentSessionOptions.built_in_tools"
                )
            tools.append(_BUILT_IN_TOOLS[name])
        return tools

    async def _mcp_turn_tools(self, taken: frozenset[str] | set[str]) -> list[BaseTool]:
        if self._mcp_tools is None:
            return []
        tools: list[BaseTool] = []
        for definition in await self._mcp_tools.list_tools():
            if definition.name in taken:
                if definition.name not in self._warned_collisions:
                    self._warned_collisions.add(definition.name)
                    _logger.warning(
                        "MCP tool %r is left out: the graph already has a tool of that name", definition.name
                    )
                continue
            tools.append(self._mcp_tool(definition))
        return tools

    def _mcp_tool(self, definition: McpToolDefinition) -> BaseTool:
        cached = self._mcp_tool_cache.get(definition.name)
        if cached is None or cached[0] != definition:
            tool = _definition_tool(definition.name, definition.description, definition.input_schema)
            cached = self._mcp_tool_cache[definition.name] = (definition, tool)
        return cached[1]
