"""Demo drivers for the examples: one session whose write waits for approval across a Worker kill.

Every example in this repository shows the same sequence on a private development server: the agent asks
for a write that needs approval, the Worker is SIGKILLed while the approval waits, a replacement Worker
takes over, and the approved write runs exactly once. ``run_approval_demo`` runs that sequence around an
``ApprovalDemo`` (the Flow and its Worker module) with ``DemoHooks`` that decide what is printed and how
the approval is answered; ``RefundExampleHooks`` are the plain console hooks of the refund examples.
``order_desk_main`` is the command-line driver of every adapter's ``examples/order_desk`` (live text, the
refund across the kill, and its ledger), configured with an ``OrderDeskDemo``. The shop those examples
offer is here once: the tools ``lookup_order`` and ``refund_order`` as plain functions, which each example
hands to its framework's tool wrapper, with ``ORDER_DESK_INSTRUCTIONS`` and ``ORDER_DESK_TOOL_POLICIES``.

The drivers run the development server through ``dex_agents.testing``'s stack, so they need the
``testing`` extra (``pip install "dex-agents[testing]"``). An application points its Client and Workers
at its Dex Server instead.
"""

from dex_agents_examples._approval import ApprovalDecision, ApprovalDemo, DemoHooks, run_approval_demo
from dex_agents_examples._order_desk import OrderDeskDemo, order_desk_main
from dex_agents_examples._refund_example import RefundExampleHooks
from dex_agents_examples._shop import (
    ORDER_DESK_INSTRUCTIONS,
    ORDER_DESK_LEDGER_ENV,
    ORDER_DESK_REQUEST,
    ORDER_DESK_TOOL_POLICIES,
    lookup_order,
    refund_order,
)

__all__ = [
    "ORDER_DESK_INSTRUCTIONS",
    "ORDER_DESK_LEDGER_ENV",
    "ORDER_DESK_REQUEST",
    "ORDER_DESK_TOOL_POLICIES",
    "ApprovalDecision",
    "ApprovalDemo",
    "DemoHooks",
    "OrderDeskDemo",
    "RefundExampleHooks",
    "lookup_order",
    "order_desk_main",
    "refund_order",
    "run_approval_demo",
]
