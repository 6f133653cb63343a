"""The application: the order desk as a Stepwise agent, the core's own agent loop on LiteLLM.

Everything an application writes is in this file. `build_flow` is called twice with the same arguments:
by the Worker process that runs the session's Steps, and by the process whose Client starts and drives
sessions, so both register the same Flow type. The tools carry their own effects, so the Flow needs no
tool policies. The session has plan mode: a message sent with ``plan_mode=True`` starts a turn in which the
agent may only draft a plan with the ``write_todos`` built-in, and ``execute_plan`` approves it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dex_agents import WRITE_TODOS, AgentSessionFlow, AgentSessionOptions, current_tool_execution
from dex_agents.stepwise import AgentDefinition, ModelClient, StepwiseRunner, function_tool
from examples.order_desk_stepwise.scripted import scripted_model

FLOW_TYPE = "StepwiseOrderDesk"
LEDGER_ENV = "ORDER_DESK_LEDGER"
"""The file the refund tool appends to, so the demo can show that a refund ran exactly once."""

ORDERS = {"A-17": {"item": "espresso machine", "status": "delivered broken", "paid_eur": 40}}


@function_tool(effect="read")  # runs in its own Step, retried freely
async def lookup_order(order_id: str) -> str:
    """Look up an order: what was bought, its status and what the customer paid.

    Args:
        order_id: The order's ID, such as A-17.
    """
    order = ORDERS.get(order_id)
    if order is None:
        return f"There is no order {order_id}."
    return json.dumps({"order_id": order_id, **order})


@function_tool(effect="non_idempotent_write", requires_approval=True)  # at most once, after a person approved
def refund_order(order_id: str, amount_eur: int) -> str:
    """Refund an order to the customer's card.

    Args:
        order_id: The order to refund.
        amount_eur: The amount in euros.
    """
    # Stepwise runs a plain function in a worker thread; the accessor still sees the tool call.
    execution = current_tool_execution()
    # A payment provider would take this key and refuse a second refund with it.
    key = execution.idempotency_key if execution is not None else "no-dex-session"
    ledger = Path(os.environ.get(LEDGER_ENV, "order-desk-ledger.jsonl"))
    with ledger.open("a", encoding="utf-8") as file:
        file.write(
            json.dumps({"order_id": order_id, "amount_eur": amount_eur, "idempotency_key": key}) + "\n"
        )
    return f"Refunded {amount_eur} EUR for order {order_id}."


def resolve_model(name: str) -> ModelClient | str:
    """Return the model for ``--model``: the scripted LiteLLM provider, or a LiteLLM model string.

    Args:
        name: ``scripted``, or any model LiteLLM knows, such as ``openai/gpt-4.1-mini`` (the provider's API
            key must be in the environment of the Worker).
    """
    return scripted_model() if name == "scripted" else name


def build_agent(model_name: str = "scripted") -> AgentDefinition:
    """The agent: model, instructions and tools."""
    return AgentDefinition(
        name="order-desk",
        model=resolve_model(model_name),
        instructions=(
            "You are the order desk of a small shop. Look orders up before you act. "
            "Refund what the customer paid when an item arrived broken. "
            "When there is a plan, keep its tasks' statuses current with write_todos as you work."
        ),
        tools=[lookup_order, refund_order],
    )


def build_flow(model_name: str = "scripted") -> AgentSessionFlow:
    """The session Flow: the agent run by `StepwiseRunner`, with plan mode on."""
    options = AgentSessionOptions(built_in_tools=(WRITE_TODOS,), plan_mode_enabled=True)
    return AgentSessionFlow(StepwiseRunner(build_agent(model_name)), flow_type=FLOW_TYPE, options=options)
