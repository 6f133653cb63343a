"""A scripted agent whose tools are the official MCP reference servers', and its Worker child.

The servers (`dex_agents.testing.official_mcp_server_command`): server-everything on stdio behind a wire
tap (``everything__<tool>``), server-everything on Streamable HTTP at the URL the test writes to the state
directory (``everything_http__<tool>``), and server-memory on stdio behind a wire tap (``memory__<tool>``),
its graph in the state directory. The runner is `tests.mcp_agent.McpScriptedRunner`.

The policy this Worker configures: annotations are trusted for all three servers, so a tool's effect comes
from its hints unless a policy names it; ``simulate-research-query`` (no hint that classifies it) is a
``read``, which this simulation is, so a Worker killed during its task calls it again; ``create_entities``
is a single-attempt write that needs no approval.
"""

import os
from pathlib import Path

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.mcp import McpHttpServer, McpServer, McpStdioServer, McpToolSource
from dex_agents.testing import STATE_DIR_ENV, official_mcp_server_command, run_agent_worker
from tests.mcp_agent import McpScriptedRunner

EVERYTHING_POLICIES = {"simulate-research-query": ToolPolicy(ToolEffect.READ)}
MEMORY_POLICIES = {
    "create_entities": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
}


def everything_wire_log(state_dir: Path) -> Path:
    """Every JSON-RPC message between the Worker and the stdio server-everything."""
    return state_dir / "everything-wire.jsonl"


def memory_wire_log(state_dir: Path) -> Path:
    """Every JSON-RPC message between the Worker and server-memory."""
    return state_dir / "memory-wire.jsonl"


def write_everything_http_url(state_dir: Path, url: str) -> None:
    """Give the agent built for ``state_dir`` the server-everything at ``url`` as ``everything_http``."""
    (state_dir / "everything-http-url").write_text(url, encoding="utf-8")


def official_servers(state_dir: Path) -> list[McpServer]:
    """The three servers, configured as the module docstring says."""
    everything = official_mcp_server_command("server-everything", wire_log=everything_wire_log(state_dir))
    memory = official_mcp_server_command(
        "server-memory",
        env={"MEMORY_FILE_PATH": str(state_dir / "memory-graph.jsonl")},
        wire_log=memory_wire_log(state_dir),
    )
    servers: list[McpServer] = [
        McpStdioServer(
            "everything",
            everything.command,
            everything.args,
            env=everything.env,
            tool_policies=EVERYTHING_POLICIES,
            trust_annotations=True,
        ),
        McpStdioServer(
            "memory",
            memory.command,
            memory.args,
            env=memory.env,
            tool_policies=MEMORY_POLICIES,
            trust_annotations=True,
        ),
    ]
    url_path = state_dir / "everything-http-url"
    if url_path.exists():
        servers.append(
            McpHttpServer(
                "everything_http",
                url_path.read_text(encoding="utf-8"),
                tool_policies=EVERYTHING_POLICIES,
                trust_annotations=True,
            )
        )
    return servers


def build_official_flow(state_dir: Path) -> AgentSessionFlow:
    """The agent's Flow, as the test and its Worker build it; building it contacts no server."""
    source = McpToolSource(official_servers(state_dir))
    return AgentSessionFlow(
        McpScriptedRunner(source, state_dir),
        flow_type="CoreMcpOfficial",
        options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
    )


if __name__ == "__main__":
    run_agent_worker([build_official_flow(Path(os.environ[STATE_DIR_ENV]))])
