"""Agents for the session tests of settings, tool questions and tasks, MCP tools and tracing.

The test and its Worker child (`tests.session_tools_worker`) build them here. Every Flow is traced; the
Worker writes its spans to the file `SPAN_FILE_ENV` names. Real tool runs, task polls and the MCP
server's requests are appended to files in the stack's state directory, so the test counts them across
Worker processes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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
from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel

SHIPPING_URL_ENV = "DEX_LANGGRAPH_TEST_SHIPPING_URL"
"""The URL of the Streamable HTTP inventory server the MCP agent knows as ``shipping``."""
SYSTEM_PROMPT = "You handle orders."
TEMPERATURE = 0.25
MAX_TOKENS = 512
MODELS = {"small": "scripted-small", "large": "scripted-large"}
"""The models a session's ``model`` setting chooses, by setting."""


def tool_runs_path(state_dir: Path) -> Path:
    """One line per real run of a tool body, and per poll of a task."""
    return state_dir / "tool-runs.log"


def mcp_log_path(state_dir: Path) -> Path:
    """The MCP servers' request log (the stdio and the HTTP server share it)."""
    return state_dir / "mcp-requests.log"


def memory_wire_log(state_dir: Path) -> Path:
    """Every JSON-RPC message between the Worker and server-memory."""
    return state_dir / "memory-wire.jsonl"


def memory_graph_path(state_dir: Path) -> Path:
    """Where server-memory keeps its graph."""
    return state_dir / "memory-graph.jsonl"


def _log_run(line: str) -> None:
    with tool_runs_path(Path(os.environ[STATE_DIR_ENV])).open("a", encoding="utf-8") as runs:
        runs.write(line + "\n")


@tool
async def refund_to_warehouse(order_id: str) -> str:
    """Refund an order once the user chose the warehouse that takes the return."""
    warehouse = ask_user_input(
        "Which warehouse takes the return?", choices=["Berlin", "Lyon"], allows_free_text=False
    )
    execution = current_tool_execution()
    key = "" if execution is None else execution.idempotency_key
    _log_run(f"refund_to_warehouse {order_id} {warehouse} {key}")
    return f"refund of {order_id} goes to {warehouse}"


@tool
async def ship_order(order_id: str) -> str:
    """Ship an order to the city the user names: LangGraph's own interrupt(), answered through the session."""
    city = interrupt({"question": f"Ship {order_id} to which city?", "choices": ["Berlin", "Lyon"]})
    _log_run(f"ship_order {order_id} {city}")
    return f"{order_id} ships to {city}"


@tool
async def render_report(name: str) -> str:
    """Render a report: a remote job the session polls until it is done."""
    job = started_tool_task()
    if job is None:
        job = f"render-{name}"
        _log_run(f"render_report start {job}")
    await start_tool_task(job, poll_interval_seconds=1)
    raise AssertionError("start_tool_task always stops the call")


async def poll_render(poll: ToolTaskPoll) -> ToolExecutionResult | ToolTaskPending:
    """The render job is done at its second poll; the poll count travels in the continuation."""
    polls = int(poll.tool_call.input_continuation or "0") + 1
    _log_run(f"render_report poll {poll.tool_call.task_id} {polls}")
    if polls < 2:
        return ToolTaskPending(poll_interval_seconds=1, continuation=str(polls))
    return ToolExecutionResult(f"report {poll.tool_call.task_id} is ready")


def _agent_factory(tools: list[BaseTool]) -> Any:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            # A temperature and an output limit, as a provider's chat model reports them, for the chat spans.
            ScriptedChatModel(temperature=TEMPERATURE, max_tokens=MAX_TOKENS),
            tools=tools,
            system_prompt=SYSTEM_PROMPT,
            middleware=[DexToolGate()],
            checkpointer=checkpointer,
        )

    return build


def model_for_settings(settings: Mapping[str, object]) -> ScriptedChatModel | None:
    """The session's ``model`` setting names one of `MODELS`; an unknown one raises `KeyError`."""
    chosen = settings.get("model")
    return None if chosen is None else ScriptedChatModel(model_name=MODELS[str(chosen)])


def instructions_for_settings(settings: Mapping[str, object]) -> str | None:
    tone = settings.get("tone")
    return None if tone is None else f"Answer in a {tone} tone."


def mcp_source(state_dir: Path, shipping_url: str) -> McpToolSource:
    """The inventory server on stdio (``inventory__*``) and on Streamable HTTP (``shipping__*``), and the
    official server-memory on stdio behind a wire tap (``memory__*``), its graph in the state directory;
    every server's annotations are trusted."""
    command = mcp_inventory_server_command(mcp_log_path(state_dir))
    memory = official_mcp_server_command(
        "server-memory",
        env={"MEMORY_FILE_PATH": str(memory_graph_path(state_dir))},
        wire_log=memory_wire_log(state_dir),
    )
    servers: list[McpServer] = [
        McpStdioServer("inventory", command.command, command.args, env=command.env, trust_annotations=True),
        McpStdioServer("memory", memory.command, memory.args, env=memory.env, trust_annotations=True),
    ]
    if shipping_url:
        servers.append(McpHttpServer("shipping", shipping_url, trust_annotations=True))
    return McpToolSource(servers)


def build_flows(
    state_dir: Path, shipping_url: str
) -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """The settings agent, the agent whose tools ask and start tasks, and the MCP agent; all traced."""
    # AgentTracing's cached `records_message_content` does not match the TraceEmitter protocol's plain
    # attribute under pyright; it is the documented value for `tracing=`.
    # The invoke_agent root starts before any model call reports its provider, so the application names it.
    tracing: Any = AgentTracing(
        agent_name="langgraph-test", provider_name="dex.scripted", record_message_content=True
    )
    settings = AgentSessionFlow(
        with_model_call_scope(
            LangGraphRunner(
                _agent_factory([]),
                model_for_settings=model_for_settings,
                instructions_for_settings=instructions_for_settings,
            )
        ),
        flow_type="LangGraphSettings",
        options=AgentSessionOptions(tracing=tracing),
    )
    asking = AgentSessionFlow(
        with_model_call_scope(
            LangGraphRunner(
                _agent_factory([refund_to_warehouse, ship_order, render_report]),
                tool_tasks=ToolTaskHandlers({"render_report": ToolTaskHandler(poll=poll_render)}),
            )
        ),
        flow_type="LangGraphToolRequests",
        options=AgentSessionOptions(
            tool_policies={
                "refund_to_warehouse": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
                "ship_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
                "render_report": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            },
            tracing=tracing,
        ),
    )
    source = mcp_source(state_dir, shipping_url)
    # reserve_stock is an idempotent write by its annotations; this Worker also wants it approved.
    approved_write = {
        "inventory__reserve_stock": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
    }
    mcp = AgentSessionFlow(
        with_model_call_scope(LangGraphRunner(_agent_factory([]), mcp_tools=source)),
        flow_type="LangGraphMcpSource",
        options=AgentSessionOptions(
            tool_policies=source.merge_tool_policies(approved_write), tracing=tracing
        ),
    )
    return settings, asking, mcp
