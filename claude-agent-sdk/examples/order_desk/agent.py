"""The application: Claude Agent SDK tools and options, wrapped for a durable Dex session.

Everything an application writes is in this file. `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, tool
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy, current_tool_execution

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from examples.order_desk.scripted import SCRIPTED_API

FLOW_TYPE = "ClaudeOrderDesk"
LEDGER_ENV = "ORDER_DESK_LEDGER"
"""The file the refund tool appends to, so the demo can show that a refund ran exactly once."""

ORDERS = {"A-17": {"item": "espresso machine", "status": "delivered broken", "paid_eur": 40}}


@tool(
    "lookup_order",
    "Look up an order: what was bought, its status and what the customer paid.",
    {"order_id": str},
    annotations=ToolAnnotations(readOnlyHint=True),
)
async def lookup_order(arguments: dict[str, Any]) -> dict[str, Any]:
    order = ORDERS.get(arguments["order_id"])
    text = json.dumps({"order_id": arguments["order_id"], **order}) if order else "There is no such order."
    return {"content": [{"type": "text", "text": text}]}


@tool("refund_order", "Refund an order to the customer's card.", {"order_id": str, "amount_eur": int})
async def refund_order(arguments: dict[str, Any]) -> dict[str, Any]:
    execution = current_tool_execution()
    # A payment provider would take this key and refuse a second refund with it.
    key = execution.idempotency_key if execution is not None else "no-dex-session"
    ledger = Path(os.environ.get(LEDGER_ENV, "order-desk-ledger.jsonl"))
    line = json.dumps({**arguments, "idempotency_key": key}) + "\n"
    await asyncio.to_thread(_append, ledger, line)
    text = f"Refunded {arguments['amount_eur']} EUR for order {arguments['order_id']}."
    return {"content": [{"type": "text", "text": text}]}


def _append(path: Path, line: str) -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write(line)


SYSTEM_PROMPT = (
    "You are the order desk of a small shop. Look orders up before you act. "
    "Refund what the customer paid when an item arrived broken."
)


def options(model: str) -> ClaudeAgentOptions:
    """The agent's options; the key of the real API comes from the Worker's `ANTHROPIC_API_KEY`."""
    return ClaudeAgentOptions(
        system_prompt=SYSTEM_PROMPT,
        model=model,
        setting_sources=[],
        env={"ANTHROPIC_API_KEY": os.environ.get("ANTHROPIC_API_KEY", "")},
    )


def build_flow(model: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the tools and options wrapped in `ClaudeAgentRunner`, with a policy per tool."""
    # The scripted model answers on loopback, in the slot of the real API (`ANTHROPIC_BASE_URL`).
    runner_options = (
        SCRIPTED_API.options(
            ClaudeAgentOptions(system_prompt=SYSTEM_PROMPT, model="claude-sonnet-4-5", setting_sources=[])
        )
        if model == "scripted"
        else options(model)
    )
    return AgentSessionFlow(
        ClaudeAgentRunner(runner_options, [lookup_order, refund_order]),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(
            tool_policies={
                # A read runs inline in the CLI (its readOnlyHint says so too): at least once.
                "lookup_order": ToolPolicy(ToolEffect.READ),
                # A refund runs in its own Step, at most once, only after a person approved it.
                "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
            }
        ),
    )
