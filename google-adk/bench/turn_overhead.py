"""What durability costs per turn: the same ADK turn in process and as a Dex session.

    uv run python -m bench.turn_overhead [--turns 10]

The turn makes two model calls around one read tool (RunModel, CallTool, ResumeTurn, RunModel) with a
scripted model, so the figures are framework and engine overhead, not model latency. The in-process turn
runs the plain ADK app (no gate) with an ADK `Runner`, SSE streaming and an in-memory session service, as
an application without Dex does. The durable turn runs on a private devserver with one pull Worker child
on this machine; its time is measured from `start_session` to the `turn_completed` event. It also reports
what the session stores: the framework run state at the tool boundary and the stored messages'
`framework_item` sizes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from dex import LongPollTimeoutError
from dex_agents import AgentEventType, AgentSessionClient, ToolCallsRequested
from dex_agents.testing import AgentTestStack
from google.adk.agents.run_config import (
    RunConfig,
    StreamingMode,  # pyright: ignore[reportPrivateImportUsage]
)
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from bench.agent import build_app, build_flow
from dex_agents_google_adk import GoogleAdkRunner
from tests.support import SessionSide

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUESTION = "Where is order A-1?"


async def in_process_turn_seconds(turns: int) -> list[float]:
    app = build_app()
    service = InMemorySessionService()
    runner = Runner(app=app, session_service=service)
    durations: list[float] = []
    for number in range(turns + 1):
        session = await service.create_session(app_name=app.name, user_id="bench", session_id=f"s-{number}")
        started = time.perf_counter()
        async for _event in runner.run_async(
            user_id="bench",
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text=QUESTION)]),
            run_config=RunConfig(streaming_mode=StreamingMode.SSE),
        ):
            pass
        if number:  # the first turn warms up ADK's lazy imports
            durations.append(time.perf_counter() - started)
    return durations


async def wait_for_turn_completed(sessions: AgentSessionClient, session_id: str) -> None:
    token = ""
    while True:
        try:
            message = await sessions.read_agent_event(session_id, token, timeout=timedelta(seconds=10))
        except LongPollTimeoutError:
            continue
        token = message.resume_token
        if message.value.type == AgentEventType.TURN_COMPLETED:
            return
        if message.value.type == AgentEventType.TURN_FAILED:
            raise RuntimeError(f"turn failed: {message.value.payload}")


async def durable_turns(turns: int) -> tuple[list[float], list[int]]:
    with tempfile.TemporaryDirectory(prefix="google-adk-bench-") as directory:
        flow = build_flow()
        async with AgentTestStack(Path(directory), [flow], "bench.worker", worker_cwd=PACKAGE_DIR) as stack:
            sessions = stack.sessions(flow)
            await stack.start_worker()
            durations: list[float] = []
            for number in range(turns + 1):
                session_id = f"bench-{number}"
                started = time.perf_counter()
                await sessions.start_session(session_id, QUESTION)
                await wait_for_turn_completed(sessions, session_id)
                if number:  # the first turn warms up the Worker's imports and the server's caches
                    durations.append(time.perf_counter() - started)
            snapshot = await sessions.get_agent_snapshot("bench-1")
            item_sizes = [len(message.framework_item.encode()) for message in snapshot.messages]
    return durations, item_sizes


async def run_state_bytes() -> int:
    """The size of the run state the session stores while the turn's tool call runs."""
    runner = GoogleAdkRunner(build_app())
    session = SessionSide()
    session.start_turn(runner.build_user_message(QUESTION))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    return len(outcome.framework_run_state.encode())


def describe(label: str, durations: list[float]) -> str:
    milliseconds = sorted(duration * 1000 for duration in durations)
    p90 = milliseconds[max(0, round(0.9 * len(milliseconds)) - 1)]
    median = statistics.median(milliseconds)
    return f"{label}: median {median:.1f} ms, p90 {p90:.1f} ms over {len(milliseconds)} turns"


async def main(turns: int) -> None:
    local = await in_process_turn_seconds(turns)
    durable, item_sizes = await durable_turns(turns)
    run_state = await run_state_bytes()
    print(describe("in process (ADK Runner, SSE)", local))
    print(describe("durable session (devserver, 1 Worker)", durable))
    overhead = statistics.median(durable) - statistics.median(local)
    print(f"durable overhead per turn (2 model calls + 1 tool, 5 Steps): {overhead * 1000:.1f} ms")
    print(f"run state at the tool boundary: {run_state} bytes")
    print(f"stored framework_item bytes (user, assistant, tool, assistant): {json.dumps(item_sizes)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the Google ADK adapter")
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(main(parser.parse_args().turns))
