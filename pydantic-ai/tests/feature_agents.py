"""Agents for the session tests of tool questions, tool tasks, an MCP tool source and tracing.

The test and its Worker child (`tests.feature_worker`) build the same Flows from the stack's state
directory:

- ``PydanticAiToolRequests``: an ordinary Pydantic AI agent whose own tools ask the user before they take
  effect (`ask_user_input`, from a plain ``def`` that Pydantic AI runs in a worker thread) and hand a
  remote job to the session (`start_tool_task`), polled by the runner's `ToolTaskHandlers`. It is traced.
- ``PydanticAiMcpSource``: an agent without tools of its own, whose runner offers an `McpToolSource`: the
  kit's inventory server on stdio, the official server-memory on stdio behind a wire tap (``memory``, its
  graph in the state directory), and the inventory server on Streamable HTTP (``shipping``) when the test
  started one; every server's annotations are trusted.

The "remote services" live in the state directory, as a real one lives outside the Worker, so a test
counts what happened across processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    ToolTaskCancellation,
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
    mcp_inventory_server_command,
    official_mcp_server_command,
    with_model_call_scope,
)
from pydantic_ai import Agent

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import SCRIPTED_PROVIDER_NAME, ScriptedModel

REPORT_POLLS = 2
"""How many polls a report job takes before it is ready."""

TRACED_TEMPERATURE = 0.25
"""The temperature of every model call of ``PydanticAiToolRequests``, which its chat spans report."""

TRACED_MAX_TOKENS = 400
"""The answer limit of every model call of ``PydanticAiToolRequests``."""


def state_dir() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV, "."))


def ledger_path(directory: Path) -> Path:
    """What the tools did, one JSON line per effect or task event."""
    return directory / "feature-ledger.jsonl"


def mcp_log_path(directory: Path) -> Path:
    """The stdio inventory server's request log."""
    return directory / "mcp-stdio-requests.log"


def http_url_path(directory: Path) -> Path:
    """Where the test leaves the Streamable HTTP server's URL before the Worker starts."""
    return directory / "mcp-http-url"


def ledger(directory: Path) -> list[dict[str, object]]:
    path = ledger_path(directory)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def _record(entry: dict[str, object]) -> None:
    with ledger_path(state_dir()).open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")


def return_to_warehouse(order_id: str) -> str:
    """Send an order back to a warehouse the customer chooses.

    Args:
        order_id: The order to return.
    """
    # Asked before any effect: the first run stops here, the run with the answer goes on.
    warehouse = ask_user_input(
        "Which warehouse takes the return?", choices=["Berlin", "Lyon"], allows_free_text=False
    )
    execution = current_tool_execution()
    assert execution is not None
    _record(
        {"effect": "return", "order_id": order_id, "warehouse": warehouse, "key": execution.idempotency_key}
    )
    return f"Order {order_id} goes back to {warehouse}."


async def render_report(name: str) -> str:
    """Render a report; it takes a while, so the session polls the job.

    Args:
        name: The report's name.
    """
    execution = current_tool_execution()
    assert execution is not None
    job_id = started_tool_task()
    if job_id is None:
        job_id = f"job-{execution.tool_call.tool_call_id}"
        _record({"event": "start", "job": job_id, "name": name})
    await start_tool_task(job_id, poll_interval_seconds=1)


async def poll_report(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    job_id = poll.tool_call.task_id or ""
    polls = 1 + sum(
        1 for entry in ledger(state_dir()) if entry.get("event") == "poll" and entry["job"] == job_id
    )
    _record({"event": "poll", "job": job_id, "poll": polls})
    if polls < REPORT_POLLS:
        return ToolTaskPending(poll_interval_seconds=1)
    return ToolExecutionResult(f"report {job_id} is ready after {polls} polls")


async def cancel_report(cancellation: ToolTaskCancellation) -> None:
    _record({"event": "cancel", "job": cancellation.tool_call.task_id})


def build_tool_requests_flow() -> AgentSessionFlow:
    agent = Agent(ScriptedModel.from_script_store(), tools=[return_to_warehouse, render_report])
    runner = PydanticAiRunner(
        agent,
        # The traced chat spans report these as the request's parameters.
        model_settings={"temperature": TRACED_TEMPERATURE, "max_tokens": TRACED_MAX_TOKENS},
        tool_tasks=ToolTaskHandlers(
            {"render_report": ToolTaskHandler(poll=poll_report, cancel=cancel_report)}
        ),
    )
    options = AgentSessionOptions(
        tool_policies={
            "return_to_warehouse": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
            "render_report": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
        }
    )
    # Through `replace`, as the core's own tests do: pyright (strict) does not accept `AgentTracing` as the
    # options' `tracing` (its `records_message_content` is a cached_property, the protocol's a property).
    # The spans record message content, so the test can read what each model call received and produced.
    tracing = AgentTracing(
        agent_name="tool-requests", provider_name=SCRIPTED_PROVIDER_NAME, record_message_content=True
    )
    traced = dataclasses.replace(options, tracing=tracing)
    return AgentSessionFlow(with_model_call_scope(runner), flow_type="PydanticAiToolRequests", options=traced)


def memory_wire_log(directory: Path) -> Path:
    """Every JSON-RPC message between the Worker and server-memory."""
    return directory / "memory-wire.jsonl"


def memory_graph_path(directory: Path) -> Path:
    """Where server-memory keeps its graph."""
    return directory / "memory-graph.jsonl"


def build_mcp_source_flow() -> AgentSessionFlow:
    directory = state_dir()
    command = mcp_inventory_server_command(mcp_log_path(directory))
    memory = official_mcp_server_command(
        "server-memory",
        env={"MEMORY_FILE_PATH": str(memory_graph_path(directory))},
        wire_log=memory_wire_log(directory),
    )
    servers: list[McpServer] = [
        McpStdioServer(
            "inventory",
            command.command,
            command.args,
            env=command.env,
            trust_annotations=True,
            # A reservation is an idempotent write a person approves here, by the server's tool name.
            tool_policies={"reserve_stock": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)},
        ),
        McpStdioServer("memory", memory.command, memory.args, env=memory.env, trust_annotations=True),
    ]
    url = http_url_path(directory)
    if url.exists():
        servers.append(McpHttpServer("shipping", url.read_text(encoding="utf-8"), trust_annotations=True))
    source = McpToolSource(servers)
    runner = PydanticAiRunner(Agent(ScriptedModel.from_script_store()), mcp_tools=source)
    return AgentSessionFlow(
        with_model_call_scope(runner),
        flow_type="PydanticAiMcpSource",
        options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
    )


def build_feature_flows() -> list[AgentSessionFlow]:
    return [build_tool_requests_flow(), build_mcp_source_flow()]
