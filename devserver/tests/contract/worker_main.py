"""Entry point of the Worker child: ``python -m contract.worker_main --mode push|pull --server ADDR``.

It runs the real SDK ``AsyncWorker`` (or, for the ``sync`` role, the sync ``Worker``) over the same
Flow definitions the test process uses, prints one ready line with the port it listens on (0 in pull
mode; ``--port 0`` binds a free one), and then serves until it is killed (the tests SIGKILL its whole
process group).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import threading
import time
from datetime import timedelta

from dex import AsyncWorker, PullWorkerOptions, Worker, WorkerOptions

from .blobs import RecordingBlobCache
from .processes import ready_line
from .registry import build_registry
from .sandbox import Sandbox


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _listening_port(worker: AsyncWorker | Worker) -> int:
    """The port the push Worker bound, or 0 before it has bound one (the SDK then advertises port 0)."""
    return int(worker.worker_target.address.rpartition(":")[2] or 0)


SLOTS_ENV = "DEX_CONTRACT_PULL_SLOTS"


def _options(mode: str, server: str, port: int) -> WorkerOptions:
    if mode == "push":
        return WorkerOptions(bind_address=f"127.0.0.1:{port}", server_address=server)
    # By default, enough slots that a Step parked on a gate never starves the next task of the same
    # test; the capacity test asks for two slots, one reserved for RPCs, so a second Step is declined.
    # A short drain because the tests kill the Worker rather than stop it.
    slots = int(os.environ.get(SLOTS_ENV, "32"))
    pull = PullWorkerOptions(
        max_concurrent_tasks=slots,
        reserved_rpc_tasks=1 if slots == 2 else 2,
        stop_drain_timeout=timedelta(seconds=1),
    )
    if slots == 2:
        # The SDK logs each reserve decline at DEBUG; the capacity test waits for that line.
        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("dex._pull_worker").setLevel(logging.DEBUG)
    return WorkerOptions(server_address=server, pull=pull)


def _serve_sync(mode: str, server: str, port: int) -> None:
    """The sync ``Worker``: ``start`` blocks, so it runs on a thread while this one reports readiness."""
    worker = Worker(
        build_registry("sync"), RecordingBlobCache(Sandbox.from_env(), "worker"), _options(mode, server, port)
    )
    serving = threading.Thread(target=worker.start, daemon=True)
    serving.start()
    if mode == "pull":
        worker.wait_pull_registered(timeout=30)
    else:
        while not (port := _listening_port(worker)) or not _port_open(port):
            if not serving.is_alive():
                raise RuntimeError("push Worker stopped before it listened")
            time.sleep(0.02)
    print(ready_line(port), flush=True)
    serving.join()


async def _serve(mode: str, server: str, port: int) -> None:
    registry = build_registry(os.environ.get("DEX_CONTRACT_ROLE", "worker"))
    worker = AsyncWorker(
        registry, RecordingBlobCache(Sandbox.from_env(), "worker"), _options(mode, server, port)
    )
    serving = asyncio.create_task(worker.start())
    if mode == "pull":
        await worker.wait_pull_registered(timeout=30)
    else:
        while not (port := _listening_port(worker)) or not _port_open(port):
            if serving.done():
                await serving
                raise RuntimeError("push Worker stopped before it listened")
            await asyncio.sleep(0.02)
    print(ready_line(port), flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("push", "pull"), required=True)
    parser.add_argument("--server", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if os.environ.get("DEX_CONTRACT_ROLE") == "sync":
        _serve_sync(args.mode, args.server, args.port)
    else:
        asyncio.run(_serve(args.mode, args.server, args.port))


if __name__ == "__main__":
    main()
