"""Benchmark: Step cost through the devserver with a pull Worker in another process.

Phases (all by default; pick with --phases):
- chain: the dispatch-to-commit cost per Step of a sequential chain of no-op Steps (the gap between
  consecutive StepExecuteCompleted events, each written when its result is committed): median, p90, p99, max.
- concurrent: Steps/s across 50 concurrent Flows, and CPU per Step of the devserver and of the Worker.
- fanout: Step cost with 1, 100 and 1,000 parallel Steps in one Flow (each branch a chain, same Step total).
- scale: 100,000 Steps over 10,000 Flows, with the devserver's RSS as the closed Flows pile up, then the
  time a restart takes with those 10,000 closed Flows in the database.

    python bench/bench_devserver.py [--smoke] [--phases chain,concurrent,fanout,scale] [--memory] ...
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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import dex
import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg

PHASES = ("chain", "concurrent", "fanout", "scale")
WAIT = timedelta(seconds=900)


class Noop(dex.Step[int]):
    async def execute(self, context: dex.AsyncContext, input: int) -> dex.StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        if input <= 1:
            return dex.graceful_complete(input)
        return dex.go_to(Noop, input - 1)


class Spread(dex.Step[list[int]]):
    """Starts ``width`` branches, each a chain of ``length`` Noop Steps."""

    async def execute(self, context: dex.AsyncContext, input: list[int]) -> dex.StepDecision:  # pyright: ignore[reportIncompatibleMethodOverride]
        width, length = input
        return dex.go_to_many(*(dex.StepMovement[int].of(Noop, length) for _ in range(width)))


class Chain(dex.Flow[int]):
    def get_flow_type(self) -> str:
        return "BenchChain"

    def get_steps(self) -> dex.StepList[int]:
        return dex.StepList[int].start_step(Noop())


class Fan(dex.Flow[list[int]]):
    def get_flow_type(self) -> str:
        return "BenchFan"

    def get_steps(self) -> dex.StepList[list[int]]:
        return dex.StepList[list[int]].start_step(Spread()).other_steps(Noop())


chain = Chain()
fan = Fan()


def registry() -> dex.Registry:
    return dex.Registry((chain, fan), allow_async_handlers=True)


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


# ----------------------------------------------------------------------------- processes


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
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _cpu_seconds(pid: int | None) -> float:
    """User plus system CPU time of a process (Linux), 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mib(pid: int | None) -> float:
    """Resident set size of a process in MiB (Linux), 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Stack:
    """The processes under test and the Client driving them."""

    address: str
    server_pid: int | None
    worker_pid: int
    client: dex.AsyncClient

    async def cpu_per_step(
        self, steps: int, work: Callable[[], Awaitable[None]]
    ) -> tuple[float, float, float]:
        """Runs `work`; returns its Steps/s and the devserver's and Worker's CPU ms per Step."""
        before = (_cpu_seconds(self.server_pid), _cpu_seconds(self.worker_pid))
        started = time.perf_counter()
        await work()
        seconds = time.perf_counter() - started
        server = (_cpu_seconds(self.server_pid) - before[0]) / steps * 1000
        worker = (_cpu_seconds(self.worker_pid) - before[1]) / steps * 1000
        return steps / seconds, server, worker


# ----------------------------------------------------------------------------- phases


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


async def phase_chain(stack: Stack, steps: int) -> None:
    started = time.perf_counter()
    await stack.client.start_flow(chain, "sequential", steps)
    await stack.client.wait_for_flow("sequential", timeout=WAIT)
    mean = (time.perf_counter() - started) / steps * 1000
    gaps = sorted(gap * 1000 for gap in await _step_gaps(stack.address, "sequential"))
    quantiles = statistics.quantiles(gaps, n=100, method="inclusive")
    print(
        f"  chain:       {steps} Steps, dispatch-to-commit per Step: median {statistics.median(gaps):.2f} ms,"
        f" p90 {quantiles[89]:.2f}, p99 {quantiles[98]:.2f}, max {gaps[-1]:.1f} ms (mean {mean:.2f} ms)"
    )


async def phase_concurrent(stack: Stack, flows: int, flow_steps: int) -> None:
    ids = [f"concurrent-{index}" for index in range(flows)]

    async def work() -> None:
        await asyncio.gather(*(stack.client.start_flow(chain, flow_id, flow_steps) for flow_id in ids))
        await asyncio.gather(*(stack.client.wait_for_flow(flow_id, timeout=WAIT) for flow_id in ids))

    rate, server, worker = await stack.cpu_per_step(flows * flow_steps, work)
    print(
        f"  concurrent:  {flows} Flows x {flow_steps} Steps, {rate:.0f} Steps/s;"
        f" CPU per Step: devserver {server:.2f} ms, Worker {worker:.2f} ms"
    )


async def phase_fanout(stack: Stack, total: int) -> None:
    for width in (1, 100, 1000):
        length = max(1, total // width)
        flow_id = f"fan-{width}"

        async def work(flow_id: str = flow_id, width: int = width, length: int = length) -> None:
            await stack.client.start_flow(fan, flow_id, [width, length])
            await stack.client.wait_for_flow(flow_id, timeout=WAIT)

        rate, server, worker = await stack.cpu_per_step(width * length + 1, work)
        print(
            f"  fan-out:     {width:>4} parallel Steps x {length:>4} in one Flow, {rate:.0f} Steps/s;"
            f" CPU per Step: devserver {server:.2f} ms, Worker {worker:.2f} ms"
        )


async def phase_scale(stack: Stack, flows: int, flow_steps: int, samples: int = 4) -> None:
    """Runs `flows` Flows of `flow_steps` Steps, 200 at a time, sampling the devserver's RSS."""
    gate = asyncio.Semaphore(200)

    async def one(index: int) -> None:
        async with gate:
            await stack.client.start_flow(chain, f"scale-{index}", flow_steps)
            await stack.client.wait_for_flow(f"scale-{index}", timeout=WAIT)

    rss = [f"{_rss_mib(stack.server_pid):.0f}"]
    per_sample = flows // samples
    started = time.perf_counter()
    cpu_before = _cpu_seconds(stack.server_pid)
    for sample in range(samples):
        await asyncio.gather(*(one(index) for index in range(sample * per_sample, (sample + 1) * per_sample)))
        rss.append(f"{_rss_mib(stack.server_pid):.0f}")
    seconds = time.perf_counter() - started
    steps = per_sample * samples * flow_steps
    server = (_cpu_seconds(stack.server_pid) - cpu_before) / steps * 1000
    print(
        f"  scale:       {per_sample * samples} Flows x {flow_steps} Steps = {steps} Steps in {seconds:.0f} s"
        f" ({steps / seconds:.0f} Steps/s, devserver {server:.2f} ms CPU per Step)"
    )
    print(f"               devserver RSS (MiB) at 0, 1/{samples}, ... of the way: {', '.join(rss)}")


def phase_restart(command: list[str], closed: int) -> subprocess.Popen[str]:
    started = time.perf_counter()
    server, _ = _start(command, "listening")
    seconds = time.perf_counter() - started
    print(
        f"  restart:     {seconds * 1000:.0f} ms from process start to 'listening' with {closed} closed Flows"
        f" in the database (RSS {_rss_mib(server.pid):.0f} MiB)"
    )
    return server


# ----------------------------------------------------------------------------- main


async def measure(args: argparse.Namespace, address: str, pids: tuple[int | None, int]) -> None:
    with tempfile.TemporaryDirectory() as cache_dir:
        cache = _cache(cache_dir)
        client = dex.AsyncClient(
            registry(),
            cache,
            dex.ClientOptions(server_address=address, worker_target=dex.WorkerTarget(pull=True)),
        )
        stack = Stack(address, pids[0], pids[1], client)
        # Warm up connections and code paths.
        await client.start_flow(chain, "warmup", 5)
        await client.wait_for_flow("warmup", timeout=WAIT)
        if "chain" in args.phases:
            await phase_chain(stack, args.chain)
        if "concurrent" in args.phases:
            await phase_concurrent(stack, args.flows, args.flow_steps)
        if "fanout" in args.phases:
            await phase_fanout(stack, args.fanout_steps)
        if "scale" in args.phases:
            await phase_scale(stack, args.scale_flows, 10)
        await client.close()
        cache.close()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="a run of a few seconds")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}")
    parser.add_argument("--chain", type=int, default=500, help="Steps in the sequential chain")
    parser.add_argument("--flows", type=int, default=50, help="concurrent Flows")
    parser.add_argument("--flow-steps", type=int, default=100, help="Steps per concurrent Flow")
    parser.add_argument("--fanout-steps", type=int, default=2000, help="Steps per fan-out Flow")
    parser.add_argument(
        "--scale-flows", type=int, default=10_000, help="Flows of 10 Steps in the scale phase"
    )
    parser.add_argument("--memory", action="store_true", help="no persistence (for comparison)")
    parser.add_argument("--server", metavar="ADDRESS", help="use a running devserver (for profiling it)")
    parser.add_argument("--worker", metavar="ADDRESS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        asyncio.run(run_worker(args.worker))
        return 0
    args.phases = {phase.strip() for phase in args.phases.split(",") if phase.strip()}
    if unknown := args.phases - set(PHASES):
        parser.error(f"unknown phases: {', '.join(sorted(unknown))}")
    if args.smoke:
        args.chain, args.flows, args.flow_steps, args.fanout_steps, args.scale_flows = 50, 50, 10, 200, 200
    storage = (
        "memory (no persistence)"
        if args.memory
        else f"SQLite {sqlite3.sqlite_version}, WAL, synchronous=NORMAL, SYNC durability"
        " (commit per transition)"
    )
    print("dex-devserver benchmark" + (" (smoke)" if args.smoke else ""))
    print("  mode:        pull (AsyncWorker, async no-op Steps); Worker and Client in two other processes")
    print(f"  storage:     {storage}")
    print(f"  cores:       {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as data:
        storage_args = ["--memory"] if args.memory else ["--db", str(Path(data) / "bench.sqlite3")]
        command = [sys.executable, "-m", "dex_devserver", "serve", "--port", "0", *storage_args]
        server: subprocess.Popen[str] | None = None
        worker: subprocess.Popen[str] | None = None
        try:
            if args.server:
                address = args.server
            else:
                server, line = _start(command, "listening")
                address = line.removeprefix("listening on ")
            worker, _ = _start([sys.executable, __file__, "--worker", address], "worker ready")
            asyncio.run(measure(args, address, (None if server is None else server.pid, worker.pid)))
            if "scale" in args.phases and server is not None and not args.memory:
                _stop(worker)
                _stop(server)
                server = phase_restart(command, args.scale_flows)
        finally:
            if worker is not None:
                _stop(worker)
            if server is not None:
                _stop(server)
    print(f"  load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
