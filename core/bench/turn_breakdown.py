"""Where one durable turn's time goes, Step by Step, and how much CPU each process spends on it.

    uv run python -m bench.turn_breakdown [--turns 50] [--concurrency 20] [--one-session]
        [--flow bench.agent:build_flow] [--worker-module bench.worker] [--worker-cwd .]

Each turn is a new session started with one user message; the turn is timed from ``start_session`` to the
``turn_completed`` event, as the adapters' ``bench/turn_overhead.py`` does. The default Flow is the
framework-free ``bench.agent`` (model call, read tool, model call; no framework work), so the figures are
the session Flow's, the SDK's and the devserver's. To include a framework, run the script by path from the
adapter's environment with the adapter's Flow factory and Worker module (one command line):

    cd ../pydantic-ai
    uv run python ../core/bench/turn_breakdown.py --worker-cwd .
        --flow bench.agent:build_flow --worker-module bench.worker

It prints, per Step method, the median gap between consecutive history events (the time from the previous
event's commit to this method's commit: dispatch, the Worker's handler, its result, the commit); the same
turn in process (the runner driven by ``SessionSide``, no session); the durable turn one session at a time
and ``--concurrency`` sessions at once on the one Worker, each with its median, p99, max, turns per second
and the CPU time per turn of the devserver, the Worker and this process (the client), which does not
depend on how busy the machine is; and the overhead (durable median minus in-process median). Print the
load average with every figure: the machine's other users inflate the wall-clock gaps, not the CPU times.
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
from pathlib import Path
from typing import Any, cast

import grpc  # pyright: ignore[reportMissingTypeStubs]
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc
from dex_agents_bench import (
    TurnSeries,
    describe_cpu,
    describe_series,
    process_cpu_seconds,
    run_durable_turns,
    wait_for_turn_completed,
)

from dex_agents import AgentSessionFlow, ToolCallsRequested, ToolCallStatus, TurnCompleted
from dex_agents.testing import AgentTestStack, SessionSide

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


async def in_process_turn_seconds(flow: AgentSessionFlow, question: str, turns: int) -> list[float]:
    """Time the runner's own work for ``turns`` turns in process: the model calls and the tool, no session.

    `SessionSide` plays the session's side (stored messages, records), so this is what the same turn costs
    an application that runs the runner without Dex. A framework runner's turn takes as long as its
    framework's; the framework-free runner's is the floor.
    """
    runner = flow.runner
    durations: list[float] = []
    for _ in range(turns + 1):
        started = time.perf_counter()
        side = SessionSide(tool_policies=flow.options.tool_policies)
        side.start_turn(runner.build_user_message(question))
        while True:
            outcome = await runner.run_model_step(side.context())
            if isinstance(outcome, TurnCompleted):
                side.store(outcome.new_messages)
                break
            if not isinstance(outcome, ToolCallsRequested):
                raise RuntimeError(f"the in-process turn cannot follow {type(outcome).__name__}")
            side.defer(outcome)
            for call in outcome.tool_calls:
                output = await side.execute(runner, call.tool_call_id)
                side.finish(call.tool_call_id, ToolCallStatus.SUCCEEDED, output=output)
        durations.append(time.perf_counter() - started)
    return durations[1:]


async def run(
    flow: AgentSessionFlow,
    worker_module: str,
    worker_cwd: Path,
    turns: int,
    concurrency: int,
    task_slots: int | None = None,
) -> None:
    """Run ``turns`` timed turns one at a time (after one warm-up turn), then many at once; print both.

    The Worker gets ``task_slots``, by default what `agent_worker_task_slots` gives for ``concurrency``
    turns of one tool call each.
    """
    if task_slots is None:
        from dex_agents import agent_worker_task_slots  # noqa: PLC0415 - absent from older releases

        task_slots = agent_worker_task_slots(max_concurrent_turns=concurrency, max_parallel_tool_calls=1)
    question = "Where is order A-1?"
    local = await in_process_turn_seconds(flow, question, turns)
    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as directory:
        async with AgentTestStack(
            Path(directory), [flow], worker_module, worker_cwd=worker_cwd, max_concurrent_tasks=task_slots
        ) as stack:
            sessions = stack.sessions(flow)
            await stack.start_worker()
            timings: list[tuple[str, float, float]] = []
            cpu_before: dict[str, float] = {}
            started_all = 0.0
            for number in range(turns + 1):
                if number == 1:
                    cpu_before = process_cpu_seconds()
                    started_all = time.perf_counter()
                session_id = f"bench-{number}"
                started = time.time()
                await sessions.start_session(session_id, question)
                await wait_for_turn_completed(sessions, session_id)
                completed = time.time()
                if number:
                    timings.append((session_id, started, completed))
            elapsed = time.perf_counter() - started_all
            cpu_after = process_cpu_seconds()
            sequential = TurnSeries(
                1,
                tuple(completed - started for _, started, completed in timings),
                elapsed,
                {name: cpu_after[name] - before for name, before in cpu_before.items() if name in cpu_after},
            )
            concurrent = await run_durable_turns(
                sessions,
                question,
                turns=max(turns, 5 * concurrency),
                concurrency=concurrency,
                session_prefix="many",
            )
            gaps: dict[str, list[float]] = {}
            for session_id, started, completed in timings:
                for label, gap in _gaps(await _history(stack.server_address, session_id), started, completed):
                    gaps.setdefault(label, []).append(gap * 1000)
    print(
        f"load average {os.getloadavg()[0]:.2f}, {turns} turns one at a time, {task_slots} Worker task slots"
    )
    print("median gap before each history event, one session at a time (ms):")
    for label, values in gaps.items():
        print(f"  {label:42s} {statistics.median(values):6.1f}  (min {min(values):5.1f})")
    print(describe_series("in process (the runner alone)", local))
    for label, series in (
        ("durable, 1 session at a time", sequential),
        (f"durable, {concurrency} sessions at once", concurrent),
    ):
        print(describe_series(label, series.durations) + f", {series.turns_per_second:.1f} turns/s")
        print("  " + describe_cpu(series))
    overhead = sequential.median - statistics.median(local)
    print(f"durable overhead per turn (median, 1 at a time, minus in process): {overhead * 1000:.1f} ms")


async def run_long_session(flow: AgentSessionFlow, worker_module: str, worker_cwd: Path, turns: int) -> None:
    """Run ``turns`` turns in one session and print how a turn's time and CPU grow with its history."""
    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as directory:
        async with AgentTestStack(Path(directory), [flow], worker_module, worker_cwd=worker_cwd) as stack:
            sessions = stack.sessions(flow)
            await stack.start_worker()
            token = ""
            window: list[float] = []
            cpu_before = process_cpu_seconds()
            report_every = max(1, turns // 5)
            print(f"load average {os.getloadavg()[0]:.2f}, one session, {turns} turns (4 messages each)")
            for number in range(1, turns + 1):
                started = time.time()
                if number == 1:
                    await sessions.start_session("long", "Where is order A-1?")
                else:
                    await sessions.send_user_message("long", "Where is order A-1?")
                token = await wait_for_turn_completed(sessions, "long", token)
                completed = time.time()
                window.append((completed - started) * 1000)
                if number % report_every == 0:
                    cpu_after = process_cpu_seconds()
                    cpu = {name: cpu_after[name] - before for name, before in cpu_before.items()}
                    cpu_text = ", ".join(
                        f"{name} {seconds / len(window) * 1000:.1f}" for name, seconds in cpu.items()
                    )
                    print(
                        f"  turns {number - len(window) + 1}-{number} (history up to {4 * number} messages): "
                        f"median {statistics.median(window):.1f} ms; CPU per turn (ms): {cpu_text}"
                    )
                    window = []
                    cpu_before = process_cpu_seconds()


def _load_flow(reference: str) -> AgentSessionFlow:
    module_name, _, function_name = reference.partition(":")
    factory = cast(
        Callable[[], AgentSessionFlow], getattr(importlib.import_module(module_name), function_name)
    )
    return factory()


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description="Per-Step breakdown of one durable turn")
    parser.add_argument("--turns", type=int, default=50, help="turns one at a time")
    parser.add_argument("--concurrency", type=int, default=20, help="sessions at once in the throughput run")
    parser.add_argument("--task-slots", type=int, default=None, help="the Worker's task slots")
    parser.add_argument("--flow", default="bench.agent:build_flow", help="module:function returning the Flow")
    parser.add_argument("--worker-module", default="bench.worker")
    parser.add_argument("--worker-cwd", type=Path, default=CORE_DIR)
    parser.add_argument(
        "--one-session", action="store_true", help="run every turn in one session, to see history growth"
    )
    arguments = parser.parse_args()
    sys.path.insert(0, str(arguments.worker_cwd.resolve()))
    flow = _load_flow(arguments.flow)
    worker_cwd = arguments.worker_cwd.resolve()
    if arguments.one_session:
        asyncio.run(run_long_session(flow, arguments.worker_module, worker_cwd, arguments.turns))
    else:
        asyncio.run(
            run(
                flow,
                arguments.worker_module,
                worker_cwd,
                arguments.turns,
                arguments.concurrency,
                arguments.task_slots,
            )
        )


if __name__ == "__main__":
    main()
