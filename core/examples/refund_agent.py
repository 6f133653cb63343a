"""A complete durable agent session: a read tool, a write that needs approval, and a Worker crash.

Run it with ``uv run python examples/refund_agent.py [--yes]`` from ``core/``. It starts a private
``dex-devserver`` and a Worker process, asks the agent to refund a broken order, and while the refund waits
for approval it SIGKILLs the Worker and starts a replacement. Then it approves the refund (at the terminal,
or automatically with ``--yes`` or when stdin is not a terminal), and prints the transcript and the Step
history: the lookup and the refund each ran exactly once, in their own Steps.

The model is scripted (no API key needed); in a real application the runner comes from an adapter, such as
``dex-agents-pydantic-ai``, and wraps your agent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from dex_agents import (
    AgentInterrupt,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSnapshot,
    MessageRole,
    ToolEffect,
    ToolPolicy,
)
from dex_agents.testing import (
    EXECUTE_COMPLETED_EVENT,
    AgentTestStack,
    ScriptedResponse,
    ScriptedRunner,
    ScriptedToolCall,
    lookup_order,
    refund_order,
    run_agent_worker,
    wait_for_agent_snapshot,
    wait_for_turn_end,
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


async def ask_approval(interrupt: AgentInterrupt, assume_yes: bool) -> bool:
    """Ask at the terminal, or approve at once with --yes or without a terminal."""
    question = f"Approve {interrupt.tool_name} {interrupt.arguments}? [y/N] "
    if assume_yes or not sys.stdin.isatty():
        print(f"{question}y (automatic)")
        return True
    answer = await asyncio.to_thread(input, question)
    return answer.strip().lower() in ("y", "yes")


def print_transcript(snapshot: AgentSnapshot) -> None:
    print("\nTranscript:")
    for message in snapshot.messages:
        if message.role == MessageRole.TOOL:
            print(f"  tool      {message.tool_name} -> {message.tool_output}")
        elif message.tool_name:
            print(f"  assistant calls {message.tool_name} {message.tool_arguments}")
        else:
            print(f"  {message.role.value:<9} {message.text}")


async def run(assume_yes: bool) -> None:
    flow = build_flow()
    with tempfile.TemporaryDirectory(prefix="dex-agents-example-") as state_dir:
        async with AgentTestStack(
            Path(state_dir), [flow], "refund_agent", worker_cwd=EXAMPLES_DIR, worker_env={ROLE_ENV: "worker"}
        ) as stack:
            print(f"Dex server at {stack.server_address}")
            worker = await stack.start_worker()
            print(f"Worker started (pid {worker.pid})")
            sessions = stack.sessions(flow)
            await sessions.start_session(SESSION_ID, "Please refund order 7, it arrived broken.")
            interrupt = await wait_for_agent_snapshot(
                sessions,
                SESSION_ID,
                lambda snapshot: next(iter(snapshot.pending_interrupts), None),
                description="the refund approval",
            )
            print(f"The session waits for approval of {interrupt.tool_name} ({interrupt.interrupt_id})")
            worker.kill()
            print(f"Worker {worker.pid} killed with SIGKILL while the approval waits")
            replacement = await stack.start_worker()
            print(f"Replacement Worker started (pid {replacement.pid})")
            approved = await ask_approval(interrupt, assume_yes)
            if not approved:
                # A real model reads the rejection; the scripted one is told how to answer it.
                stack.scripts.set_turns(SESSION_ID, model_script(REJECTED_ANSWER))
            if not await sessions.resolve_interrupt(
                SESSION_ID, interrupt.interrupt_id, approved=approved, rejection_message="Not approved."
            ):
                raise SystemExit("the approval was no longer pending")
            snapshot = await wait_for_turn_end(sessions, SESSION_ID, 1)
            print_transcript(snapshot)
            print("\nStep history (completed executes):")
            for entry in await stack.read_step_history(SESSION_ID):
                if entry.event_type == EXECUTE_COMPLETED_EVENT:
                    attempt = entry.final_attempt
                    print(f"  {entry.step_execution_id:<26} attempt {attempt}  input {entry.step_input!r}")
            runs = stack.invocations.tool_calls(SESSION_ID)
            print("\nReal tool runs: " + ", ".join(f"{run.tool_name} x1 (pid {run.pid})" for run in runs))
            if approved and sorted(run.tool_name for run in runs) != ["lookup_order", "refund_order"]:
                raise SystemExit(f"expected each tool to run exactly once, got {runs}")


def main() -> None:
    if os.environ.get(ROLE_ENV) == "worker":
        run_agent_worker([build_flow()])
        return
    parser = argparse.ArgumentParser(description="A durable agent session with an approval and a crash.")
    parser.add_argument("--yes", action="store_true", help="approve without asking")
    asyncio.run(run(parser.parse_args().yes))


if __name__ == "__main__":
    main()
