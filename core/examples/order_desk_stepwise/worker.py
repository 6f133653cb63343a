"""The Worker process: serves the StepwiseOrderDesk Flow's Steps until it is stopped (or killed).

Run it next to any Dex server: ``DEX_SERVER_ADDRESS=host:port python -m examples.order_desk_stepwise.worker``.
``ORDER_DESK_MODEL`` picks the model (``scripted`` by default, or a LiteLLM model string). An application's
own main is ``dex_agents.serve_agent_worker([build_flow(...)], server_address=...)``; ``run_agent_worker``
is that with the test stack's task slots and ready file.
"""

import os

from dex_agents.testing import run_agent_worker
from examples.order_desk_stepwise.agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow(os.environ.get("ORDER_DESK_MODEL", "scripted"))])
