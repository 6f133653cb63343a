"""What durability costs per turn: the same ADK turn in process and as a Dex session.

    uv run python -m bench.turn_overhead [--turns 10]

The turn makes two model calls around one read tool (RunModel, CallTool, RunModel) with a
scripted model, so the figures are framework and engine overhead, not model latency. The in-process turn
runs the plain ADK app (no gate) with an ADK `Runner`, SSE streaming and an in-memory session service, as
an application without Dex does. The durable turn runs on a private devserver with one pull Worker child
on this machine; its time is measured from `start_session` to the `turn_completed` event. It also reports
what the session stores: the framework run state at the tool boundary and the stored messages'
`framework_item` sizes. The timing and the figures are ``dex_agents_bench.run_turn_overhead_bench``.

Building the Flow builds a `GoogleAdkRunner`, which applies the adapter's ADK import work-around
(``_adk_patches``) in this process and in the Worker, so the in-process turn gets it too.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from dex_agents import ToolCallsRequested
from dex_agents.testing import SessionSide
from dex_agents_bench import DurableTurn, InProcessTurn, run_turn_overhead_bench
from google.adk.agents.run_config import (
    RunConfig,
    StreamingMode,  # pyright: ignore[reportPrivateImportUsage]
)
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from bench.agent import build_app, build_flow
from dex_agents_google_adk import GoogleAdkRunner

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUESTION = "Where is order A-1?"


async def run_state_bytes() -> int:
    """The size of the run state the session stores while the turn's tool call runs."""
    runner = GoogleAdkRunner(build_app())
    session = SessionSide()
    session.start_turn(runner.build_user_message(QUESTION))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    return len(outcome.framework_run_state.encode())


async def main(turns: int) -> None:
    app = build_app()
    service = InMemorySessionService()
    runner = Runner(app=app, session_service=service)

    async def create_session(number: int) -> None:
        await service.create_session(app_name=app.name, user_id="bench", session_id=f"s-{number}")

    async def in_process_turn(number: int) -> None:
        async for _event in runner.run_async(
            user_id="bench",
            session_id=f"s-{number}",
            new_message=types.Content(role="user", parts=[types.Part(text=QUESTION)]),
            run_config=RunConfig(streaming_mode=StreamingMode.SSE),
        ):
            pass

    await run_turn_overhead_bench(
        turns,
        # The first turn warms up ADK's lazy imports; the session service's set-up is not timed.
        InProcessTurn("ADK Runner, SSE", in_process_turn, prepare=create_session, warm_up=True),
        DurableTurn(
            build_flow(),
            "bench.worker",
            PACKAGE_DIR,
            QUESTION,
            "user, assistant (text), assistant (call), tool, assistant",
        ),
        run_state_bytes,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the Google ADK adapter")
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(main(parser.parse_args().turns))
