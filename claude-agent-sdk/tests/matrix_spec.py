"""The Claude harness agent of the matrix tests: a real `ClaudeAgentRunner` with the matrix tools.

The test process and the Worker child (`tests.matrix_worker`) both build it from here. Every run starts
the real bundled Claude Code CLI, which calls the scripted Messages API of `tests.scripted_claude`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from dex_agents.testing import MatrixSpec

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from tests.scripted_claude import matrix_tools, scripted_options

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def build_matrix_runner() -> ClaudeAgentRunner:
    """The matrix agent in the default harness mode: reads inline, every other call its own Step."""
    return ClaudeAgentRunner(scripted_options, matrix_tools())


SPEC = MatrixSpec(
    build_runner=build_matrix_runner,
    worker_module="tests.matrix_worker",
    flow_type_prefix="ClaudeAgentSdk",
    worker_cwd=PACKAGE_DIR,
    # Long enough for the approval to be seen pending before its deadline Timer fires, with a CLI start.
    approval_deadline=timedelta(seconds=6),
    # Item 12 is skipped: the CLI answers a tool name the agent does not have by itself, inside `RunModel`,
    # and calls the model again in the same run, so no call is recorded `failed` in a tool Step (see the
    # docs site's docs/pages/frameworks/claude-agent-sdk/limits.md and tests/test_harness_specifics.py).
    unknown_tool_message=None,
    runs_reads_inline=True,
    supports_turn_control=True,
    # Item 16: the session's built-ins are tools of the runner's MCP server, and their calls are deferred.
    supports_built_in_tools=True,
)
