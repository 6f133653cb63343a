"""The benchmark's agent: two model calls around one read tool, with a deterministic scripted model."""

from __future__ import annotations

import json
from collections.abc import Sequence

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel


async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "status": "shipped"})


def build_agent(
    *, name: str | None = None, capabilities: Sequence[AbstractCapability[None]] = ()
) -> Agent[None, str]:
    asks = ModelResponse(
        parts=[
            TextPart("Let me look that up. "),
            ToolCallPart("lookup_order", {"order_id": "A-1"}, tool_call_id="lookup-1"),
        ]
    )
    return Agent(
        ScriptedModel([asks, "Order A-1 has shipped."]),
        tools=[lookup_order],
        deps_type=type(None),
        name=name,
        capabilities=list(capabilities),
    )


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        PydanticAiRunner(build_agent()),
        flow_type="PydanticAiBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
