"""The order-desk demo: one durable Claude Agent SDK session on a private development server.

    python -m examples.order_desk [--model scripted|<claude model>] [--yes]

The demo around the agent is the one every adapter runs: ``dex_agents_examples.order_desk_main``. The Claude
Code CLI runs the turn: it looks the order up inline (a read) and stops at the refund, which becomes its
own Step.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dex_agents import AgentSnapshot
from dex_agents_examples import OrderDeskDemo, order_desk_main

from examples.order_desk.agent import build_flow


def print_stored_size(snapshot: AgentSnapshot) -> None:
    # Claude's stored framework items include the CLI's session transcript, so their size is worth showing.
    stored_bytes = sum(len(message.framework_item.encode()) for message in snapshot.messages)
    print(f"  stored framework items (the CLI transcript included): {stored_bytes / 1024:.1f} KiB")


DEMO = OrderDeskDemo(
    build_flow,
    "examples.order_desk.worker",
    Path(__file__).resolve().parents[2],
    model_help="'scripted' (default, no key needed) or a Claude model name (with ANTHROPIC_API_KEY set)",
    transcript_footer=print_stored_size,
)

if __name__ == "__main__":
    sys.exit(order_desk_main(DEMO))
