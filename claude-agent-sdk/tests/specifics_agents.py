"""Agents for the tests of the harness specifics; the test process and its Worker build them here."""

from __future__ import annotations

from dex_agents import AgentSessionFlow
from dex_agents.testing import matrix_session_options, with_model_call_scope

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from tests.scripted_claude import matrix_tools, scripted_options, scripted_options_with


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow]:
    """The matrix agent, and an agent whose only tool is the harness's built-in Bash."""
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
    )
