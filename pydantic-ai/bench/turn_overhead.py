"""What durability costs per turn: the same Pydantic AI turn in process and as a Dex session.

    uv run python -m bench.turn_overhead [--turns 10]

The turn makes two model calls around one read tool (RunModel, CallTool, RunModel) with a
scripted model, so the figures are framework and engine overhead, not model latency. The durable turn
runs on a private devserver with one pull Worker child on this machine; its time is measured from
`start_session` to the `turn_completed` event. It also reports what the session stores: the framework
run state at the tool boundary and the stored messages' `framework_item` sizes. The timing and the
figures are ``dex_agents_bench.run_turn_overhead_bench``.

The peer is the same agent made durable by DBOS through Pydantic AI's own `DBOSDurability` capability,
each turn one `@DBOS.workflow` (model requests and tool calls are its steps) on a SQLite system database,
timed in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import AsyncIterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dbos import DBOS, DBOSConfig
from dex_agents_bench import DurableTurn, InProcessTurn, run_turn_overhead_bench
from pydantic_ai import Agent, RunContext
from pydantic_ai.durable_exec.dbos import DBOSDurability
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


_DBOS_AGENT: Agent[None, str] = build_agent(
    name="bench", capabilities=[DBOSDurability(event_stream_handler=consume_events)]
)


@DBOS.workflow()
async def dbos_turn(question: str) -> str:
    """One turn of the DBOS peer: a workflow whose model requests and tool call are DBOS steps."""
    result = await _DBOS_AGENT.run(question)
    return result.output


@contextmanager
def dbos_launched() -> Iterator[None]:
    """DBOS launched on a SQLite system database in a temporary directory, destroyed on exit."""
    with tempfile.TemporaryDirectory(prefix="dbos-peer-") as directory:
        config: DBOSConfig = {
            "name": "dex-agents-bench-peer",
            "system_database_url": f"sqlite:///{Path(directory) / 'dbos.sqlite'}",
            "run_admin_server": False,
            "log_level": "WARNING",
        }
        DBOS(config=config)
        DBOS.launch()
        try:
            yield
        finally:
            DBOS.destroy()


async def main(turns: int) -> None:
    with dbos_launched():
        await _bench(turns)


async def _bench(turns: int) -> None:
    agent = build_agent()

    async def in_process_turn(number: int) -> None:
        del number
        result = await agent.run(QUESTION, event_stream_handler=consume_events)
        assert result.output == "Order A-1 has shipped."

    async def dbos_peer_turn(number: int) -> None:
        del number
        assert await dbos_turn(QUESTION) == "Order A-1 has shipped."

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
        peers=[InProcessTurn("DBOSDurability, SQLite system database", dbos_peer_turn)],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the Pydantic AI adapter")
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(main(parser.parse_args().turns))
