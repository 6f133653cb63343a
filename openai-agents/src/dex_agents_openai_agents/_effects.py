"""Each deferred call's policy: the session's, else trusted MCP annotations', and the SDK's approvals."""

from __future__ import annotations

from typing import Any

from agents import FunctionTool, RunContextWrapper
from dex_agents import effect_from_mcp_annotations, parse_tool_arguments, policy_from_mcp_annotations
from dex_agents.runner import AgentTurnContext, ToolPolicy
from dex_agents.values import ToolEffect

from dex_agents_openai_agents._gate import GatedAgentGraph, listed_mcp_tools

__all__ = ["CallPolicies", "framework_effect"]


def framework_effect(tool: object) -> ToolEffect | None:
    """Return the effect an MCP tool's annotations declare, or `None` when they declare none.

    The SDK keeps an MCP server's tool annotations on the `FunctionTool` it builds for each listed tool
    (a private `_mcp_annotations` attribute); `dex_agents.effect_from_mcp_annotations` maps them:
    `readOnlyHint` is `read`, otherwise `idempotentHint` is `idempotent_write`. This reports what the
    annotations say whether or not anyone trusts them: `OpenAIAgentsRunner` uses them only with
    ``trust_mcp_annotations=True``.

    Args:
        tool: The tool as the SDK offered it to the model.

    Returns:
        The declared effect, if any.
    """
    return effect_from_mcp_annotations(_annotations(tool))


def _annotations(tool: object) -> object:
    return getattr(tool, "_mcp_annotations", None) if isinstance(tool, FunctionTool) else None


class CallPolicies:
    """Decides the policy of each call a model Step defers.

    Args:
        graph: The gated graph, which knows the user's original agents and tools.
        context: The run context object `needs_approval` callbacks receive.
        trust_mcp_annotations: Whether the MCP servers' tool annotations give a policy
            (`dex_agents.policy_from_mcp_annotations`) to a tool the session has none for.
    """

    def __init__(self, graph: GatedAgentGraph, context: Any, *, trust_mcp_annotations: bool = False) -> None:
        self._graph = graph
        self._context = context
        self._trust_mcp_annotations = trust_mcp_annotations

    async def policy(
        self,
        turn: AgentTurnContext,
        agent_name: str,
        tool_name: str,
        arguments: str | None,
        call_id: str | None,
    ) -> ToolPolicy:
        """Return a call's policy: the session's, else the one trusted MCP annotations declare.

        A tool the SDK itself would ask approval for (`needs_approval`, or an MCP server's
        `require_approval`) waits for approval too, unless the session has an explicit policy for it.
        """
        tool = self._offered_tool(agent_name, tool_name)
        # Any MCP server may annotate its tools as it likes, so they count only where the Worker's code
        # says it trusts them.
        declared = policy_from_mcp_annotations(_annotations(tool)) if self._trust_mcp_annotations else None
        policy = turn.resolve_tool_policy(tool_name, framework_policy=declared)
        if tool is None or tool_name in turn.tool_policies or policy.is_approval_required:
            return policy
        if await self._sdk_requires_approval(tool, arguments, call_id):
            return ToolPolicy(policy.effect, requires_approval=True)
        return policy

    async def _sdk_requires_approval(
        self, tool: FunctionTool, arguments: str | None, call_id: str | None
    ) -> bool:
        needs_approval = tool.needs_approval
        if isinstance(needs_approval, bool):
            return needs_approval
        try:
            parameters = parse_tool_arguments(arguments or "", tool_name=tool.name)
            return bool(
                await needs_approval(RunContextWrapper(context=self._context), parameters, call_id or "")
            )
        except Exception:
            # A policy callback that fails, or arguments it cannot judge, cannot vouch for the call;
            # asking a person is the safe side.
            return True

    def _offered_tool(self, agent_name: str, tool_name: str) -> FunctionTool | None:
        """Return the user's original tool the model called (an MCP tool as this Step listed it)."""
        agent = self._graph.original_agent(agent_name)
        if agent is not None:
            for tool in agent.tools:
                if isinstance(tool, FunctionTool) and tool.name == tool_name:
                    return tool
        return listed_mcp_tools().get(tool_name)
