"""Running one approved tool call in its tool Step, through the graph's own `ToolNode`.

A tool may call LangGraph's `interrupt(value)` to ask a human. The tool Step turns each interrupt into
the session's question (`ask_user_input`): the first run stops there and the session asks the user; once
they answer, the session runs the tool Step again, which resumes the one-node graph with
`Command(resume=answer)` for each answer it holds, in order, so `interrupt()` returns the answer exactly
as in LangGraph (the tool re-runs from its start on every resume, as LangGraph re-runs an interrupted node).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

from dex_agents import ask_user_input, parse_tool_arguments
from dex_agents.runner import DeferredToolExecution, ToolExecutionError, ToolExecutionResult
from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.pregel import Pregel
from langgraph.types import Command

from dex_agents_langgraph._gate import executing_tool_call
from dex_agents_langgraph._hitl import ApprovalTools
from dex_agents_langgraph._state import DexCheckpointSaver

__all__ = ["ToolStepExecutor", "ask_for_interrupt", "single_tool_node"]

_TOO_DEEP = "the {what} of this {tool} call are nested too deeply to process; send flatter JSON"


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
    the same in a tool Step, and runs on a private thread of the runner's saver, so a tool's `interrupt()`
    can be resumed within the Step.

    Args:
        tool_node: The graph's `ToolNode`.
        graph: The user's compiled graph.
        context: The runtime context of every tool call.
        saver: The runner's checkpoint saver.
        approval_tools: The graph's `HumanInTheLoopMiddleware` reviews, whose per-call interrupts in a tool
            Step are approved (the session approved the call before its tool Step).
    """

    def __init__(
        self,
        tool_node: ToolNode,
        graph: Pregel[Any, Any, Any, Any],
        context: object,
        saver: DexCheckpointSaver,
        approval_tools: ApprovalTools,
    ) -> None:
        self._graph = _one_node_graph(tool_node, graph, saver)
        self._context = context
        self._saver = saver
        self._approval_tools = approval_tools

    async def execute(self, call: DeferredToolExecution, config: RunnableConfig) -> ToolExecutionResult:
        """Run the call once and return its result as text.

        Args:
            call: The approved call.
            config: The run's config (the runner's extra config and callbacks).

        Returns:
            The tool's result text.

        Raises:
            ToolExecutionError: When the model should see an error instead of a result: the arguments are
                not a JSON object or do not validate, no tool has this name, or its `ToolMessage` has
                status `error`. Any other exception the tool raises propagates.
            ToolInputRequired: When the tool called `interrupt()` and the session holds no answer for it
                yet (the session asks the user and runs the Step again).
        """
        record = call.tool_call
        try:
            arguments = parse_tool_arguments(record.arguments, tool_name=record.tool_name)
        except RecursionError as error:
            raise ToolExecutionError(_TOO_DEEP.format(what="arguments", tool=record.tool_name)) from error
        tool_call = ToolCall(name=record.tool_name, args=arguments, id=record.tool_call_id, type="tool_call")
        request = AIMessage(content="", tool_calls=[tool_call])
        thread_id = f"tool-step/{record.tool_call_id}/{uuid.uuid4().hex}"
        configurable = dict(cast(Mapping[str, Any], config.get("configurable") or {}))
        configurable["thread_id"] = thread_id
        run_config = cast(RunnableConfig, {**config, "configurable": configurable})
        graph_input: object = {"messages": [request]}
        try:
            while True:
                with executing_tool_call(record.tool_call_id):
                    try:
                        output = await self._graph.ainvoke(
                            graph_input, run_config, context=self._context, version="v2"
                        )
                    except RecursionError as error:
                        # LangChain's validation of deeply nested arguments, or its rendering of a deeply
                        # nested result, recursed past Python's limit: the model should hear about it.
                        raise ToolExecutionError(
                            _TOO_DEEP.format(what="arguments or result", tool=record.tool_name)
                        ) from error
                if not output.interrupts:
                    break
                # One task runs, so one interrupt is pending; its answer (asked for now, or the next one the
                # session holds) resumes the tool, which then returns or interrupts again.
                value = output.interrupts[0].value
                approval = self._approval_tools.answer(value)
                graph_input = Command(resume=ask_for_interrupt(value) if approval is None else approval)
        finally:
            self._saver.delete_thread(thread_id)
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


def ask_for_interrupt(value: object) -> str:
    """Return the user's answer to a tool's `interrupt(value)`, asking the session's question first.

    A text value is the question. A mapping with a ``"question"`` text may also give ``"choices"`` (a list
    of texts) and ``"allows_free_text"`` (a bool), as `ask_user_input` takes them. Any other value is
    asked as its JSON text.

    Raises:
        ToolInputRequired: When the session holds no answer to this question yet.
    """
    if isinstance(value, str) and value.strip():
        return ask_user_input(value)
    if isinstance(value, Mapping):
        fields = cast(Mapping[str, Any], value)
        question = fields.get("question")
        choices = fields.get("choices") or ()
        allows_free_text = fields.get("allows_free_text", True)
        if (
            isinstance(question, str)
            and question.strip()
            and isinstance(choices, list | tuple)
            and all(isinstance(choice, str) for choice in cast(Sequence[object], choices))
            and isinstance(allows_free_text, bool)
        ):
            return ask_user_input(
                question, choices=list(cast(Sequence[str], choices)), allows_free_text=allows_free_text
            )
    return ask_user_input(json.dumps(value, default=str, ensure_ascii=False))


def _one_node_graph(
    tool_node: ToolNode, graph: Pregel[Any, Any, Any, Any], saver: DexCheckpointSaver
) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node(tool_node.name or "tools", tool_node)
    builder.add_edge(START, tool_node.name or "tools")
    return builder.compile(store=graph.store, checkpointer=saver)
