"""The Worker process: serves the OrderDesk Flow's Steps until it is stopped (or killed).

Run it next to any Dex server: `DEX_SERVER_ADDRESS=host:port python -m examples.order_desk.worker`.
`ORDER_DESK_MODEL` picks the model (`scripted` by default, or a Pydantic AI model name).

`run_agent_worker` is the pull-mode `AsyncWorker` main of `dex_agents.testing`, which also tells the demo
when the Worker is ready; it builds its `Registry` with `dex_agents.agent_codec_registry()`, which decodes
session values whose JSON leaves out fields that have defaults. An application's own main does the same
with the SDK directly::

    registry = Registry([build_flow()], codec_registry=agent_codec_registry(), allow_async_handlers=True)
    cache = open_blob_cache(BlobCacheConfig(".dex-cache", 64 * 1024 * 1024))
    worker = AsyncWorker(registry, cache, WorkerOptions(server_address=address,
                                                        pull=PullWorkerOptions(max_concurrent_tasks=16)))
    await worker.start()
"""

import os

from dex_agents.testing import run_agent_worker

from examples.order_desk.agent import build_flow

if __name__ == "__main__":
    run_agent_worker([build_flow(os.environ.get("ORDER_DESK_MODEL", "scripted"))])
