"""The order desk's shop: its two tools as plain Python functions, its instructions and its tool policies.

Every order-desk example offers the same shop, so the examples differ only in what their framework does:
each hands these functions to its framework's own tool wrapper (a Pydantic AI agent takes them as they
are, the OpenAI Agents SDK through ``function_tool``, LangChain through ``tool``, Stepwise through
``function_tool`` with an effect, the Claude Agent SDK through an ``@tool`` handler), which reads their
names, type hints and docstrings as it would in any application.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from dex_agents.runner import ToolPolicy, current_tool_execution
from dex_agents.values import ToolEffect

__all__ = [
    "ORDER_DESK_INSTRUCTIONS",
    "ORDER_DESK_LEDGER_ENV",
    "ORDER_DESK_REQUEST",
    "ORDER_DESK_TOOL_POLICIES",
    "lookup_order",
    "refund_order",
]

ORDER_DESK_LEDGER_ENV = "ORDER_DESK_LEDGER"
"""The Worker's environment variable naming the file `refund_order` appends to, one line per real refund."""

ORDER_DESK_REQUEST = "Hi, my order A-17 arrived broken. Can I get my money back?"
"""What the customer asks in every order-desk demo."""

ORDER_DESK_INSTRUCTIONS = (
    "You are the order desk of a small shop. Look orders up before you act. "
    "Refund what the customer paid when an item arrived broken."
)
"""The agent's instructions."""

ORDER_DESK_TOOL_POLICIES: Mapping[str, ToolPolicy] = MappingProxyType(
    {
        # A read runs in its own Step and is retried freely.
        "lookup_order": ToolPolicy(ToolEffect.READ),
        # A refund runs at most once, only after a person approved it.
        "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
    }
)
"""How the session runs each tool, for `AgentSessionOptions.tool_policies`."""

_ORDERS: Mapping[str, Mapping[str, object]] = MappingProxyType(
    {"A-17": {"item": "espresso machine", "status": "delivered broken", "paid_eur": 40}}
)


async def lookup_order(order_id: str) -> str:
    """Look up an order: what was bought, its status and what the customer paid.

    Args:
        order_id: The order's ID, such as A-17.
    """
    order = _ORDERS.get(order_id)
    if order is None:
        return f"There is no order {order_id}."
    return json.dumps({"order_id": order_id, **order})


def refund_order(order_id: str, amount_eur: int) -> str:
    """Refund an order to the customer's card.

    Args:
        order_id: The order to refund.
        amount_eur: The amount in euros.
    """
    # Frameworks run a plain function in a worker thread; the accessor still sees the tool call there.
    execution = current_tool_execution()
    # A payment provider would take this key and refuse a second refund with it.
    key = execution.idempotency_key if execution is not None else "no-dex-session"
    ledger = Path(os.environ.get(ORDER_DESK_LEDGER_ENV, "order-desk-ledger.jsonl"))
    with ledger.open("a", encoding="utf-8") as file:
        file.write(
            json.dumps({"order_id": order_id, "amount_eur": amount_eur, "idempotency_key": key}) + "\n"
        )
    return f"Refunded {amount_eur} EUR for order {order_id}."
