"""What durability costs per turn: the same OpenAI Agents SDK turn in process and as a Dex session.

    uv run python -m bench.turn_overhead [--turns 10]

The turn makes two model calls around one read tool (RunModel, CallTool, RunModel) with a
scripted model, so the figures are framework and engine overhead, not model latency. The durable turn
runs on a private devserver with one pull Worker child on this machine; its time is measured from
`start_session` to the `turn_completed` event, one session at a time and 20 sessions at once. It prints
the median, p99 and max of each, turns per second, the CPU time per turn of each process (Worker,
devserver, client), and what the session stores: the framework run state at the tool boundary and the
stored messages' `framework_item` sizes. The timing and the figures are
``dex_agents_bench.run_turn_overhead_bench``.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from agents import RunConfig, Runner
from dex_agents import ToolCallsRequested
from dex_agents.testing import SessionSide
from dex_agents_bench import DurableTurn, InProcessTurn, run_turn_overhead_bench

from bench.agent import build_agent, build_flow
from dex_agents_openai_agents import OpenAIAgentsRunner

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUESTION = "Where is order A-1?"


async def run_state_bytes() -> int:
    """The size of the run state the session stores while the turn's tool call runs.

    It is the runner's versioned wrapper around the SDK's `RunState` JSON after the first model call,
    from `run_model_step` driven in process the way the session drives it.
    """
    runner = OpenAIAgentsRunner(build_agent())
    session = SessionSide()
    session.start_turn(runner.build_user_message(QUESTION))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    return len(outcome.framework_run_state.encode())


async def main(turns: int) -> None:
    agent = build_agent()

    async def in_process_turn(number: int) -> None:
        del number
        result = await Runner.run(agent, QUESTION, run_config=RunConfig(tracing_disabled=True))
        assert result.final_output == "Order A-1 has shipped."

    await run_turn_overhead_bench(
        turns,
        # The first Runner.run imports the SDK's lazy modules; leave it out of the figures.
        InProcessTurn("Runner.run", in_process_turn, warm_up=True),
        DurableTurn(
            build_flow(), "bench.worker", PACKAGE_DIR, QUESTION, "user, assistant, call, result, assistant"
        ),
        run_state_bytes,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the OpenAI Agents SDK adapter")
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(main(parser.parse_args().turns))
