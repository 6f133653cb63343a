"""An ADK agent whose MCP tools come from an `McpToolSource`, and its Worker child.

The agent has a tool of its own (`lookup_order`) and the test kit's inventory server on stdio as
``inventory__<tool>``; when the state directory names a Streamable HTTP server (`write_http_server_url`),
that server's tools too, as ``shipping__<tool>``; and the official server-memory on stdio behind a wire tap,
as ``memory__<tool>``, its graph in the state directory. Every server's annotations are trusted. Only the
Worker lists or calls a server; building the Flow contacts none.
"""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents.mcp import McpHttpServer, McpServer, McpStdioServer, McpToolSource
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    mcp_inventory_server_command,
    official_mcp_server_command,
    run_agent_worker,
    with_model_call_scope,
)
from google.adk.agents import LlmAgent

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedLlm


def stdio_log_path(state_dir: Path) -> Path:
    return state_dir / "mcp-stdio-requests.log"


def _http_url_path(state_dir: Path) -> Path:
    return state_dir / "mcp-http-url"


def write_http_server_url(state_dir: Path, url: str) -> None:
    """Give the agent built for ``state_dir`` a Streamable HTTP server named ``shipping`` at ``url``."""
    _http_url_path(state_dir).write_text(url, encoding="utf-8")


def memory_wire_log(state_dir: Path) -> Path:
    """Every JSON-RPC message between the Worker and server-memory."""
    return state_dir / "memory-wire.jsonl"


def memory_graph_path(state_dir: Path) -> Path:
    """Where server-memory keeps its graph."""
    return state_dir / "memory-graph.jsonl"


def build_mcp_source_flow(state_dir: Path) -> AgentSessionFlow:
    command = mcp_inventory_server_command(stdio_log_path(state_dir))
    memory = official_mcp_server_command(
        "server-memory",
        env={"MEMORY_FILE_PATH": str(memory_graph_path(state_dir))},
        wire_log=memory_wire_log(state_dir),
    )
    servers: list[McpServer] = [
        McpStdioServer("inventory", command.command, command.args, env=command.env, trust_annotations=True),
        McpStdioServer("memory", memory.command, memory.args, env=memory.env, trust_annotations=True),
    ]
    url_path = _http_url_path(state_dir)
    if url_path.exists():
        servers.append(
            McpHttpServer("shipping", url_path.read_text(encoding="utf-8"), trust_annotations=True)
        )
    source = McpToolSource(servers)
    [lookup_order] = [tool for tool in MATRIX_TOOLS if tool.__name__ == "lookup_order"]
    agent = LlmAgent(name="inventory", model=ScriptedLlm(), instruction="Keep stock.", tools=[lookup_order])
    return AgentSessionFlow(
        with_model_call_scope(GoogleAdkRunner(agent, mcp_tools=source)),
        flow_type="GoogleAdkMcpSource",
        options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
    )


if __name__ == "__main__":
    run_agent_worker([build_mcp_source_flow(Path(os.environ[STATE_DIR_ENV]))])
