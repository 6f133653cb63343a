"""The order-desk demo: one durable Claude Agent SDK session on a private development server.

    python -m examples.order_desk [--model scripted|<claude model>] [--yes]

It starts a devserver and a Worker process, asks the agent to refund a broken order, and shows the
session's live text as it streams. The Claude Code CLI runs the turn: it looks the order up inline (a
read) and stops at the refund, which becomes its own Step. The refund needs approval: while it waits,
the demo SIGKILLs the Worker and starts a replacement, then asks you at the terminal (or approves by
itself with `--yes` or without a terminal). At the end it prints the stored transcript, the Step
history, and the refund ledger, which shows the refund ran exactly once. The demo around the agent is the
same in every adapter: ``dex_agents.demos.order_desk_main``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dex_agents import AgentSnapshot
from dex_agents.demos import OrderDeskDemo, order_desk_main

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
