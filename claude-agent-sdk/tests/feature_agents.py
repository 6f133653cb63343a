"""Agents for the session feature tests (settings, tool questions and tasks, MCP, tracing) and their Worker.

One stack serves them all (`tests/conftest.py`): the test process builds the Flows to talk to sessions, and
the Worker child (`python -m tests.feature_agents`) builds the same Flows and serves them, writing every
span it emits to the stack's span file. Tools log what they really did to files in the stack's state
directory, so tests count effects across Steps and processes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, tool
from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ask_user_input,
    current_tool_execution,
    start_tool_task,
    started_tool_task,
)
from dex_agents.mcp import McpHttpServer, McpServer, McpStdioServer, McpToolSource
from dex_agents.otel import AgentTracing
from dex_agents.testing import (
    STATE_DIR_ENV,
    matrix_session_options,
    mcp_inventory_server_command,
    official_mcp_server_command,
    run_agent_worker,
    with_model_call_scope,
)

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from dex_agents_claude_agent_sdk.testing import ApiReply, ApiRequest, ScriptedClaudeApi
from tests.scripted_claude import matrix_tools, scripted_options, scripted_options_with

SPAN_FILE = "spans.jsonl"
TRACED_SYSTEM_PROMPT = "You are the order desk."
"""The Worker's span file, in the state directory."""
TASK_POLLS_UNTIL_DONE = 2
"""`render_report`'s task is done at this poll."""


def _state_dir() -> Path:
    # The test process builds the Flows only to talk to sessions; tools and servers run in the Worker.
    return Path(os.environ.get(STATE_DIR_ENV, "."))


def effect_log(state_dir: Path) -> list[str]:
    """What the tools of the tool-request agent really did, one line each, in order."""
    path = state_dir / "effects.log"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _log_effect(line: str) -> None:
    with (_state_dir() / "effects.log").open("a", encoding="utf-8") as log:
        log.write(line + "\n")


# Settings: the model and system prompt the API receives, answered back as text.

MODELS = {"small": "claude-small", "large": "claude-large"}


async def _echo_model_and_system(request: ApiRequest) -> ApiReply:
    blocks = cast(list[dict[str, Any]], request.body.get("system") or [])
    system = str(blocks[-1].get("text", "")) if blocks else ""
    return ApiReply(text=f"{request.body.get('model')} model; system: {system}")


SETTINGS_API = ScriptedClaudeApi(_echo_model_and_system)


def _model_for(settings: Mapping[str, object]) -> str | None:
    return MODELS[str(settings["model"])] if "model" in settings else None


def _instructions_for(settings: Mapping[str, object]) -> str | None:
    return f"Answer in a {settings['tone']} tone." if "tone" in settings else None


# Tool questions and tasks.


@tool("refund_order", "Refund an order.", {"order_id": str})
async def refund_order(arguments: dict[str, Any]) -> dict[str, Any]:
    warehouse = ask_user_input(
        "Which warehouse takes the return?", choices=["Berlin", "Lyon"], allows_free_text=False
    )
    _log_effect(f"refund {arguments['order_id']} via {warehouse}")
    return {"content": [{"type": "text", "text": f"refunded {arguments['order_id']} via {warehouse}"}]}


@tool("render_report", "Render the monthly report.", {"month": str})
async def render_report(arguments: dict[str, Any]) -> dict[str, Any]:
    execution = current_tool_execution()
    assert execution is not None and execution.supports_tool_tasks
    job = started_tool_task()
    if job is None:
        job = f"job-{arguments['month']}"
        _log_effect(f"start {job} {execution.idempotency_key}")
    await start_tool_task(job, poll_interval_seconds=1)


async def _poll_report(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    _log_effect(f"poll {poll.tool_call.task_id}")
    polls = sum(line.startswith("poll ") for line in effect_log(_state_dir()))
    if polls < TASK_POLLS_UNTIL_DONE:
        return ToolTaskPending(poll_interval_seconds=1)
    return ToolExecutionResult(f"report {poll.tool_call.task_id} is ready")


@tool(
    "check_region",
    "Check an order's region.",
    {"order_id": str},
    annotations=ToolAnnotations(readOnlyHint=True),
)
async def check_region(arguments: dict[str, Any]) -> dict[str, Any]:
    region = ask_user_input("Which region?")
    _log_effect(f"region {region}")
    return {"content": [{"type": "text", "text": region}]}


# MCP: the core kit's inventory server on stdio, and on Streamable HTTP when the test started it; in a
# Flow of its own, the official server-memory on stdio behind a wire tap. Every server's annotations are
# trusted.


def mcp_log(state_dir: Path) -> Path:
    """The stdio inventory server's request log."""
    return state_dir / "mcp-requests.log"


def http_url_file(state_dir: Path) -> Path:
    """Where the test writes the Streamable HTTP inventory server's URL before the Worker starts."""
    return state_dir / "mcp-http-url"


def memory_wire_log(state_dir: Path) -> Path:
    """Every JSON-RPC message between the Worker and server-memory."""
    return state_dir / "memory-wire.jsonl"


def memory_graph_path(state_dir: Path) -> Path:
    """Where server-memory keeps its graph."""
    return state_dir / "memory-graph.jsonl"


def _mcp_source(state_dir: Path) -> McpToolSource:
    command = mcp_inventory_server_command(mcp_log(state_dir))
    servers: list[McpServer] = [
        McpStdioServer("inventory", command.command, command.args, env=command.env, trust_annotations=True)
    ]
    url_file = http_url_file(state_dir)
    if url_file.exists():
        servers.append(
            McpHttpServer("shipping", url_file.read_text(encoding="utf-8").strip(), trust_annotations=True)
        )
    return McpToolSource(servers)


def _memory_source(state_dir: Path) -> McpToolSource:
    memory = official_mcp_server_command(
        "server-memory",
        env={"MEMORY_FILE_PATH": str(memory_graph_path(state_dir))},
        wire_log=memory_wire_log(state_dir),
    )
    return McpToolSource(
        [McpStdioServer("memory", memory.command, memory.args, env=memory.env, trust_annotations=True)]
    )


def build_flows(state_dir: Path | None = None) -> tuple[AgentSessionFlow, ...]:
    """The settings agent, the tool-request agent, the MCP agent, the traced matrix agent and the
    official server-memory's agent."""
    source = _mcp_source(state_dir or _state_dir())
    memory = _memory_source(state_dir or _state_dir())
    return (
        AgentSessionFlow(
            ClaudeAgentRunner(
                SETTINGS_API.options(
                    ClaudeAgentOptions(
                        model="claude-default", system_prompt="You are the order desk.", setting_sources=[]
                    )
                ),
                model_for_settings=_model_for,
                instructions_for_settings=_instructions_for,
            ),
            flow_type="ClaudeSettings",
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(
                    scripted_options,
                    [refund_order, render_report, check_region],
                    task_handlers=ToolTaskHandlers({"render_report": ToolTaskHandler(poll=_poll_report)}),
                )
            ),
            flow_type="ClaudeToolRequests",
            options=AgentSessionOptions(
                tool_policies={
                    "refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
                    "render_report": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
                }
            ),
        ),
        # No explicit policies: each effect comes from the server's annotations or the default.
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options, [source])),
            flow_type="ClaudeMcpSource",
            options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(scripted_options_with(system_prompt=TRACED_SYSTEM_PROMPT), matrix_tools())
            ),
            flow_type="ClaudeTraced",
            options=dataclasses.replace(
                matrix_session_options(),
                # The invoke_agent root starts before any model call reports a provider: the Flow names it.
                tracing=AgentTracing(
                    agent_name="order-desk", provider_name="anthropic", record_message_content=True
                ),
            ),
        ),
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options, [memory])),
            flow_type="ClaudeMcpOfficial",
            options=AgentSessionOptions(tool_policies=memory.merge_tool_policies()),
        ),
    )


def main() -> None:
    """The Worker child: spans to the state directory's span file, then serve every feature Flow."""
    from dex_agents.testing.otel_spans import export_spans_to_file

    export_spans_to_file(_state_dir() / SPAN_FILE)
    run_agent_worker(build_flows())


if __name__ == "__main__":
    main()
