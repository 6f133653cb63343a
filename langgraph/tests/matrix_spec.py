"""The LangChain agent of the matrix tests: a real `create_agent` agent with the matrix tools and a
scripted chat model.

The test process and the Worker child (`tests.matrix_worker`) both build it from here.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dex_agents.testing import MATRIX_TOOLS, MatrixSpec
from langchain.agents import create_agent

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def build_matrix_agent(checkpointer: DexCheckpointSaver):
    """An ordinary `create_agent` agent whose tools are the matrix's four scripted tools."""
    return create_agent(
        ScriptedChatModel(),
        tools=list(MATRIX_TOOLS),
        system_prompt="You handle orders: look them up, send receipts, refund and cancel them.",
        middleware=[DexToolGate()],
        checkpointer=checkpointer,
    )


def build_matrix_runner() -> LangGraphRunner:
    # Item 23: the scripted model answers the summary calls from the session's summary script.
    return LangGraphRunner(build_matrix_agent, summary_model=ScriptedChatModel())


SPEC = MatrixSpec(
    build_runner=build_matrix_runner,
    worker_module="tests.matrix_worker",
    flow_type_prefix="LangGraph",
    worker_cwd=PACKAGE_DIR,
    # Long enough for the approval to be seen pending before its deadline Timer fires.
    approval_deadline=timedelta(seconds=4),
    # Item 12: what the framework tells the model about a call to a tool the agent does not have.
    unknown_tool_message="launch_rocket is not a valid tool",
    # Items 14 and 15: the run state keeps the turn's messages (build_unfinished_turn_messages), and a
    # cancelled RunModel cancels the graph's model call.
    supports_turn_control=True,
    # Item 16: DexToolGate offers the enabled built-ins; ScriptedChatModel reports what it was offered.
    supports_built_in_tools=True,
)
