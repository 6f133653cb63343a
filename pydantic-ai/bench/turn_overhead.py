"""What durability costs per turn: the same Pydantic AI turn in process and as a Dex session.

    uv run python -m bench.turn_overhead [--turns 10]

The turn makes two model calls around one read tool (RunModel, CallTool, RunModel) with a
scripted model, so the figures are framework and engine overhead, not model latency. The durable turn
runs on a private devserver with one pull Worker child on this machine; its time is measured from
`start_session` to the `turn_completed` event. It also reports what the session stores: the framework
run state at the tool boundary and the stored messages' `framework_item` sizes. The timing and the
figures are ``dex_agents_bench.run_turn_overhead_bench``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterable
from pathlib import Path

from dex_agents_bench import DurableTurn, InProcessTurn, run_turn_overhead_bench
from pydantic_ai import RunContext
from pydantic_ai.messages import AgentStreamEvent

from bench.agent import build_agent, build_flow
from dex_agents_pydantic_ai import PydanticAiRunState

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUESTION = "Where is order A-1?"


async def consume_events(context: RunContext[None], events: AsyncIterable[AgentStreamEvent]) -> None:
    """Read the streamed events, as an application that shows live text does."""
    del context
    async for _ in events:
        pass


async def run_state_bytes() -> int:
    """The size of the run state the session stores while the turn's tool call runs.

    It holds the turn's messages after the user message up to the response whose calls wait: here the
    first model response, taken from an in-process run of the same agent.
    """
    result = await build_agent().run(QUESTION, event_stream_handler=consume_events)
    first_response = result.all_messages()[1]
    return len(PydanticAiRunState(turn_messages=[first_response]).to_json().encode())


async def main(turns: int) -> None:
    agent = build_agent()

    async def in_process_turn(number: int) -> None:
        del number
        result = await agent.run(QUESTION, event_stream_handler=consume_events)
        assert result.output == "Order A-1 has shipped."

    await run_turn_overhead_bench(
        turns,
        InProcessTurn("agent.run", in_process_turn),
        DurableTurn(
            build_flow(),
            "bench.worker",
            PACKAGE_DIR,
            QUESTION,
            "user, assistant text, assistant call, tool, assistant",
        ),
        run_state_bytes,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the Pydantic AI adapter")
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(main(parser.parse_args().turns))
