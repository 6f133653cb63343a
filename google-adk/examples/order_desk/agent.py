"""The application: an ordinary Google ADK app, wrapped for a durable Dex session.

Everything an application writes is in this file. `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy, current_tool_execution
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import BaseLlm

from dex_agents_google_adk import GoogleAdkRunner
from examples.order_desk.scripted import OrderDeskScriptedLlm

FLOW_TYPE = "AdkOrderDesk"
LEDGER_ENV = "ORDER_DESK_LEDGER"
"""The file the refund tool appends to, so the demo can show that a refund ran exactly once."""

ORDERS = {"A-17": {"item": "espresso machine", "status": "delivered broken", "paid_eur": 40}}


async def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order: what was bought, its status and what the customer paid.

    Args:
        order_id: The order's ID, such as A-17.
    """
    order = ORDERS.get(order_id)
    if order is None:
        return {"error": f"There is no order {order_id}."}
    return {"order_id": order_id, **order}


def refund_order(order_id: str, amount_eur: int) -> str:
    """Refund an order to the customer's card.

    Args:
        order_id: The order to refund.
        amount_eur: The amount in euros.
    """
    execution = current_tool_execution()
    # A payment provider would take this key and refuse a second refund with it.
    key = execution.idempotency_key if execution is not None else "no-dex-session"
    ledger = Path(os.environ.get(LEDGER_ENV, "order-desk-ledger.jsonl"))
    with ledger.open("a", encoding="utf-8") as file:
        file.write(
            json.dumps({"order_id": order_id, "amount_eur": amount_eur, "idempotency_key": key}) + "\n"
        )
    return f"Refunded {amount_eur} EUR for order {order_id}."


def resolve_model(name: str) -> BaseLlm | str:
    """Return the model for ``--model``: the built-in scripted model, or a model name ADK knows.

    Args:
        name: ``scripted``, or a name such as ``gemini-2.5-flash`` (the provider's API key must be in the
            environment of the Worker).
    """
    return OrderDeskScriptedLlm() if name == "scripted" else name


def build_app(model_name: str = "scripted") -> App:
    """The application, exactly as it would run without Dex."""
    agent = LlmAgent(
        name="order_desk",
        model=resolve_model(model_name),
        instruction=(
            "You are the order desk of a small shop. Look orders up before you act. "
            "Refund what the customer paid when an item arrived broken."
        ),
        tools=[lookup_order, refund_order],
    )
    return App(name="order_desk", root_agent=agent)


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the app wrapped in `GoogleAdkRunner`, with a policy for each tool."""
    return AgentSessionFlow(
        GoogleAdkRunner(build_app(model_name)),
        flow_type=FLOW_TYPE,
        options=AgentSessionOptions(
            tool_policies={
                # A read runs in its own Step and is retried freely.
                "lookup_order": ToolPolicy(ToolEffect.READ),
                # A refund runs at most once, only after a person approved it.
                "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
            }
        ),
    )
