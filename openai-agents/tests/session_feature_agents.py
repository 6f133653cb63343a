"""Agents for the session tests of what a turn brings besides the agent; the test and its Worker build them.

- ``OpenAIAgentsSettings``: the session settings choose the turn's model (``small`` or ``large``).
- ``OpenAIAgentsToolRequests``: a plain ``def`` tool that asks the user before it takes effect, and an
  ``async`` tool that hands a remote job to the session, polled by the runner's ``tool_tasks``.
- ``OpenAIAgentsMcpSource``: no tools of its own; an `McpToolSource` with the kit's inventory server on
  stdio, the official server-memory on stdio behind a wire tap as ``memory`` (its graph in the state
  directory) and, once the test wrote its URL, the inventory server on Streamable HTTP as ``shipping``; every
  server's annotations are trusted.
- ``OpenAIAgentsTraced``: the matrix tools, with `AgentTracing`; the Worker writes its spans to a file.

The "remote" state of the tools (their runs, the jobs and their polls) lives in the stack's state
directory, so the test reads it across processes.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from agents import Agent, Model, ModelSettings, TResponseInputItem, function_tool
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
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    matrix_session_options,
    mcp_inventory_server_command,
    official_mcp_server_command,
    with_model_call_scope,
)

from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel, text_item

#: The traced Flow's fallback provider; the runner's own (the scripted model's) must win over it.
FALLBACK_PROVIDER = "fallback.provider"
#: The model name the traced Flow's scripted model reports.
TRACED_MODEL = "desk-model"
#: The traced agent's temperature, answer limit and instructions, which its chat spans report.
TRACED_TEMPERATURE = 0.25
TRACED_MAX_TOKENS = 400
TRACED_INSTRUCTIONS = "You answer questions about orders."


def _state_dir() -> Path:
    return Path(os.environ.get(STATE_DIR_ENV, "."))


def tool_log_path(state_dir: Path) -> Path:
    """Where the tools of ``OpenAIAgentsToolRequests`` log each run, start and poll."""
    return state_dir / "tool-runs.log"


def mcp_log_path(state_dir: Path) -> Path:
    """The stdio inventory server's request log."""
    return state_dir / "mcp-stdio.log"


def mcp_http_log_path(state_dir: Path) -> Path:
    """The Streamable HTTP inventory server's request log."""
    return state_dir / "mcp-http.log"


def mcp_http_url_path(state_dir: Path) -> Path:
    """Where the test writes the HTTP server's URL before anything builds the Flows."""
    return state_dir / "mcp-http-url"


def _log(line: str) -> None:
    with tool_log_path(_state_dir()).open("a", encoding="utf-8") as log:
        log.write(line + "\n")


@function_tool
def return_order(order_id: str) -> str:
    """Book the return of an order to a warehouse.

    Args:
        order_id: The order to return.
    """
    # A plain function: the SDK runs it in a worker thread, which sees the tool call's context.
    warehouse = ask_user_input(
        "Which warehouse takes the return?", choices=["Berlin", "Lyon"], allows_free_text=False
    )
    _log(f"return {order_id} to {warehouse}")
    return f"return of {order_id} booked to {warehouse}"


def _job_path(task_id: str) -> Path:
    return _state_dir() / "jobs" / f"{task_id}.json"


@function_tool
async def render_report(order_id: str) -> str:
    """Render an order's report, which takes a while.

    Args:
        order_id: The order.
    """
    execution = current_tool_execution()
    assert execution is not None and execution.supports_tool_tasks
    job = started_tool_task()
    if job is None:
        job = f"job-{execution.tool_call.tool_call_id}"
        _job_path(job).parent.mkdir(parents=True, exist_ok=True)
        _job_path(job).write_text(json.dumps({"order_id": order_id, "polls": 0}), encoding="utf-8")
        _log(f"start {job}")
    await start_tool_task(job, poll_interval_seconds=1)


async def poll_report(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    """The report job's poller: done at its second poll."""
    job = poll.tool_call.task_id or ""
    state = json.loads(_job_path(job).read_text(encoding="utf-8"))
    state["polls"] += 1
    _job_path(job).write_text(json.dumps(state), encoding="utf-8")
    _log(f"poll {job} {state['polls']}")
    if state["polls"] < 2:
        return ToolTaskPending(1)
    return ToolExecutionResult(f"report of {state['order_id']} ready")


def _named_model(name: str) -> ScriptedResponsesModel:
    async def answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
        del items, offered
        return ScriptedAnswer([text_item(f"the {name} model answers")])

    return ScriptedResponsesModel(answer, model_name=name)


_SETTINGS_MODELS = {"small": _named_model("small"), "large": _named_model("large")}


def model_for_settings(settings: Mapping[str, object]) -> Model | None:
    """The model a session's settings name; an unknown name raises `KeyError`."""
    name = settings.get("model")
    return None if name is None else _SETTINGS_MODELS[str(name)]


def memory_wire_log(state_dir: Path) -> Path:
    """Every JSON-RPC message between the Worker and server-memory."""
    return state_dir / "memory-wire.jsonl"


def memory_graph_path(state_dir: Path) -> Path:
    """Where server-memory keeps its graph."""
    return state_dir / "memory-graph.jsonl"


def _mcp_source(state_dir: Path) -> McpToolSource:
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
    url_path = mcp_http_url_path(state_dir)
    if url_path.exists():
        servers.append(
            McpHttpServer("shipping", url_path.read_text(encoding="utf-8"), trust_annotations=True)
        )
    return McpToolSource(servers)


def build_flows(state_dir: Path) -> tuple[AgentSessionFlow, ...]:
    """The four Flows, in the order the test unpacks them.

    Args:
        state_dir: The stack's state directory, where the MCP servers log and the HTTP server's URL is.
    """
    settings = Agent[None](name="desk", model=_SETTINGS_MODELS["small"])
    requests = Agent[None](
        name="orders",
        model=ScriptedResponsesModel.from_script_store(),
        tools=[return_order, render_report],
    )
    source = _mcp_source(state_dir)
    stock = Agent[None](name="stock", model=ScriptedResponsesModel.from_script_store())
    traced = Agent[None](
        name="orders",
        instructions=TRACED_INSTRUCTIONS,
        model=ScriptedResponsesModel.from_script_store(model_name=TRACED_MODEL),
        model_settings=ModelSettings(temperature=TRACED_TEMPERATURE, max_tokens=TRACED_MAX_TOKENS),
        tools=[function_tool(tool) for tool in MATRIX_TOOLS],
    )
    tasks = ToolTaskHandlers({"render_report": ToolTaskHandler(poll=poll_report)})
    approved_reserve = ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True)
    return (
        AgentSessionFlow(
            OpenAIAgentsRunner(settings, model_for_settings=model_for_settings),
            flow_type="OpenAIAgentsSettings",
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(requests, tool_tasks=tasks)),
            flow_type="OpenAIAgentsToolRequests",
            options=AgentSessionOptions(
                tool_policies={
                    "return_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
                    "render_report": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
                }
            ),
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(stock, mcp_tool_source=source)),
            flow_type="OpenAIAgentsMcpSource",
            options=AgentSessionOptions(
                # reserve_stock is an idempotent write by its annotations; this session approves it too.
                tool_policies=source.merge_tool_policies({"inventory__reserve_stock": approved_reserve})
            ),
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(traced)),
            flow_type="OpenAIAgentsTraced",
            options=dataclasses.replace(
                matrix_session_options(),
                # Content too: the test reads what each model call received and produced.
                tracing=AgentTracing(
                    agent_name="orders", provider_name=FALLBACK_PROVIDER, record_message_content=True
                ),
            ),
        ),
    )
