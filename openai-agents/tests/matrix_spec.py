"""The OpenAI Agents SDK agent of the matrix tests: a real `Agent` with the matrix tools and a scripted model.

The test process and the Worker child (`tests.matrix_worker`) both build it from here.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from agents import Agent, function_tool
from dex_agents.testing import MATRIX_TOOLS, MatrixSpec

from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedResponsesModel

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def build_matrix_runner() -> OpenAIAgentsRunner[None]:
    """An ordinary SDK agent with the matrix's four scripted tools and the public scripted model."""
    agent = Agent[None](
        name="orders",
        instructions="You handle orders: look them up, send receipts, refund and cancel them.",
        model=ScriptedResponsesModel.from_script_store(),
        tools=[function_tool(tool) for tool in MATRIX_TOOLS],
    )
    return OpenAIAgentsRunner(agent)


SPEC = MatrixSpec(
    build_runner=build_matrix_runner,
    worker_module="tests.matrix_worker",
    flow_type_prefix="OpenAIAgents",
    worker_cwd=PACKAGE_DIR,
    # Long enough for the approval to be seen pending before its deadline Timer fires.
    approval_deadline=timedelta(seconds=4),
    # Item 12: what the framework tells the model about a call to a tool the agent does not have.
    unknown_tool_message="Tool launch_rocket not found in agent orders",
    # Items 14 and 15: steered and cancelled turns keep their items and a result for every call.
    supports_turn_control=True,
    # Item 16: the session's built-ins are offered like any tool, and ask_user round-trips.
    supports_built_in_tools=True,
)
