"""A complete durable agent session: a read tool, a write that needs approval, and a Worker crash.

Run it with ``uv run python examples/refund_agent.py [--yes]`` from ``core/``. It starts a private
``dex-devserver`` and a Worker process, asks the agent to refund a broken order, and while the refund waits
for approval it SIGKILLs the Worker and starts a replacement. Then it approves the refund (at the terminal,
or automatically with ``--yes`` or when stdin is not a terminal), and prints the transcript and the Step
history: the lookup and the refund each ran exactly once, in their own Steps.

The model is scripted (no API key needed); in a real application the runner comes from an adapter, such as
``dex-agents-pydantic-ai``, and wraps your agent. The demo itself (the devserver, the Worker kill, the
approval and the printing) is ``dex_agents_examples.run_approval_demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from dex_agents_examples import ApprovalDemo, RefundExampleHooks, run_approval_demo

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedRunner,
    ScriptedToolCall,
    lookup_order,
    refund_order,
    run_agent_worker,
)

EXAMPLES_DIR = Path(__file__).resolve().parent
ROLE_ENV = "REFUND_AGENT_ROLE"
SESSION_ID = "refund-session-1"


def model_script(final_answer: str) -> list[list[ScriptedResponse]]:
    """What the scripted model answers: look the order up, ask to refund it, then answer."""
    return [
        [
            ScriptedResponse(
                text="Let me look up order 7.",
                tool_calls=(
                    ScriptedToolCall("lookup_order", {"order_id": "7"}, "lookup-7", output="order 7: broken"),
                ),
            ),
            ScriptedResponse(
                text="Order 7 arrived broken; I will refund it.",
                tool_calls=(
                    ScriptedToolCall(
                        "refund_order", {"order_id": "7"}, "refund-7", output="refund R-7 issued"
                    ),
                ),
            ),
            ScriptedResponse(text=final_answer),
        ]
    ]


APPROVED_ANSWER = "Done: order 7 is refunded (refund R-7)."
REJECTED_ANSWER = "Understood, I did not refund order 7."


def build_flow() -> AgentSessionFlow:
    """Build the session Flow; the example process and its Worker build it alike."""
    return AgentSessionFlow(
        ScriptedRunner(tools=(lookup_order, refund_order), default_turns=model_script(APPROVED_ANSWER)),
        flow_type="RefundAgentExample",
        options=AgentSessionOptions(
            tool_policies={
                "lookup_order": ToolPolicy(ToolEffect.READ),
                "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),  # needs approval by default
            }
        ),
    )


def tell_model_of_rejection(stack: AgentTestStack) -> None:
    # A real model reads the rejection; the scripted one is told how to answer it.
    stack.scripts.set_turns(SESSION_ID, model_script(REJECTED_ANSWER))


def print_tool_runs(stack: AgentTestStack, approved: bool) -> int:
    runs = stack.invocations.tool_calls(SESSION_ID)
    print("\nReal tool runs: " + ", ".join(f"{run.tool_name} x1 (pid {run.pid})" for run in runs))
    if approved and sorted(run.tool_name for run in runs) != ["lookup_order", "refund_order"]:
        raise SystemExit(f"expected each tool to run exactly once, got {runs}")
    return 0


async def run(assume_yes: bool) -> int:
    demo = ApprovalDemo(
        build_flow(),
        "refund_agent",
        EXAMPLES_DIR,
        SESSION_ID,
        "Please refund order 7, it arrived broken.",
        worker_env={ROLE_ENV: "worker"},
    )
    hooks = RefundExampleHooks(
        SESSION_ID,
        assume_yes=assume_yes,
        print_tool_runs=print_tool_runs,
        on_rejected=tell_model_of_rejection,
    )
    with tempfile.TemporaryDirectory(prefix="dex-agents-example-") as state_dir:
        return await run_approval_demo(demo, Path(state_dir), hooks)


def main() -> None:
    if os.environ.get(ROLE_ENV) == "worker":
        run_agent_worker([build_flow()])
        return
    parser = argparse.ArgumentParser(description="A durable agent session with an approval and a crash.")
    parser.add_argument("--yes", action="store_true", help="approve without asking")
    raise SystemExit(asyncio.run(run(parser.parse_args().yes)))


if __name__ == "__main__":
    main()
