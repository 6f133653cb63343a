"""The application: Claude Agent SDK tools and options, wrapped for a durable Dex session.

Everything an application writes is in this file, but for the shop's two functions, which every
order-desk example shares (`dex_agents_examples`) and Claude's `@tool` handlers below call. `build_flow` is
called twice with the same arguments: by the Worker process that runs the session's Steps, and by the
process whose Client starts and drives sessions, so both register the same Flow type.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, tool
from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents_examples import ORDER_DESK_INSTRUCTIONS, ORDER_DESK_TOOL_POLICIES, lookup_order, refund_order

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from examples.order_desk.scripted import SCRIPTED_API

FLOW_TYPE = "ClaudeOrderDesk"


@tool(
    "lookup_order",
    "Look up an order: what was bought, its status and what the customer paid.",
    {"order_id": str},
    annotations=ToolAnnotations(readOnlyHint=True),
)
async def lookup(arguments: dict[str, Any]) -> dict[str, Any]:
    return _text(await lookup_order(arguments["order_id"]))


@tool("refund_order", "Refund an order to the customer's card.", {"order_id": str, "amount_eur": int})
async def refund(arguments: dict[str, Any]) -> dict[str, Any]:
    # The shop's refund writes a file; a thread keeps the event loop free (and still sees the tool call).
    return _text(await asyncio.to_thread(refund_order, arguments["order_id"], arguments["amount_eur"]))


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def options(model: str) -> ClaudeAgentOptions:
    """The agent's options; the key of the real API comes from the Worker's `ANTHROPIC_API_KEY`."""
    return ClaudeAgentOptions(
        system_prompt=ORDER_DESK_INSTRUCTIONS,
        model=model,
        setting_sources=[],
        env={"ANTHROPIC_API_KEY": os.environ.get("ANTHROPIC_API_KEY", "")},
    )


def build_flow(model: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the tools and options wrapped in `ClaudeAgentRunner`, with a policy per tool."""
    # The scripted model answers on loopback, in the slot of the real API (`ANTHROPIC_BASE_URL`).
    runner_options = (
        SCRIPTED_API.options(
            ClaudeAgentOptions(
                system_prompt=ORDER_DESK_INSTRUCTIONS, model="claude-sonnet-4-5", setting_sources=[]
            )
        )
        if model == "scripted"
        else options(model)
    )
    return AgentSessionFlow(
        ClaudeAgentRunner(runner_options, [lookup, refund]),
        flow_type=FLOW_TYPE,
        # The lookup is a read, which runs inline in the CLI (its readOnlyHint says so too): at least once.
        # The refund runs in its own Step, at most once, only after a person approved it.
        options=AgentSessionOptions(tool_policies=ORDER_DESK_TOOL_POLICIES),
    )
