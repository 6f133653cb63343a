"""A Stepwise agent with every optional capability on, as the test process and the Worker child build it.

The order desk of ``test_stepwise_desk.py``: the session's built-in tools and plan mode, a forced
``write_todos`` when it plans, a sync function tool that asks the user before it takes effect, a sync
function tool that starts a remote report job polled by its `ToolTaskHandler`, the kit's inventory MCP
server on Streamable HTTP (whose ``ship_order`` answers with an MCP task) when the test started one, and
tracing. Its tools log each run, with the thread it ran on, to a file in the stack's state directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, NoReturn

from dex_agents import (
    BUILT_IN_TOOL_NAMES,
    AgentSessionFlow,
    AgentSessionOptions,
    DeferredToolExecution,
    ToolExecutionResult,
    ToolTaskHandler,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ask_user_input,
    current_tool_execution,
    start_tool_task,
    started_tool_task,
)
from dex_agents.mcp import McpHttpServer, McpToolSource
from dex_agents.otel import AgentTracing
from dex_agents.stepwise import AgentDefinition, StepwiseRunner, function_tool
from dex_agents.testing import STATE_DIR_ENV, with_model_call_scope
from dex_agents.testing.stepwise import scripted_model

FLOW_TYPE = "StepwiseDesk"
AGENT_NAME = "stepwise-desk"
#: The scripted model's name, so the request reaches LiteLLM as ``dex-scripted/desk``.
MODEL_NAME = "desk"
#: How many polls a report job takes to finish.
REPORT_POLLS = 2
WAREHOUSE_QUESTION = "Which warehouse takes the return?"


def _state_dir() -> Path:
    return Path(os.environ[STATE_DIR_ENV])


def tool_runs_path(state_dir: Path) -> Path:
    """The log of every run of the desk's function tools and report jobs, one JSON object a line."""
    return state_dir / "stepwise-desk-runs.jsonl"


def read_tool_runs(state_dir: Path, session: str) -> list[dict[str, Any]]:
    """The logged runs of one session, oldest first."""
    path = tool_runs_path(state_dir)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [run for run in map(json.loads, lines) if run["session"] == session]


def _log_run(kind: str, execution: DeferredToolExecution, **details: object) -> None:
    entry = {
        "kind": kind,
        "session": execution.flow_id,
        "tool_call_id": execution.tool_call.tool_call_id,
        "attempt": execution.attempt,
        "on_event_loop_thread": threading.current_thread() is threading.main_thread(),
        "supports_tool_tasks": execution.supports_tool_tasks,
        **details,
    }
    with tool_runs_path(_state_dir()).open("a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def _running_call() -> DeferredToolExecution:
    execution = current_tool_execution()
    if execution is None:
        raise RuntimeError("the desk's tools run only in a session's tool Step")
    return execution


async def lookup_order(order_id: str) -> str:
    """Look up an order's status.

    Args:
        order_id: The order, such as A-1.
    """
    return f"{order_id} arrived broken"


def cancel_order(order_id: str) -> str:
    """Cancel an order and take it back; asks which warehouse takes the return first.

    Args:
        order_id: The order to cancel.
    """
    warehouse = ask_user_input(WAREHOUSE_QUESTION, choices=["Berlin", "Lyon"], allows_free_text=False)
    _log_run("cancel_order", _running_call(), warehouse=warehouse)
    return f"cancelled {order_id}; the return goes to {warehouse}"


def _job_path(job_id: str) -> Path:
    return _state_dir() / f"stepwise-report-{job_id}.json"


def render_report(order_id: str) -> Awaitable[NoReturn]:
    """Render the order's damage report, a job that takes a while.

    Args:
        order_id: The order.
    """
    execution = _running_call()
    job_id = started_tool_task()
    if job_id is None:
        # The job's ID comes from the idempotency key, as a job service that deduplicates by key would give.
        job_id = execution.idempotency_key.replace("/", "-")
        _job_path(job_id).write_text(json.dumps({"order_id": order_id, "polls": 0}), encoding="utf-8")
        _log_run("report_started", execution, job_id=job_id)
    # A sync tool hands the job over by returning the coroutine; Stepwise awaits it on the event loop.
    return start_tool_task(job_id, poll_interval_seconds=1)


async def poll_report(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    """Read the report job once: done after `REPORT_POLLS` polls."""
    job_id = poll.tool_call.task_id or ""
    path = _job_path(job_id)
    job = json.loads(path.read_text(encoding="utf-8"))
    job["polls"] += 1
    path.write_text(json.dumps(job), encoding="utf-8")
    if job["polls"] < REPORT_POLLS:
        return ToolTaskPending(poll_interval_seconds=1)
    return ToolExecutionResult(f"the damage report of {job['order_id']} is ready ({job_id})")


def shipping_url_path(state_dir: Path) -> Path:
    """Where the test writes the URL of its inventory MCP server on Streamable HTTP."""
    return state_dir / "stepwise-desk-shipping-url"


def build_desk_flow(state_dir: Path) -> AgentSessionFlow:
    """The desk's Flow; given a URL in `shipping_url_path`, it has that server's tools as ``shipping__*``.

    Building it contacts no server.
    """
    tools: list[Any] = [
        function_tool(lookup_order, effect="read"),
        function_tool(cancel_order, effect="non_idempotent_write", requires_approval=False),
        function_tool(
            render_report, effect="idempotent_write", task_handler=ToolTaskHandler(poll=poll_report)
        ),
    ]
    url_path = shipping_url_path(state_dir)
    if url_path.exists():
        shipping = McpHttpServer("shipping", url_path.read_text(encoding="utf-8"), trust_annotations=True)
        tools.append(McpToolSource([shipping]))
    definition = AgentDefinition(
        name=AGENT_NAME,
        model=scripted_model(MODEL_NAME),
        instructions="You run the order desk.",
        tools=tools,
        planning_tool_choice="required",
    )
    options = AgentSessionOptions(built_in_tools=BUILT_IN_TOOL_NAMES, plan_mode_enabled=True)
    # As the core's tracing tests set it: pyright reads AgentTracing's cached property as unlike the
    # TraceEmitter protocol's plain attribute.
    options = dataclasses.replace(
        options,
        # The conventions require a provider on the invoke_agent root too, which starts before any model
        # call reports one, so the application names it.
        tracing=AgentTracing(
            agent_name=AGENT_NAME, provider_name="dex-scripted", record_message_content=True
        ),
    )
    return AgentSessionFlow(
        with_model_call_scope(StepwiseRunner(definition)), flow_type=FLOW_TYPE, options=options
    )
