"""The long-session benchmark's Worker child, which logs the bytes each Step and RPC loads from the server.

For every ``execute`` and RPC request it appends one JSON line to ``DEX_AGENTS_BENCH_LOAD_LOG``: the Step
type or RPC name, the request's size as the server sent it (blob references included, not their
content), and the bytes of the blobs the SDK had to fetch with ``LoadBlobs`` because its blob cache lacked
them. Together that is what the server sent the Worker for the call. It wraps two methods of the SDK's
value hydrator; measurement only, never in the library.
"""

from __future__ import annotations

import contextvars
import json
import os
from typing import Any

from dex._async_value_hydrator import AsyncValueHydrator, _PendingBlob  # pyright: ignore[reportPrivateUsage]
from dex.dexpb import dex_pb2 as pb

from bench.long_agent import build_flows, build_large_flows
from dex_agents.testing import run_agent_worker

LOAD_LOG_ENV = "DEX_AGENTS_BENCH_LOAD_LOG"
CHUNK_SIZE_ENV = "DEX_AGENTS_BENCH_CHUNK_SIZE"
MESSAGE_BYTES_ENV = "DEX_AGENTS_BENCH_MESSAGE_BYTES"

_fetched: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("fetched", default=None)


def _log(kind: str, request_bytes: int, fetched: list[int]) -> None:
    with open(os.environ[LOAD_LOG_ENV], "a", encoding="utf-8") as log:
        log.write(json.dumps({"kind": kind, "request": request_bytes, "blobs": sum(fetched)}) + "\n")


def _instrument() -> None:
    execute_request = AsyncValueHydrator.execute_request
    rpc_request = AsyncValueHydrator.rpc_request
    load_misses = AsyncValueHydrator._load_misses  # pyright: ignore[reportPrivateUsage]

    async def logged_execute(self: AsyncValueHydrator, request: pb.InvokeExecuteMethodRequest) -> Any:
        fetched: list[int] = []
        token = _fetched.set(fetched)
        try:
            return await execute_request(self, request)
        finally:
            _fetched.reset(token)
            _log(request.step_type, request.ByteSize(), fetched)

    async def logged_rpc(self: AsyncValueHydrator, request: pb.InvokeWorkerRPCRequest) -> Any:
        fetched: list[int] = []
        token = _fetched.set(fetched)
        try:
            return await rpc_request(self, request)
        finally:
            _fetched.reset(token)
            _log(f"rpc:{request.rpc_name}", request.ByteSize(), fetched)

    async def logged_misses(self: AsyncValueHydrator, misses: list[_PendingBlob]) -> None:
        await load_misses(self, misses)
        fetched = _fetched.get()
        if fetched is not None:
            fetched.extend(miss.hydrated.ByteSize() for miss in misses if miss.hydrated is not None)

    AsyncValueHydrator.execute_request = logged_execute  # type: ignore[method-assign]
    AsyncValueHydrator.rpc_request = logged_rpc  # type: ignore[method-assign]
    AsyncValueHydrator._load_misses = logged_misses  # type: ignore[method-assign]  # pyright: ignore[reportPrivateUsage]


if __name__ == "__main__":
    _instrument()
    large = os.environ.get(MESSAGE_BYTES_ENV)
    if large:
        run_agent_worker(build_large_flows(int(large)))
    else:
        run_agent_worker(build_flows(int(os.environ.get(CHUNK_SIZE_ENV, "32"))))
