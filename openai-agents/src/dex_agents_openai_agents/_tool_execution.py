"""Runs one deferred tool call with the user's original SDK tool, in its tool Step."""

from __future__ import annotations

import copy
import json
from typing import Any, cast

from agents import Agent, FunctionTool, ModelBehaviorError, RunConfig, RunContextWrapper, UserError
from agents.tool import set_function_tool_failure_error_function
from agents.tool_context import ToolContext
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolOutputGuardrailData,
)
from dex_agents.runner import ToolExecutionError
from openai.types.responses import ResponseFunctionToolCall

from dex_agents_openai_agents._gate import GatedAgentGraph

__all__ = ["ToolCallRunner", "tool_source_reference"]


def tool_source_reference(agent_name: str) -> str:
    """Return the reference a call record keeps: the agent whose tool the model called."""
    return json.dumps({"agent": agent_name}, separators=(",", ":"))


def _agent_name(reference: str | None) -> str | None:
    if not reference:
        return None
    try:
        loaded: object = json.loads(reference)
    except json.JSONDecodeError:
        return None
    if isinstance(loaded, dict):
        name = cast(dict[str, object], loaded).get("agent")
        if isinstance(name, str):
            return name
    return None


def _text_part(output: object) -> str | None:
    # MCP tools and structured tool outputs come back as `{"type": "text", "text": ...}` parts, which
    # the SDK shows the model as their text.
    if isinstance(output, dict):
        part = cast(dict[str, object], output)
        value = part.get("text")
        if part.get("type") in ("text", "input_text") and isinstance(value, str):
            return value
        return None
    text: object = getattr(output, "text", None)
    kind: object = getattr(output, "type", None)
    if kind in ("text", "input_text") and isinstance(text, str):
        return text
    return None


def _output_text(output: object) -> str:
    if isinstance(output, str):
        return output
    single = _text_part(output)
    if single is not None:
        return single
    if isinstance(output, list):
        items = cast(list[object], output)
        parts = [part for part in (_text_part(item) for item in items) if part is not None]
        if items and len(parts) == len(items):
            return "\n".join(parts)
    try:
        return json.dumps(cast(Any, output), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(cast(Any, output))


def _guardrail_rejection(verdict: ToolGuardrailFunctionOutput, name: str, kind: str) -> str | None:
    """Return the text the model sees instead of the tool's output, or `None` when the guardrail allows."""
    behavior = verdict.behavior
    if behavior["type"] == "reject_content":
        # As in the SDK, the message replaces the tool's output and the call counts as answered.
        return behavior["message"]
    if behavior["type"] == "raise_exception":
        # The SDK would abort the whole run; a tool Step can only fail its own call, visibly.
        raise ToolExecutionError(f"tool {kind} guardrail {name!r} tripped")
    return None


class ToolCallRunner:
    """Finds and runs the user's original tool for a recorded call.

    Args:
        graph: The gated graph, which also knows the user's original agents.
        context: The run context object tools receive.
        run_config: The run configuration tools see in their `ToolContext`.
    """

    def __init__(self, graph: GatedAgentGraph, context: Any, run_config: RunConfig) -> None:
        self._graph = graph
        self._context = context
        self._run_config = run_config

    async def run(
        self, *, tool_name: str, tool_call_id: str, arguments: str, source_reference: str | None
    ) -> str:
        """Run one call once and return the text the model sees.

        Exceptions the tool raises propagate, unlike in `Runner.run` (where the SDK shows the model an
        error text): the session then retries the call or records it by its effect. Invalid arguments
        and a tool the agent does not have are shown to the model as a failed call.

        Raises:
            ToolExecutionError: The arguments are invalid, or no agent of the graph has the tool.
        """
        agent = self._find_agent(source_reference)
        tool = await self._find_tool(agent, tool_name)
        if tool is None:
            raise ToolExecutionError(f"Tool {tool_name} not found in agent {agent.name}")
        runnable = copy.copy(tool)
        # Without a failure formatter the SDK's invoker re-raises, so the Step sees the real failure.
        set_function_tool_failure_error_function(runnable, None)
        tool_call = ResponseFunctionToolCall(
            type="function_call", call_id=tool_call_id, name=tool_name, arguments=arguments
        )
        context = ToolContext(
            context=self._context,
            tool_name=tool_name,
            tool_call_id=tool_call_id,
            tool_arguments=arguments,
            tool_call=tool_call,
            agent=agent,
            run_config=self._run_config,
        )
        for input_guardrail in tool.tool_input_guardrails or ():
            verdict = await input_guardrail.run(ToolInputGuardrailData(context=context, agent=agent))
            rejection = _guardrail_rejection(verdict, input_guardrail.get_name(), "input")
            if rejection is not None:
                return rejection
        try:
            output: object = await runnable.on_invoke_tool(context, arguments)
        except (ModelBehaviorError, UserError) as error:
            # Invalid JSON or arguments the schema rejects: the model should see it and may correct
            # itself; running again would fail the same way.
            raise ToolExecutionError(str(error)) from error
        for output_guardrail in tool.tool_output_guardrails or ():
            verdict = await output_guardrail.run(
                ToolOutputGuardrailData(context=context, agent=agent, output=output)
            )
            rejection = _guardrail_rejection(verdict, output_guardrail.get_name(), "output")
            if rejection is not None:
                return rejection
        return _output_text(output)

    def _find_agent(self, source_reference: str | None) -> Agent[Any]:
        name = _agent_name(source_reference)
        agent = self._graph.original_agent(name) if name is not None else None
        return agent if agent is not None else next(self._graph.original_agents())

    async def _find_tool(self, agent: Agent[Any], tool_name: str) -> FunctionTool | None:
        for tool in agent.tools:
            if isinstance(tool, FunctionTool) and tool.name == tool_name:
                return tool
        if agent.mcp_servers:
            for tool in await agent.get_mcp_tools(RunContextWrapper(context=self._context)):
                if isinstance(tool, FunctionTool) and tool.name == tool_name:
                    return tool
        return None
