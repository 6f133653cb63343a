"""The core's scripted agent: ``ScriptedRunner`` with the matrix tools, as both test and Worker build it."""

from datetime import timedelta
from pathlib import Path

from dex_agents.testing import MatrixSpec, ScriptedRunner

CORE_DIR = Path(__file__).resolve().parents[1]

SPEC = MatrixSpec(
    build_runner=ScriptedRunner,
    worker_module="tests.agent_worker",
    flow_type_prefix="Core",
    worker_cwd=CORE_DIR,
    # Long enough for a test to fire the deadline Timer early and see the approval still pending.
    approval_deadline=timedelta(seconds=4),
    unknown_tool_message="unknown tool 'launch_rocket'",
    supports_turn_control=True,
    supports_built_in_tools=True,
)
