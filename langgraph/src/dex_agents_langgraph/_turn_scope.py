"""What one model Step adds to the graph it runs: the session's tools, and the turn's model and instructions.

A Worker builds the graph once, but each turn may enable the session's built-in tools, offer an MCP
source's tools, and choose its model and instructions from its session settings. The runner makes a
`TurnScope` the current one while it runs the graph (a context variable, which LangGraph's tasks
inherit). `DexToolGate`'s model hook applies it to the model request of a `create_agent` agent; a graph of
your own binds `dex_session_tools()` and reads `current_session_settings()` in its model node.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, cast

from langchain.agents.middleware import ModelRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

__all__ = [
    "TurnScope",
    "current_session_settings",
    "current_turn_scope",
    "dex_session_tools",
    "turn_scope",
]

_NO_SETTINGS: Mapping[str, object] = MappingProxyType({})
_CURRENT: ContextVar[TurnScope | None] = ContextVar("dex_agents_langgraph_turn_scope", default=None)


@dataclass
class TurnScope:
    """The additions of one model Step, and whether the graph took them.

    Attributes:
        session_settings: The settings the turn started with.
        tools: The tools the session adds to the model call: enabled built-ins, then the MCP source's.
        model: The model the runner's ``model_for_settings`` chose, or `None` to keep the graph's.
        instructions: What the runner's ``instructions_for_settings`` adds to the system message, or `None`.
        tools_taken: Whether the graph's model call took ``tools`` (set by `DexToolGate` or
            `dex_session_tools`).
        model_hook_ran: Whether `DexToolGate`'s model hook ran, which applies ``model`` and ``instructions``.
        planning: Whether this is a planning turn, whose model call is offered ``tools`` only (the
            session's ``write_todos``), not the graph's own.
        plan_note: The plan note (`build_plan_note`) the model sees as user text before the turn's first
            message, or `None`.
        earlier_message_ids: The IDs of the stored messages of earlier turns: the note goes before the first
            message of the request that is not one of them.
    """

    session_settings: Mapping[str, object]
    tools: tuple[BaseTool, ...] = ()
    model: BaseChatModel | None = None
    instructions: str | None = None
    tools_taken: bool = False
    model_hook_ran: bool = False
    planning: bool = False
    plan_note: str | None = None
    earlier_message_ids: frozenset[str] = frozenset()

    def apply(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """Return ``request`` with the session's tools added and the turn's model and instructions applied."""
        self.model_hook_ran = True
        self.tools_taken = True
        overrides: dict[str, Any] = {}
        if self.planning:
            # LangChain's own way to limit one model call's tools: the request's tool list.
            overrides["tools"] = list(self.tools)
        elif self.tools:
            offered = {_tool_name(tool) for tool in request.tools}
            overrides["tools"] = [*request.tools, *(tool for tool in self.tools if tool.name not in offered)]
        if self.model is not None:
            overrides["model"] = self.model
        if self.instructions:
            overrides["system_message"] = _with_instructions(request.system_message, self.instructions)
        if self.plan_note is not None:
            overrides["messages"] = self._with_plan_note(request.messages, self.plan_note)
        return request.override(**overrides) if overrides else request

    def _with_plan_note(self, messages: Sequence[AnyMessage], note: str) -> list[AnyMessage]:
        first = next(
            (index for index, message in enumerate(messages) if message.id not in self.earlier_message_ids),
            len(messages),
        )
        return [*messages[:first], HumanMessage(content=note), *messages[first:]]

    def unapplied(self) -> str | None:
        """Why the graph's model call is about to run without this scope's additions, or `None`."""
        # Outside a planning turn a graph of your own runs without the plan note; in one, nothing would
        # keep its own tools from the model, so the turn ends instead.
        if self.planning and not self.model_hook_ran:
            return (
                "plan mode needs DexToolGate's model hook, which offers only write_todos in a planning turn "
                "and shows the model the plan; use create_agent with DexToolGate()"
            )
        if (self.model is not None or self.instructions) and not self.model_hook_ran:
            return (
                "the runner's model_for_settings or instructions_for_settings chose a model or instructions, "
                "but the graph has no DexToolGate model hook to apply them; use create_agent with "
                "DexToolGate(), or read current_session_settings() in your own graph's model node"
            )
        if self.tools and not self.tools_taken:
            names = [tool.name for tool in self.tools]
            return (
                f"the session offers the tools {names} (its built-ins and MCP tools), but the graph's model "
                "call did not take them; use create_agent with DexToolGate(), or bind dex_session_tools() in "
                "your own graph's model node"
            )
        return None


@contextlib.contextmanager
def turn_scope(scope: TurnScope) -> Iterator[TurnScope]:
    """Make ``scope`` the current one for the duration of the block."""
    token = _CURRENT.set(scope)
    try:
        yield scope
    finally:
        _CURRENT.reset(token)


def current_turn_scope() -> TurnScope | None:
    """Return the scope of the model Step running in this context, or `None`."""
    return _CURRENT.get()


def dex_session_tools() -> list[BaseTool]:
    """Return the tools the Dex session adds to the current model call, for a graph of your own.

    They are the session's enabled built-in tools (``ask_user``, ``durable_wait``, ``write_todos``) and
    the tools of the runner's `McpToolSource`. Bind them next to your own in the model node:
    ``model.bind_tools([*tools, *dex_session_tools()])``. Their calls stop at the tool gate like any other;
    the session carries out a built-in call, and an MCP call runs in its tool Step through the source.
    `create_agent` with `DexToolGate` adds them by itself.

    Returns:
        The tools, or an empty list outside a model Step of `LangGraphRunner`.
    """
    scope = _CURRENT.get()
    if scope is None:
        return []
    scope.tools_taken = True
    return list(scope.tools)


def current_session_settings() -> Mapping[str, object]:
    """Return the session settings of the turn the runner is running, for a graph of your own.

    They are `AgentTurnContext.session_settings`: what ``start_session(..., session_settings=...)`` or the
    last ``update_session_settings`` stored when the turn started. Read them in your model node to choose
    the model or the instructions; `create_agent` with `DexToolGate` applies the runner's
    ``model_for_settings`` and ``instructions_for_settings`` instead.

    Returns:
        The settings, read-only; empty outside a model Step of `LangGraphRunner`.
    """
    scope = _CURRENT.get()
    return _NO_SETTINGS if scope is None else MappingProxyType(dict(scope.session_settings))


def _tool_name(tool: BaseTool | Mapping[str, Any]) -> str | None:
    if isinstance(tool, BaseTool):
        return tool.name
    function = tool.get("function")
    if isinstance(function, Mapping):
        return cast(Mapping[str, Any], function).get("name")
    return cast(str | None, tool.get("name"))


def _with_instructions(system_message: SystemMessage | None, instructions: str) -> SystemMessage:
    if system_message is None:
        return SystemMessage(content=instructions)
    content: object = system_message.content
    if isinstance(content, str):
        return SystemMessage(content=f"{content}\n\n{instructions}" if content else instructions)
    blocks = list(cast(Sequence[str | dict[str, Any]], content))
    return SystemMessage(content=[*blocks, {"type": "text", "text": instructions}])
