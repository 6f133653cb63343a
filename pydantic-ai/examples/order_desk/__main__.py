"""The order-desk demo: one durable Pydantic AI session on a private development server.

    python -m examples.order_desk [--model scripted|<provider:model>] [--yes]

The demo around the agent is the one every adapter runs: ``dex_agents_examples.order_desk_main``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dex_agents_examples import OrderDeskDemo, order_desk_main

from examples.order_desk.agent import build_flow

DEMO = OrderDeskDemo(
    build_flow,
    "examples.order_desk.worker",
    Path(__file__).resolve().parents[2],
    model_help="'scripted' (default, no keys needed) or a Pydantic AI model name such as openai:gpt-4.1",
)

if __name__ == "__main__":
    sys.exit(order_desk_main(DEMO))
