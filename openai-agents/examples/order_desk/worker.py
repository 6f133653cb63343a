"""The Worker process: serves the OrderDesk Flow's Steps until it is stopped (or killed).

Run it next to any Dex server: `DEX_SERVER_ADDRESS=host:port python -m examples.order_desk.worker`.
`ORDER_DESK_MODEL` picks the model (`scripted` by default, or an OpenAI model name).

The demo starts it with the test kit's `run_agent_worker`, which is `dex_agents.serve_agent_worker` plus
what a demo needs: the address from the environment and a ready file the demo waits for. Your own Worker's
main is one call (see the README's "Run it yourself"):

    serve_agent_worker([build_flow()], server_address="localhost:8801")
"""

import os

from dex_agents.testing import run_agent_worker

from examples.order_desk.agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow(os.environ.get("ORDER_DESK_MODEL", "scripted"))])
