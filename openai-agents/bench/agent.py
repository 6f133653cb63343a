"""The benchmark's agent: two model calls around one read tool, with a deterministic scripted model."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agents import Agent, TResponseInputItem, function_tool
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy

from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel, call_item, text_item


@function_tool
async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "status": "shipped"})


async def _answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del offered
    answered = any(cast(Mapping[str, Any], item).get("type") == "function_call_output" for item in items)
    if answered:
        return ScriptedAnswer([text_item("Order A-1 has shipped.")])
    return ScriptedAnswer(
        [text_item("Let me look that up."), call_item("lookup_order", {"order_id": "A-1"}, "lookup-1")]
    )


def build_agent() -> Agent[None]:
    return Agent(name="orders", model=ScriptedResponsesModel(_answer), tools=[lookup_order])


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        OpenAIAgentsRunner(build_agent()),
        flow_type="OpenAIAgentsBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
