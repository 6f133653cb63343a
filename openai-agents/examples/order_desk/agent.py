"""The application: an ordinary OpenAI Agents SDK agent, wrapped for a durable Dex session.

Everything an application writes is in this file. `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from agents import Agent, Model, function_tool
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy, current_tool_execution

from dex_agents_openai_agents import OpenAIAgentsRunner
from examples.order_desk.scripted import scripted_model

FLOW_TYPE = "OrderDesk"
LEDGER_ENV = "ORDER_DESK_LEDGER"
"""The file the refund tool appends to, so the demo can show that a refund ran exactly once."""

ORDERS = {"A-17": {"item": "espresso machine", "status": "delivered broken", "paid_eur": 40}}


@function_tool
async def lookup_order(order_id: str) -> str:
    """Look up an order: what was bought, its status and what the customer paid.

    Args:
        order_id: The order's ID, such as A-17.
    """
    order = ORDERS.get(order_id)
    if order is None:
        return f"There is no order {order_id}."
    return json.dumps({"order_id": order_id, **order})


@function_tool
def refund_order(order_id: str, amount_eur: int) -> str:
    """Refund an order to the customer's card.

    Args:
        order_id: The order to refund.
        amount_eur: The amount in euros.
    """
    # The SDK runs a plain function in a worker thread; the accessor still sees the tool call.
    execution = current_tool_execution()
    # A payment provider would take this key and refuse a second refund with it.
    key = execution.idempotency_key if execution is not None else "no-dex-session"
    ledger = Path(os.environ.get(LEDGER_ENV, "order-desk-ledger.jsonl"))
    with ledger.open("a", encoding="utf-8") as file:
        file.write(
            json.dumps({"order_id": order_id, "amount_eur": amount_eur, "idempotency_key": key}) + "\n"
        )
    return f"Refunded {amount_eur} EUR for order {order_id}."


def resolve_model(name: str) -> Model | str:
    """Return the model for ``--model``: the built-in scripted model, or an OpenAI model name.

    Args:
        name: ``scripted``, or a model name the SDK's default provider knows, such as ``gpt-4.1``
            (``OPENAI_API_KEY`` must be in the environment of the Worker).
    """
    return scripted_model() if name == "scripted" else name


def build_agent(model_name: str = "scripted") -> Agent[None]:
    """The agent, exactly as it would run without Dex."""
    return Agent(
        name="order desk",
        instructions=(
            "You are the order desk of a small shop. Look orders up before you act. "
            "Refund what the customer paid when an item arrived broken."
        ),
        model=resolve_model(model_name),
        tools=[lookup_order, refund_order],
    )


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the agent wrapped in `OpenAIAgentsRunner`, with a policy for each tool."""
    return AgentSessionFlow(
        # A model name is resolved when the Worker first calls the model, so the process that only starts
        # and reads sessions needs no key.
        OpenAIAgentsRunner(build_agent(model_name)),
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
