"""Running one approved tool call in its tool Step, through the graph's own `ToolNode`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from dex_agents import parse_tool_arguments
from dex_agents.runner import DeferredToolExecution, ToolExecutionError, ToolExecutionResult
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel

from dex_agents_langgraph._gate import executing_tool_call

__all__ = ["ToolStepExecutor", "single_tool_node"]


def single_tool_node(graph: Pregel[Any, Any, Any, Any]) -> ToolNode:
    """Return the graph's one `ToolNode`.

    Raises:
        TypeError: If the graph has none or several.
    """
    nodes = [node.bound for node in graph.nodes.values() if isinstance(node.bound, ToolNode)]
    if len(nodes) != 1:
        raise TypeError(
            f"the graph must have exactly one ToolNode (found {len(nodes)}): create_agent with at least one "
            "tool, or dex_tool_node(...) in your own graph"
        )
    return nodes[0]


class ToolStepExecutor:
    """Runs one call through the user's `ToolNode` in a one-node graph, with the gate letting it through.

    The call goes through LangGraph's own tool pipeline (argument validation, `wrap_tool_call` middleware,
    `handle_tool_errors`). The one-node graph shares the user's graph's store, so `ToolRuntime.store` is
    the same in a tool Step.

    Args:
        tool_node: The graph's `ToolNode`.
        graph: The user's compiled graph.
        context: The runtime context of every tool call.
    """

    def __init__(self, tool_node: ToolNode, graph: Pregel[Any, Any, Any, Any], context: object) -> None:
        self._graph = _one_node_graph(tool_node, graph)
        self._context = context

    async def execute(self, call: DeferredToolExecution, config: RunnableConfig) -> ToolExecutionResult:
        """Run the call once and return its result as text.

        Args:
            call: The approved call.
            config: The run's config (the runner's extra config and callbacks).

        Returns:
            The tool's result text.

        Raises:
            ToolExecutionError: When the model should see an error instead of a result: the arguments are
                not a JSON object or do not validate, no tool has this name, the tool called `interrupt()`,
                or its `ToolMessage` has status `error`. Any other exception the tool raises propagates.
        """
        record = call.tool_call
        tool_call = ToolCall(
            name=record.tool_name,
            args=parse_tool_arguments(record.arguments, tool_name=record.tool_name),
            id=record.tool_call_id,
            type="tool_call",
        )
        request = AIMessage(content="", tool_calls=[tool_call])
        with executing_tool_call(record.tool_call_id):
            output = await self._graph.ainvoke(
                {"messages": [request]}, config, context=self._context, version="v2"
            )
        if output.interrupts:
            raise ToolExecutionError(
                f"tool {record.tool_name!r} called interrupt(), but a tool in a Dex session cannot wait for "
                "input; approvals come from the session's tool policies"
            )
        result = cast(Mapping[str, Any], output.value)
        for message in reversed(cast(Sequence[BaseMessage], result.get("messages") or ())):
            if isinstance(message, ToolMessage) and message.tool_call_id == record.tool_call_id:
                if message.status == "error":
                    raise ToolExecutionError(message.text)
                return ToolExecutionResult(message.text)
        raise ToolExecutionError(
            f"tool {record.tool_name!r} returned no ToolMessage for call {record.tool_call_id!r}; "
            "a tool that returns a Command must include the call's ToolMessage in its update"
        )


def _one_node_graph(
    tool_node: ToolNode, graph: Pregel[Any, Any, Any, Any]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node(tool_node.name or "tools", tool_node)
    builder.add_edge(START, tool_node.name or "tools")
    return builder.compile(store=graph.store)
