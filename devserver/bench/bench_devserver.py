"""Benchmark: Step cost through the devserver with a pull Worker in another process.

Prints the median dispatch-to-commit cost per Step of a sequential chain of no-op Steps (the gap between
consecutive StepExecuteCompleted history events, each written when its result is committed) and the Steps
per second across 50 concurrent Flows, with the mode, Worker placement, SQLite settings and core count.

    python bench/bench_devserver.py [--smoke] [--chain N] [--flows N] [--flow-steps N] [--memory]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex
import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg


class Noop(dex.Step[int]):
    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        if input <= 1:
            return dex.graceful_complete(input)
        return dex.go_to(Noop, input - 1)


class Chain(dex.Flow[int]):
    noop = Noop()

    def get_flow_type(self) -> str:
        return "BenchChain"

    def get_steps(self) -> dex.StepList[int]:
        return dex.StepList[int].start_step(self.noop)


chain = Chain()


def registry() -> dex.Registry:
    return dex.Registry((chain,), allow_async_handlers=True)


def _cache(directory: str) -> dex.BlobCache:
    return dex.open_blob_cache(dex.BlobCacheConfig(directory=directory, max_bytes=16 * 1024 * 1024))


async def run_worker(address: str) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = _cache(cache_dir)
        worker = dex.AsyncWorker(
            registry(),
            cache,
            dex.WorkerOptions(
                server_address=address,
                pull=dex.PullWorkerOptions(
                    max_concurrent_tasks=64, idle_streams_per_queue=8, reserved_rpc_tasks=0
                ),
            ),
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        running = asyncio.create_task(worker.start())
        await worker.wait_pull_registered(timeout=30)
        print("worker ready", flush=True)
        await stop.wait()
        await worker.stop()
        await running
        cache.close()


def _start(command: list[str], ready: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith(ready):
        process.kill()
        raise RuntimeError(f"{command} did not start: {line!r}")
    return process, line


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def _step_gaps(address: str, flow_id: str) -> list[float]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub: Any = pbg.FlowServiceStub(channel)
        summary: pb.GetFlowSummaryResponse = await stub.GetFlowSummary(
            pb.GetFlowSummaryRequest(flow_id=flow_id)
        )
        times: list[float] = []
        token = b""
        while True:
            page: pb.GetHistoryEventsResponse = await stub.GetHistoryEvents(
                pb.GetHistoryEventsRequest(
                    flow_id=flow_id,
                    run_id=summary.flow_execution_id.run_id,
                    next_page_token=token,
                    estimate_page_size=1000,
                )
            )
            times.extend(
                event.event_time.ToNanoseconds() / 1e9
                for event in page.events
                if event.WhichOneof("payload") == "step_execute_completed"
            )
            token = page.next_page_token
            if not token:
                break
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def _cpu_seconds(pid: int | None) -> float:
    """User plus system CPU time of a process (Linux), 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(
    address: str, chain_steps: int, flows: int, flow_steps: int, pids: tuple[int | None, int | None]
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = _cache(cache_dir)
        client = dex.AsyncClient(
            registry(),
            cache,
            dex.ClientOptions(server_address=address, worker_target=dex.WorkerTarget(pull=True)),
        )
        # Warm up connections and code paths.
        await client.start_flow(chain, "warmup", 5)
        await client.wait_for_flow("warmup", timeout=timedelta(seconds=60))

        started = time.perf_counter()
        await client.start_flow(chain, "sequential", chain_steps)
        await client.wait_for_flow("sequential", timeout=timedelta(seconds=600))
        sequential_seconds = time.perf_counter() - started
        gaps = await _step_gaps(address, "sequential")

        cpu_before = [_cpu_seconds(pid) for pid in pids]
        started = time.perf_counter()
        ids = [f"concurrent-{index}" for index in range(flows)]
        await asyncio.gather(*(client.start_flow(chain, flow_id, flow_steps) for flow_id in ids))
        await asyncio.gather(
            *(client.wait_for_flow(flow_id, timeout=timedelta(seconds=600)) for flow_id in ids)
        )
        concurrent_seconds = time.perf_counter() - started
        cpu_used = [_cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
        await client.close()
        cache.close()
    return {
        "median_ms": statistics.median(gaps) * 1000,
        "p90_ms": statistics.quantiles(gaps, n=10)[-1] * 1000 if len(gaps) >= 10 else max(gaps) * 1000,
        "sequential_ms_per_step": sequential_seconds / chain_steps * 1000,
        "steps_per_second": flows * flow_steps / concurrent_seconds,
        "server_cpu_ms": cpu_used[0] / (flows * flow_steps) * 1000,
        "worker_cpu_ms": cpu_used[1] / (flows * flow_steps) * 1000,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="a run of a few seconds")
    parser.add_argument("--chain", type=int, default=500, help="Steps in the sequential chain")
    parser.add_argument("--flows", type=int, default=50, help="concurrent Flows")
    parser.add_argument("--flow-steps", type=int, default=100, help="Steps per concurrent Flow")
    parser.add_argument("--memory", action="store_true", help="no persistence (for comparison)")
    parser.add_argument("--server", metavar="ADDRESS", help="use a running devserver (for profiling it)")
    parser.add_argument("--worker", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(run_worker(args.worker))
        return 0
    if args.smoke:
        args.chain, args.flows, args.flow_steps = 50, 50, 10
    with tempfile.TemporaryDirectory() as data:
        storage = ["--memory"] if args.memory else ["--db", str(Path(data) / "bench.sqlite3")]
        server: subprocess.Popen[str] | None = None
        if args.server:
            address = args.server
        else:
            server, line = _start(
                [sys.executable, "-m", "dex_devserver", "serve", "--port", "0", *storage], "listening"
            )
            address = line.removeprefix("listening on ")
        worker: subprocess.Popen[str] | None = None
        try:
            worker, _ = _start([sys.executable, __file__, "--worker", address], "worker ready")
            pids = (None if server is None else server.pid, worker.pid)
            result = asyncio.run(measure(address, args.chain, args.flows, args.flow_steps, pids))
        finally:
            if worker is not None:
                _stop(worker)
            if server is not None:
                _stop(server)
    sqlite_settings = (
        "memory (no persistence)"
        if args.memory
        else f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=NORMAL,"
        " SYNC durability (commit per transition)"
    )
    print("dex-devserver benchmark" + (" (smoke)" if args.smoke else ""))
    print("  mode:             pull (AsyncWorker, async no-op Steps)")
    print("  Worker placement: separate process on the same machine; Client in a third process")
    print(f"  storage:          {sqlite_settings}")
    print(f"  cores:            {os.cpu_count()}")
    print(
        f"  sequential chain: {args.chain} Steps, median dispatch-to-commit {result['median_ms']:.2f} ms/Step"
        f" (p90 {result['p90_ms']:.2f} ms, mean {result['sequential_ms_per_step']:.2f} ms)"
    )
    print(
        f"  concurrent:       {args.flows} Flows x {args.flow_steps} Steps,"
        f" {result['steps_per_second']:.0f} Steps/s"
    )
    if result["server_cpu_ms"] or result["worker_cpu_ms"]:
        print(
            f"  CPU per Step:     devserver {result['server_cpu_ms']:.2f} ms,"
            f" Worker {result['worker_cpu_ms']:.2f} ms (concurrent phase; independent of machine load)"
        )
    print(f"  load average:     {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
