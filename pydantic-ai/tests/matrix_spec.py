"""The Pydantic AI agent of the matrix tests: a real `Agent` with the matrix tools and a scripted model.

The test process and the Worker child (`tests.matrix_worker`) both build it from here.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dex_agents.testing import MATRIX_TOOLS, MatrixSpec
from pydantic_ai import Agent

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def build_matrix_runner() -> PydanticAiRunner[None]:
    """An ordinary Pydantic AI agent whose tools are the matrix's four scripted tools."""
    agent = Agent(
        ScriptedModel.from_script_store(),
        instructions="You handle orders: look them up, send receipts, refund and cancel them.",
        tools=list(MATRIX_TOOLS),
    )
    return PydanticAiRunner(agent)


SPEC = MatrixSpec(
    build_runner=build_matrix_runner,
    worker_module="tests.matrix_worker",
    flow_type_prefix="PydanticAi",
    worker_cwd=PACKAGE_DIR,
    # Long enough for the approval to be seen pending before its deadline Timer fires.
    approval_deadline=timedelta(seconds=4),
    # Item 12: what the framework tells the model about a call to a tool the agent does not have.
    unknown_tool_message="Unknown tool name: 'launch_rocket'",
    # Items 14 and 15: a steered or cancelled turn keeps its messages with a result for every call
    # (`build_unfinished_turn_messages`), and cancelling RunModel cancels Pydantic AI's model request.
    supports_turn_control=True,
    # Item 16: each model call offers the session's enabled built-ins as external tools and defers their
    # calls; the scripted model passes the names it is offered to the script store.
    supports_built_in_tools=True,
)
