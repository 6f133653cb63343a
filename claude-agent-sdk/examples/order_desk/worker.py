"""The Worker process: serves the ClaudeOrderDesk Flow's Steps until it is stopped (or killed).

Run it next to any Dex server: `DEX_SERVER_ADDRESS=host:port python -m examples.order_desk.worker`.
`ORDER_DESK_MODEL` picks the model (`scripted` by default, or a Claude model name with
`ANTHROPIC_API_KEY` set).
"""

import os

from dex_agents.testing import run_agent_worker

from examples.order_desk.agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow(os.environ.get("ORDER_DESK_MODEL", "scripted"))])
