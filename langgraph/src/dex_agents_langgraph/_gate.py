"""The tool gate: every tool call stops the graph with an interrupt instead of running in the model Step.

`DexToolGate` is a `create_agent` middleware, and `dex_tool_node` builds a `ToolNode` with the same gate
for graphs of your own. Inside `run_model_step` the gate calls `interrupt()` for each tool call, so the
graph stops after its one model call and the session runs each call in its own tool Step. When the turn
resumes, LangGraph runs the gate again and `interrupt()` returns the recorded result, which the gate turns
into the call's `ToolMessage`. In a tool Step the runner marks the one call it executes, and for that call
only the gate hands the request on to the real tool.

LangGraph re-runs a node from its start on resume, so the gate does nothing before `interrupt()` that
could matter twice.

`DexToolGate` also has a model hook: in a model Step it adds the session's tools (enabled built-ins, MCP
tools) to the model request and applies the model and instructions the turn's settings chose (see
`_turn_scope`). Outside a model Step of the runner it changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, TypedDict, cast

from dex_agents.runner import describe_tool_call_outcome
from dex_agents.values import AgentToolCall, ToolCallStatus
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, AnyMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import END
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command, Send, interrupt

from dex_agents_langgraph._turn_scope import current_turn_scope

__all__ = [
    "GATE_INTERRUPT_KEY",
    "DexToolGate",
    "GateAnswer",
    "answer_message",
    "dex_tool_node",
    "executing_tool_call",
    "gate_payload",
    "recorded_answer",
    "route_tool_calls",
]

GATE_INTERRUPT_KEY = "dex_tool_call"
"""The key of the gate's interrupt value that holds the call; tells the gate's interrupts from others."""

_EXECUTING: ContextVar[str | None] = ContextVar("dex_agents_langgraph_executing", default=None)


class GateAnswer(TypedDict):
    """The resume value the runner gives the gate for one call: its recorded outcome.

    Attributes:
        succeeded: Whether the call succeeded; otherwise the model sees the text as an error.
        content: What the model sees.
    """

    succeeded: bool
    content: str


@contextlib.contextmanager
def executing_tool_call(tool_call_id: str) -> Iterator[None]:
    """Let the gate run the real tool for one call, inside a tool Step, for the duration of the block."""
    token = _EXECUTING.set(tool_call_id)
    try:
        yield
    finally:
        _EXECUTING.reset(token)


def gate_payload(value: object) -> Mapping[str, Any] | None:
    """Return the call an interrupt value of the gate carries, or `None` for someone else's interrupt."""
    if isinstance(value, Mapping):
        payload = cast(Mapping[str, Any], value).get(GATE_INTERRUPT_KEY)
        if isinstance(payload, Mapping):
            return cast(Mapping[str, Any], payload)
    return None


def _passes_through(request: ToolCallRequest) -> bool:
    executing = _EXECUTING.get()
    # A call without an ID never passes: outside a tool Step nothing is executing, and None == None.
    return executing is not None and executing == request.tool_call["id"]


def recorded_answer(record: AgentToolCall) -> GateAnswer:
    """Return the answer for a call whose record is final: the outcome the model sees."""
    return GateAnswer(
        succeeded=record.status is ToolCallStatus.SUCCEEDED, content=describe_tool_call_outcome(record)
    )


def answer_message(call: ToolCall, answer: GateAnswer) -> ToolMessage:
    """Return the `ToolMessage` that gives the model a call's answer, as the gate returns it on resume."""
    return ToolMessage(
        content=answer["content"],
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="success" if answer["succeeded"] else "error",
    )


def _stop_for_session(request: ToolCallRequest) -> ToolMessage:
    call = request.tool_call
    answer = cast(
        GateAnswer,
        interrupt({GATE_INTERRUPT_KEY: {"id": call["id"], "name": call["name"], "args": call["args"]}}),
    )
    return answer_message(call, answer)


def _gate(
    request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
) -> ToolMessage | Command[Any]:
    if _passes_through(request):
        return handler(request)
    return _stop_for_session(request)


async def _agate(
    request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
) -> ToolMessage | Command[Any]:
    if _passes_through(request):
        return await handler(request)
    return _stop_for_session(request)


def _with_turn_scope(request: ModelRequest[Any]) -> ModelRequest[Any]:
    scope = current_turn_scope()
    return request if scope is None else scope.apply(request)


class DexToolGate(AgentMiddleware):
    """The `create_agent` middleware that defers every tool call to the Dex session.

    Add it to `create_agent(..., middleware=[...])`, first in the list. Tool middleware listed after it
    (retries, logging) then wraps the real tool in its tool Step only; tool middleware listed before it
    also runs in the model Step, and LangGraph re-runs its code before the gate when the turn resumes.

    Its model hook adds the session's tools (the enabled built-ins, the runner's MCP tools) to each model
    request of a model Step, and applies the model and instructions that the runner's
    ``model_for_settings`` and ``instructions_for_settings`` chose from the turn's session settings.
    """

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Add the session's tools and apply the turn's model and instructions, then call the model."""
        return handler(_with_turn_scope(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage | ExtendedModelResponse[Any]:
        """Add the session's tools and apply the turn's model and instructions, then call the model."""
        return await handler(_with_turn_scope(request))

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Stop the graph for the session, or run the tool inside its tool Step."""
        return _gate(request, handler)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Stop the graph for the session, or run the tool inside its tool Step."""
        return await _agate(request, handler)


def dex_tool_node(
    tools: Sequence[BaseTool | Callable[..., Any]], *, name: str = "tools", **tool_node_options: Any
) -> ToolNode:
    """Return a `ToolNode` that defers every call to the Dex session, for a graph of your own.

    Route to it with `route_tool_calls`, which sends each call to the node as its own task, as
    `create_agent` does; the gate needs one interrupt per task.

    Args:
        tools: The tools.
        name: The node's name.
        **tool_node_options: Other `ToolNode` options, such as `handle_tool_errors`.

    Returns:
        The node.
    """
    return ToolNode(tools, name=name, wrap_tool_call=_gate, awrap_tool_call=_agate, **tool_node_options)


def route_tool_calls(
    state: Mapping[str, Any], *, tools_node: str = "tools", messages_key: str = "messages"
) -> list[Send] | str:
    """Route a model node to the tools node: one `Send` per tool call of the last message, else `END`.

    Use it as the conditional edge after your model node (wrap it with `functools.partial` for other
    node or key names).

    Args:
        state: The graph state.
        tools_node: The tools node's name.
        messages_key: The state key of the message list.

    Returns:
        The sends, or `END` when the last message calls no tool.
    """
    messages = cast(Sequence[AnyMessage], state.get(messages_key) or ())
    if not messages:
        return END
    calls: list[ToolCall] = list(getattr(messages[-1], "tool_calls", None) or ())
    if not calls:
        return END
    return [Send(tools_node, [call]) for call in calls]
