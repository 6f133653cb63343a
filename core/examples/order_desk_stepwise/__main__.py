"""The order-desk demo on Stepwise: one durable session of the core's own agent loop on LiteLLM.

    python -m examples.order_desk_stepwise [--model scripted|<LiteLLM model>] [--yes]

Run it from ``core/`` (or with ``scripts/demo --runner stepwise``). It starts a devserver and a Worker
process, asks the agent to refund a broken order, and shows the session's live text as it streams. The
refund needs approval: while it waits, the demo SIGKILLs the Worker and starts a replacement, then asks you
at the terminal (or approves by itself with ``--yes`` or without a terminal). At the end it prints the
stored transcript, the Step history, and the refund ledger, which shows the refund ran exactly once. The
demo around the agent is the adapters' own: ``dex_agents.demos.order_desk_main``.

Stepwise has no plan mode yet, so the demo has no plan for the user to approve; the refund's approval is
the one the user gives.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dex_agents.demos import OrderDeskDemo, order_desk_main
from examples.order_desk_stepwise.agent import LEDGER_ENV, build_flow

DEMO = OrderDeskDemo(
    build_flow,
    "examples.order_desk_stepwise.worker",
    Path(__file__).resolve().parents[2],
    session_id="order-desk-1",
    request="Hi, my order A-17 arrived broken. Can I get my money back?",
    ledger_env=LEDGER_ENV,
    model_help="'scripted' (default, no keys needed) or a LiteLLM model string such as openai/gpt-4.1-mini",
    prog="python -m examples.order_desk_stepwise",
)

if __name__ == "__main__":
    sys.exit(order_desk_main(DEMO))
