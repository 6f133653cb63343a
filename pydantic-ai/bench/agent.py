"""The benchmark's agent: two model calls around one read tool, with a deterministic scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from pydantic_ai import Agent
from pydantic_ai.messages import BaseToolReturnPart, ModelMessage, ModelRequest
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

from dex_agents_pydantic_ai import PydanticAiRunner


async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "status": "shipped"})


async def _answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    del info
    answered = any(
        isinstance(part, BaseToolReturnPart)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
    )
    if answered:
        yield "Order A-1 has shipped."
    else:
        yield "Let me look that up. "
        yield {1: DeltaToolCall("lookup_order", json.dumps({"order_id": "A-1"}), tool_call_id="lookup-1")}


def build_agent() -> Agent[None, str]:
    return Agent(FunctionModel(stream_function=_answer), tools=[lookup_order])


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        PydanticAiRunner(build_agent()),
        flow_type="PydanticAiBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
