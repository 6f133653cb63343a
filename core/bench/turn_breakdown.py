"""Where one durable turn's time goes, Step by Step, and how much CPU each process spends on it.

    uv run python -m bench.turn_breakdown [--turns 20] [--one-session] [--flow bench.agent:build_flow]
        [--worker-module bench.worker] [--worker-cwd .]

Each turn is a new session started with one user message; the turn is timed from ``start_session`` to the
``turn_completed`` event, as the adapters' ``bench/turn_overhead.py`` does. The default Flow is the
framework-free ``bench.agent`` (model call, read tool, model call; no framework work), so the figures are
the session Flow's, the SDK's and the devserver's. To include a framework, run the script by path from the
adapter's environment with the adapter's Flow factory and Worker module (one command line):

    cd ../pydantic-ai
    uv run python ../core/bench/turn_breakdown.py --worker-cwd .
        --flow bench.agent:build_flow --worker-module bench.worker

It prints, per Step method, the median gap between consecutive history events (the time from the previous
event's commit to this method's commit: dispatch, the Worker's handler, its result, the commit), and the
CPU time per turn of the devserver, the Worker and this process (the client), which does not depend on
how busy the machine is. Print the load average with every figure: the machine's other users inflate the
wall-clock gaps, not the CPU times.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import grpc  # pyright: ignore[reportMissingTypeStubs]
from dex import LongPollTimeoutError
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from bench.processes import child_processes as _children
from bench.processes import cpu_seconds as _cpu_seconds
from dex_agents import AgentEventType, AgentSessionClient, AgentSessionFlow
from dex_agents.testing import AgentTestStack

CORE_DIR = Path(__file__).resolve().parents[1]


async def _history(address: str, flow_id: str) -> list[Any]:
    async with grpc.aio.insecure_channel(address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)
        summary = await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id=flow_id))
        response = await stub.GetHistoryEvents(
            pb.GetHistoryEventsRequest(
                flow_id=flow_id, run_id=summary.flow_execution_id.run_id, estimate_page_size=500
            )
        )
        return list(response.events)


async def _wait_for_turn_completed(sessions: AgentSessionClient, session_id: str, token: str = "") -> float:
    return (await _read_to_turn_completed(sessions, session_id, token))[0]


async def _read_to_turn_completed(
    sessions: AgentSessionClient, session_id: str, token: str
) -> tuple[float, str]:
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, timeout=timedelta(seconds=10))
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        if message.value.type == AgentEventType.TURN_COMPLETED:
            return time.time(), token
        if message.value.type == AgentEventType.TURN_FAILED:
            raise RuntimeError(f"turn failed: {message.value.payload}")


def _gaps(events: list[Any], started: float, completed: float) -> list[tuple[str, float]]:
    gaps: list[tuple[str, float]] = []
    previous = started
    seen: dict[str, int] = {}
    for event in events:
        kind = cast(str, event.WhichOneof("payload"))
        payload = getattr(event, kind)
        name = kind
        if hasattr(payload, "context"):
            name = f"{payload.context.step_type}.{kind.removeprefix('step_').removesuffix('_completed')}"
        seen[name] = seen.get(name, 0) + 1
        label = f"{name}#{seen[name]}"
        moment = event.event_time.ToDatetime().timestamp()
        gaps.append((label, moment - previous))
        previous = moment
        if name == "RunModel.execute" and seen[name] == 2:
            gaps.append(("client sees turn_completed", completed - moment))
            break
    return gaps


async def run(flow: AgentSessionFlow, worker_module: str, worker_cwd: Path, turns: int) -> None:
    """Run ``turns`` timed turns (after one warm-up turn) and print the breakdown."""
    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as directory:
        async with AgentTestStack(Path(directory), [flow], worker_module, worker_cwd=worker_cwd) as stack:
            sessions = stack.sessions(flow)
            await stack.start_worker()
            timings: list[tuple[str, float, float]] = []
            cpu_before: dict[int, float] = {}
            client_before = 0.0
            for number in range(turns + 1):
                if number == 1:
                    cpu_before = {pid: _cpu_seconds(pid) for pid in _children()}
                    client_before = time.process_time()
                session_id = f"bench-{number}"
                started = time.time()
                await sessions.start_session(session_id, "Where is order A-1?")
                completed = await _wait_for_turn_completed(sessions, session_id)
                if number:
                    timings.append((session_id, started, completed))
            names = _children()
            cpu = {names.get(pid, str(pid)): _cpu_seconds(pid) - before for pid, before in cpu_before.items()}
            cpu["client (this process)"] = time.process_time() - client_before
            gaps: dict[str, list[float]] = {}
            totals: list[float] = []
            for session_id, started, completed in timings:
                for label, gap in _gaps(await _history(stack.server_address, session_id), started, completed):
                    gaps.setdefault(label, []).append(gap * 1000)
                totals.append((completed - started) * 1000)
    print(f"load average {os.getloadavg()[0]:.2f}, {turns} turns")
    print("median gap before each history event (ms):")
    for label, values in gaps.items():
        print(f"  {label:42s} {statistics.median(values):6.1f}  (min {min(values):5.1f})")
    print(f"turn, start_session to turn_completed: median {statistics.median(totals):.1f} ms")
    for name, seconds in cpu.items():
        print(f"CPU per turn, {name}: {seconds / turns * 1000:.1f} ms")


async def run_long_session(flow: AgentSessionFlow, worker_module: str, worker_cwd: Path, turns: int) -> None:
    """Run ``turns`` turns in one session and print how a turn's time and CPU grow with its history."""
    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as directory:
        async with AgentTestStack(Path(directory), [flow], worker_module, worker_cwd=worker_cwd) as stack:
            sessions = stack.sessions(flow)
            await stack.start_worker()
            token = ""
            window: list[float] = []
            cpu_before = {pid: _cpu_seconds(pid) for pid in _children()}
            report_every = max(1, turns // 5)
            print(f"load average {os.getloadavg()[0]:.2f}, one session, {turns} turns (4 messages each)")
            for number in range(1, turns + 1):
                started = time.time()
                if number == 1:
                    await sessions.start_session("long", "Where is order A-1?")
                else:
                    await sessions.send_user_message("long", "Where is order A-1?")
                completed, token = await _read_to_turn_completed(sessions, "long", token)
                window.append((completed - started) * 1000)
                if number % report_every == 0:
                    names = _children()
                    cpu = {
                        names.get(pid, str(pid)): _cpu_seconds(pid) - before
                        for pid, before in cpu_before.items()
                    }
                    cpu_text = ", ".join(
                        f"{name} {seconds / len(window) * 1000:.1f}" for name, seconds in cpu.items()
                    )
                    print(
                        f"  turns {number - len(window) + 1}-{number} (history up to {4 * number} messages): "
                        f"median {statistics.median(window):.1f} ms; CPU per turn (ms): {cpu_text}"
                    )
                    window = []
                    cpu_before = {pid: _cpu_seconds(pid) for pid in _children()}


def _load_flow(reference: str) -> AgentSessionFlow:
    module_name, _, function_name = reference.partition(":")
    factory = cast(
        Callable[[], AgentSessionFlow], getattr(importlib.import_module(module_name), function_name)
    )
    return factory()


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description="Per-Step breakdown of one durable turn")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--flow", default="bench.agent:build_flow", help="module:function returning the Flow")
    parser.add_argument("--worker-module", default="bench.worker")
    parser.add_argument("--worker-cwd", type=Path, default=CORE_DIR)
    parser.add_argument(
        "--one-session", action="store_true", help="run every turn in one session, to see history growth"
    )
    arguments = parser.parse_args()
    sys.path.insert(0, str(arguments.worker_cwd.resolve()))
    flow = _load_flow(arguments.flow)
    runner = run_long_session if arguments.one_session else run
    asyncio.run(runner(flow, arguments.worker_module, arguments.worker_cwd.resolve(), arguments.turns))


if __name__ == "__main__":
    main()
