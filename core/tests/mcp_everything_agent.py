"""A scripted agent whose tools are the official server-everything's, over stdio, and its Worker child.

The source declares elicitation and, because the configuration names two roots, roots; so server-everything
offers ``get-roots-list``, ``trigger-elicitation-request`` and ``trigger-url-elicitation``. Those two
elicitation tools only echo what the user gave, so this Worker knows they are reads and lets them run without
approval: a read may run again, which is what lets its elicitation become a durable question.
"""

import os
from pathlib import Path

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.mcp import McpRoot, McpStdioServer, McpToolSource
from dex_agents.testing import STATE_DIR_ENV, run_agent_worker
from tests.mcp_agent import McpScriptedRunner

#: The official reference server, pinned by ``tests/mcp_servers/package-lock.json`` (``npm ci`` there).
EVERYTHING_BIN = Path(__file__).resolve().parent / "mcp_servers/node_modules/.bin/mcp-server-everything"
#: The roots this Worker gives the server.
ROOTS = (McpRoot("file:///srv/shared", "shared"), McpRoot("file:///srv/reports"))

_READ = ToolPolicy(ToolEffect.READ, requires_approval=False)


def build_everything_flow(state_dir: Path) -> AgentSessionFlow:
    """The agent's Flow, as the test and its Worker build it; building it contacts no server."""
    server = McpStdioServer(
        "everything",
        str(EVERYTHING_BIN),
        ["stdio"],
        roots=ROOTS,
        # The server's annotations are not trusted (the default), so each tool the test calls has a policy.
        tool_policies={
            "trigger-elicitation-request": _READ,
            "trigger-url-elicitation": _READ,
            "get-roots-list": _READ,
        },
    )
    source = McpToolSource([server])
    return AgentSessionFlow(
        McpScriptedRunner(source, state_dir),
        flow_type="CoreMcpEverything",
        options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
    )


if __name__ == "__main__":
    run_agent_worker([build_everything_flow(Path(os.environ[STATE_DIR_ENV]))])
