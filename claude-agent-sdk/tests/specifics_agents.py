"""Agents for the tests of the harness specifics; the test process and its Worker build them here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.testing import STATE_DIR_ENV, matrix_session_options, with_model_call_scope

from dex_agents_claude_agent_sdk import ClaudeAgentRunner, McpStdioServer
from tests.scripted_claude import matrix_tools, scripted_options, scripted_options_with

MCP_SERVER_SCRIPT = Path(__file__).with_name("mcp_inventory_server.py")


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the MCP agent logs its requests."""
    return state_dir / "mcp-requests.log"


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """The matrix agent, a Bash-only agent, an agent with an MCP server, and one that defers reads too."""
    # The test process builds the Flows only to talk to sessions; the server runs when a Worker lists tools.
    state_dir = Path(os.environ.get(STATE_DIR_ENV, "."))
    inventory = McpStdioServer(
        sys.executable, [str(MCP_SERVER_SCRIPT)], env={"MCP_TEST_LOG": str(mcp_log_path(state_dir))}
    )
    return (
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options, matrix_tools())),
            flow_type="ClaudeSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options_with(tools=["Bash"]))),
            flow_type="ClaudeBuiltins",
        ),
        # No explicit policies: every effect comes from the server's annotations or the default.
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options, [inventory])), flow_type="ClaudeMcp"
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(scripted_options, matrix_tools(), inline_read_tools=False)
            ),
            flow_type="ClaudeDeferredReads",
            options=matrix_session_options(),
        ),
    )
