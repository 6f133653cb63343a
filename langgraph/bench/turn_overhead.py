"""What durability costs per turn: the same LangChain agent turn in process and as a Dex session.

    uv run python -m bench.turn_overhead [--turns 10]

The turn makes two model calls around one read tool (RunModel, CallTool, RunModel) with a
scripted model, so the figures are framework and engine overhead, not model latency. The in-process turn
streams the plain `create_agent` agent (no gate) with `stream_mode="messages"`, as an application that
shows live text does. The durable turn runs on a private devserver with one pull Worker child on this
machine; its time is measured from `start_session` to the `turn_completed` event. It also reports what
the session stores: the framework run state at the tool boundary and the stored messages'
`framework_item` sizes. The timing and the figures are ``dex_agents_bench.run_turn_overhead_bench``.

The peer is the same agent with LangGraph's own durability, timed in the same run: an `AsyncSqliteSaver`
checkpointer on a SQLite file and ``durability="sync"`` (each checkpoint written before the next step
runs), a new thread per turn as each durable turn is a new session.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from dex_agents import ToolCallsRequested
from dex_agents.testing import SessionSide
from dex_agents_bench import DurableTurn, InProcessTurn, run_turn_overhead_bench
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bench.agent import build_agent, build_durable_agent, build_flow
from dex_agents_langgraph import LangGraphRunner

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUESTION = "Where is order A-1?"


async def run_state_bytes() -> int:
    """The size of the run state the session stores while the turn's tool call runs."""
    runner = LangGraphRunner(build_durable_agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message(QUESTION))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    return len(outcome.framework_run_state.encode())


async def main(turns: int) -> None:
    agent = build_agent()

    async def in_process_turn(number: int) -> None:
        del number
        async for _part in agent.astream(
            {"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="messages", version="v2"
        ):
            pass

    with tempfile.TemporaryDirectory(prefix="langgraph-sqlite-") as directory:
        async with AsyncSqliteSaver.from_conn_string(str(Path(directory) / "checkpoints.sqlite")) as saver:
            checkpointed = build_agent(saver)

            async def checkpointed_turn(number: int) -> None:
                async for _part in checkpointed.astream(
                    {"messages": [{"role": "user", "content": QUESTION}]},
                    {"configurable": {"thread_id": f"turn-{number}"}},
                    stream_mode="messages",
                    version="v2",
                    durability="sync",
                ):
                    pass

            await _bench(turns, in_process_turn, checkpointed_turn)


async def _bench(
    turns: int,
    in_process_turn: Callable[[int], Awaitable[None]],
    checkpointed_turn: Callable[[int], Awaitable[None]],
) -> None:
    await run_turn_overhead_bench(
        turns,
        InProcessTurn("create_agent astream", in_process_turn),
        DurableTurn(
            build_flow(),
            "bench.worker",
            PACKAGE_DIR,
            QUESTION,
            "user, assistant text, its call, tool, assistant",
        ),
        run_state_bytes,
        peers=[InProcessTurn("create_agent + AsyncSqliteSaver, durability=sync", checkpointed_turn)],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the LangGraph adapter")
    parser.add_argument("--turns", type=int, default=10)
    asyncio.run(main(parser.parse_args().turns))
