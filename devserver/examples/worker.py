"""Runs a pull-mode AsyncWorker for the session Flow until SIGTERM: ``python worker.py SERVER_ADDRESS``."""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile

import dex
from session_flow import registry


async def main(server_address: str) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = dex.open_blob_cache(dex.BlobCacheConfig(directory=cache_dir, max_bytes=64 * 1024 * 1024))
        worker = dex.AsyncWorker(
            registry(),
            cache,
            dex.WorkerOptions(
                server_address=server_address, pull=dex.PullWorkerOptions(max_concurrent_tasks=8)
            ),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        running = asyncio.create_task(worker.start())
        await worker.wait_pull_registered(timeout=30)
        print("worker ready", flush=True)
        await stop.wait()
        await worker.stop()
        await running
        cache.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
