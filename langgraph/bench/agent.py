"""The benchmark's agent: two model calls around one read tool, with the package's `ScriptedChatModel`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "status": "shipped"})


def bench_model() -> ScriptedChatModel:
    """Asks for the lookup, then answers once the lookup's result is in its input."""
    usage = UsageMetadata(input_tokens=20, output_tokens=8, total_tokens=28)
    lookup = tool_call(name="lookup_order", args={"order_id": "A-1"}, id="lookup-1")
    return ScriptedChatModel(
        responses=[
            AIMessage("Let me look that up.", tool_calls=[lookup], usage_metadata=usage),
            AIMessage("Order A-1 has shipped.", usage_metadata=usage),
        ]
    )


def build_agent(
    checkpointer: BaseCheckpointSaver[Any] | None = None, middleware: Sequence[AgentMiddleware] = ()
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return create_agent(bench_model(), tools=[lookup_order], middleware=middleware, checkpointer=checkpointer)


def build_durable_agent(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    return build_agent(checkpointer, middleware=[DexToolGate()])


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        LangGraphRunner(build_durable_agent),
        flow_type="LangGraphBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
