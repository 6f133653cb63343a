"""A complete durable LangChain agent session: a read tool, a refund that needs approval, and a Worker crash.

Run it with ``uv run python examples/refund_agent.py [--yes]`` from ``langgraph/``. It starts a private
``dex-devserver`` and a Worker process, asks a ``create_agent`` agent to refund a broken order, and while
the refund waits for approval it SIGKILLs the Worker and starts a replacement. Then it approves the refund
(at the terminal, or automatically with ``--yes`` or when stdin is not a terminal), and prints the
transcript, the Step history and the real tool runs: the lookup and the refund each ran exactly once, in
their own Steps.

The chat model is `dex_agents_langgraph.testing.ScriptedChatModel`, so the example needs no API key; in
your application pass any LangChain chat model instead (``init_chat_model("openai:gpt-5")``,
``ChatAnthropic(...)``, ...). Everything else is what an application writes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy, current_tool_execution
from dex_agents.demos import ApprovalDemo, RefundExampleHooks, run_approval_demo
from dex_agents.testing import STATE_DIR_ENV, AgentTestStack, run_agent_worker
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolCall
from langchain_core.messages.tool import tool_call
from langchain_core.tools import tool
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel

EXAMPLES_DIR = Path(__file__).resolve().parent
ROLE_ENV = "REFUND_AGENT_ROLE"
SESSION_ID = "refund-session-1"


def _record_run(line: str) -> None:
    """Append one line per real tool run, so the example can prove each tool ran once across processes."""
    state_dir = os.environ.get(STATE_DIR_ENV)
    if state_dir:
        with (Path(state_dir) / "tool-runs.txt").open("a", encoding="utf-8") as runs:
            runs.write(line + "\n")


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order's status."""
    _record_run(f"lookup_order {order_id} pid={os.getpid()}")
    return f"order {order_id}: delivered broken, paid 40 EUR"


@tool
async def refund_order(order_id: str) -> str:
    """Refund an order."""
    execution = current_tool_execution()
    # A real payment API would take this key, so a retried call cannot refund twice.
    key = execution.idempotency_key if execution is not None else "none"
    _record_run(f"refund_order {order_id} pid={os.getpid()} key={key}")
    return f"refund R-{order_id} issued"


def scripted_model() -> ScriptedChatModel:
    """A stand-in for a real chat model: it answers these three replies in order, whatever it is asked.

    It streams its text and then its tool calls, as a provider does. Replace it with a real chat model.
    """
    return ScriptedChatModel(
        responses=[
            AIMessage("Let me look up order 7.", tool_calls=[_call("lookup_order", "lookup-7")]),
            AIMessage(
                "Order 7 arrived broken; I will refund it.", tool_calls=[_call("refund_order", "refund-7")]
            ),
            "Done: order 7 is refunded (refund R-7).",
        ]
    )


def _call(name: str, tool_call_id: str) -> ToolCall:
    return tool_call(name=name, args={"order_id": "7"}, id=tool_call_id)


def build_agent(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Your agent, exactly as you would build it, plus `DexToolGate()` and the given checkpointer."""
    return create_agent(
        scripted_model(),
        tools=[lookup_order, refund_order],
        system_prompt="You help customers with their orders.",
        middleware=[DexToolGate()],
        checkpointer=checkpointer,
    )


def build_flow() -> AgentSessionFlow:
    """Build the session Flow; the example process and its Worker build it alike."""
    return AgentSessionFlow(
        LangGraphRunner(build_agent),
        flow_type="LangGraphRefundAgentExample",
        options=AgentSessionOptions(
            tool_policies={
                "lookup_order": ToolPolicy(ToolEffect.READ),
                "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE),  # needs approval by default
            }
        ),
    )


def print_tool_runs(stack: AgentTestStack, approved: bool) -> int:
    runs_file = stack.state_dir / "tool-runs.txt"
    runs = runs_file.read_text(encoding="utf-8").splitlines() if runs_file.exists() else []
    print("\nReal tool runs:")
    for line in runs:
        print(f"  {line}")
    names = sorted(line.split(" ")[0] for line in runs)
    if approved and names != ["lookup_order", "refund_order"]:
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
        SESSION_ID, assume_yes=assume_yes, print_tool_runs=print_tool_runs, show_usage=True
    )
    with tempfile.TemporaryDirectory(prefix="dex-agents-langgraph-example-") as state_dir:
        return await run_approval_demo(demo, Path(state_dir), hooks)


def main() -> None:
    if os.environ.get(ROLE_ENV) == "worker":
        run_agent_worker([build_flow()])
        return
    parser = argparse.ArgumentParser(
        description="A durable LangChain agent session with an approval and a crash."
    )
    parser.add_argument("--yes", action="store_true", help="approve without asking")
    raise SystemExit(asyncio.run(run(parser.parse_args().yes)))


if __name__ == "__main__":
    main()
