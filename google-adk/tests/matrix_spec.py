"""The ADK application of the matrix tests: a real `LlmAgent` with the matrix tools and a scripted model.

The test process and the Worker child (`tests.matrix_worker`) both build it from here.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dex_agents.testing import MATRIX_TOOLS, MatrixSpec
from google.adk.agents import LlmAgent
from google.adk.apps import App

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedLlm

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def build_matrix_runner() -> GoogleAdkRunner:
    """An ordinary ADK application whose tools are the matrix's four scripted tools."""
    agent = LlmAgent(
        name="orders",
        model=ScriptedLlm(),
        instruction="You handle orders: look them up, send receipts, refund and cancel them.",
        tools=list(MATRIX_TOOLS),
    )
    return GoogleAdkRunner(App(name="orders", root_agent=agent))


SPEC = MatrixSpec(
    build_runner=build_matrix_runner,
    worker_module="tests.matrix_worker",
    flow_type_prefix="GoogleAdk",
    worker_cwd=PACKAGE_DIR,
    # Long enough for the approval to be seen pending before its deadline Timer fires.
    approval_deadline=timedelta(seconds=4),
    # Item 12: what the framework tells the model about a call to a tool the agent does not have.
    unknown_tool_message="Tool 'launch_rocket' not found",
    # Items 14 and 15: the runner keeps a result for every call of a turn that ends early, and a
    # cancelled model call stops.
    supports_turn_control=True,
    # Item 16: the session's built-ins are offered to the model as declared ADK tools.
    supports_built_in_tools=True,
)
