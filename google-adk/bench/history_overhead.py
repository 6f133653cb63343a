"""Measures what the adapter adds to a model call: restoring stored history, and the run state's size.

    uv run python -m bench.history_overhead

It drives `GoogleAdkRunner` in process with a model that answers at once, so the times are the adapter's
and ADK's own work per model Step (no server, no network), and prints one line per measurement.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from dex_agents.runner import ToolCallsRequested
from dex_agents.testing import SessionSide
from dex_agents.values import ToolCallStatus
from google.adk.agents import LlmAgent

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedLlm, ScriptedResponse, ScriptedToolCall


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}"


def history_session(runner: GoogleAdkRunner, turns: int) -> SessionSide:
    """A session whose stored history holds ``turns`` earlier question-and-answer turns."""
    session = SessionSide()
    for number in range(turns):
        session.start_turn(runner.build_user_message(f"Question {number}: where is order A-{number}?"))
        session.store([runner.build_user_message(f"Order A-{number} shipped on day {number}.")])
    return session


async def model_step_seconds(turns: int, repeats: int = 5) -> float:
    """The median time of one `run_model_step` that answers at once, after ``turns`` stored turns."""
    durations: list[float] = []
    for _ in range(repeats):
        model = ScriptedLlm(responses=[ScriptedResponse(text="Done.")])
        runner = GoogleAdkRunner(
            LlmAgent(name="desk", model=model, instruction="Help.", tools=[lookup_order])
        )
        session = history_session(runner, turns)
        session.start_turn(runner.build_user_message("And now?"))
        started = time.perf_counter()
        await runner.run_model_step(session.context())
        durations.append(time.perf_counter() - started)
    return statistics.median(durations)


async def run_state_sizes(steps: int) -> list[int]:
    """The run state's size in bytes after each of ``steps`` model calls that each ask for one read."""
    model = ScriptedLlm(
        responses=[
            ScriptedResponse(tool_calls=(ScriptedToolCall("lookup_order", {"order_id": f"A-{n}"}, f"c{n}"),))
            for n in range(steps)
        ]
    )
    runner = GoogleAdkRunner(LlmAgent(name="desk", model=model, instruction="Help.", tools=[lookup_order]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Look everything up"))
    sizes: list[int] = []
    for _ in range(steps):
        outcome = await runner.run_model_step(session.context())
        assert isinstance(outcome, ToolCallsRequested)
        sizes.append(len(outcome.framework_run_state.encode()))
        session.defer(outcome)
        for deferred in outcome.tool_calls:
            session.finish(deferred.tool_call_id, ToolCallStatus.SUCCEEDED, output="order found")
    return sizes


async def main() -> None:
    for turns in (0, 50, 200):
        seconds = await model_step_seconds(turns)
        print(
            f"run_model_step after {turns} stored turns ({2 * turns + 1} messages): {seconds * 1000:.1f} ms"
        )
    sizes = await run_state_sizes(3)
    print(
        "run state after model calls 1, 2, 3 of one turn (one read each): "
        + ", ".join(f"{s} B" for s in sizes)
    )


if __name__ == "__main__":
    asyncio.run(main())
