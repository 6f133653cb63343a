"""The Worker process: serves the LangGraphOrderDesk Flow's Steps until it is stopped (or killed).

Run it next to any Dex server: `DEX_SERVER_ADDRESS=host:port python -m examples.order_desk.worker`.
`ORDER_DESK_MODEL` picks the model (`scripted` by default, or a LangChain model string such as
`openai:gpt-4.1`).

`run_agent_worker` is the test kit's Worker main (`dex_agents.testing`): `dex_agents.serve_agent_worker`
with the demo's task slots, plus a ready file that tells the demo when the Worker takes tasks. An
application's own main is `serve_agent_worker` itself, which sizes the Worker, registers the Flow with
`agent_codec_registry()`, serves until SIGTERM or SIGINT and then drains::

    serve_agent_worker([build_flow()], server_address=address, max_parallel_tool_calls=4)
"""

import os

from dex_agents.testing import run_agent_worker

from examples.order_desk.agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow(os.environ.get("ORDER_DESK_MODEL", "scripted"))])
