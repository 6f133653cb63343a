"""What one model call of a turn offers and shows, by the turn's mode: tools, tool choice and plan note.

A chat or executing turn offers the agent's tools and then the session's enabled built-ins; a planning turn
offers ``write_todos`` alone, and may force it (``AgentDefinition.planning_tool_choice``). Whenever the
session has a plan to show, `dex_agents.build_plan_note` stands as user text right before the turn's own
messages; it is never stored, so each call shows the plan as it is then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence

from dex_agents._plans import build_plan_note
from dex_agents._tools._builtins import BUILT_IN_TOOL_DEFINITIONS, BUILT_IN_TOOL_NAMES, WRITE_TODOS
from dex_agents.runner import AgentTurnContext
from dex_agents.stepwise._definition import PlanningToolChoice
from dex_agents.stepwise._messages import ChatMessage, replay_chat_messages
from dex_agents.stepwise._model import ToolChoice
from dex_agents.stepwise._tools import ListedTool, ToolDefinition, ToolSource
from dex_agents.values import FrameworkMessage, InteractionMode, PlanStatus

__all__ = ["ListedTools", "OfferedTools", "offered_tools", "planning_tool_choice", "replay_with_plan_note"]

ListedTools = Mapping[str, tuple[ListedTool, ToolSource]]
"""Every tool of the agent's sources by name, with the source that runs its calls."""

OfferedTools = dict[str, tuple[ListedTool, ToolSource | None]]
"""What a model call offers by name, with the source that runs each call: `None` for a built-in, whose calls
the session carries out with a policy of its own."""

_BUILT_IN_TOOLS = {
    name: ToolDefinition(name, definition.description, definition.parameters_json_schema)
    for name, definition in BUILT_IN_TOOL_DEFINITIONS.items()
}


async def offered_tools(
    turn: AgentTurnContext, list_tools: Callable[[], Awaitable[ListedTools]]
) -> OfferedTools:
    """Return what the model is offered in ``turn``: only ``write_todos`` when it plans, else every tool.

    The session's enabled built-ins come after the sources' tools, and an enabled built-in's name is the
    built-in's: a function or MCP tool of that name is not offered while it is enabled. A planning turn
    lists no source.

    Args:
        turn: The turn.
        list_tools: Lists the agent's tool sources.

    Returns:
        The offered tools by name, in order.
    """
    built_ins = [name for name in BUILT_IN_TOOL_NAMES if name in turn.enabled_built_in_tools]
    if turn.interaction_mode is InteractionMode.PLANNING:
        return {WRITE_TODOS: (_BUILT_IN_TOOLS[WRITE_TODOS], None)} if WRITE_TODOS in built_ins else {}
    listed = await list_tools()
    offered: OfferedTools = {name: entry for name, entry in listed.items() if name not in built_ins}
    offered.update((name, (_BUILT_IN_TOOLS[name], None)) for name in built_ins)
    return offered


def planning_tool_choice(turn: AgentTurnContext, choice: PlanningToolChoice) -> ToolChoice | None:
    """Return ``required`` for the first model call of a planning turn without a draft, if ``choice`` says so.

    Args:
        turn: The turn.
        choice: The agent's ``planning_tool_choice``.

    Returns:
        ``"required"``, or `None` for the provider's default.
    """
    forces = (
        choice == "required"
        and turn.interaction_mode is InteractionMode.PLANNING
        and not turn.is_resuming
        and (turn.plan is None or turn.plan.status is not PlanStatus.DRAFT)
    )
    return "required" if forces else None


def replay_with_plan_note(turn: AgentTurnContext, items: Sequence[FrameworkMessage]) -> list[ChatMessage]:
    """Return the stored messages and the turn's unstored items as chat messages, with the plan note.

    Args:
        turn: The turn; its plan and mode decide the note.
        items: The turn's items the session has not stored yet.

    Returns:
        The chat messages; the note, when there is one, is a user message right before the turn's first.
    """
    note = build_plan_note(turn.plan, turn.interaction_mode)
    if note is None:
        return replay_chat_messages([*turn.messages, *items])
    first = next(
        (index for index, message in enumerate(turn.messages) if message.turn_id == turn.turn_id),
        len(turn.messages),
    )
    return [
        *replay_chat_messages(turn.messages[:first]),
        {"role": "user", "content": note},
        *replay_chat_messages([*turn.messages[first:], *items]),
    ]
