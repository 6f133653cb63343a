"""Applications for the session-level tests of ADK specifics; the test and its Worker build them here."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

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
from dex_agents.otel import AgentTracing
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    current_model_call,
    matrix_session_options,
    model_call_scope,
    run_scripted_tool,
    with_model_call_scope,
)
from google.adk.agents import BaseAgent, InvocationContext, LlmAgent
from google.adk.agents.run_config import (
    RunConfig,
    StreamingMode,  # pyright: ignore[reportPrivateImportUsage]
    ToolThreadPoolConfig,
)
from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.tools.function_tool import FunctionTool
from google.genai import types
from opentelemetry import trace
from pydantic import BaseModel

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedAnswer, ScriptedLlm, ScriptedResponse
from tests.support import inventory_toolset


class OneAfterAnother(BaseAgent):
    """A custom agent that runs its sub-agents in turn: two model calls for one user message."""

    async def _run_async_impl(self, ctx: InvocationContext) -> AsyncGenerator[Event, None]:
        for agent in self.sub_agents:
            async for event in agent.run_async(ctx):
                yield event


async def purge_order(order_id: str) -> str:
    """Delete every record of an order (ADK asks for a confirmation first).

    Args:
        order_id: The order to purge.
    """
    return await run_scripted_tool("purge_order", {"order_id": order_id})


class OrderStatus(BaseModel):
    """The structured answer of the order-status agent."""

    order_id: str
    status: str


def state_dir() -> Path | None:
    """The stack's state directory in the Worker; `None` in the test process, which only names Flows."""
    value = os.environ.get(STATE_DIR_ENV)
    return Path(value) if value else None


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the inventory agent logs its requests."""
    return state_dir / "mcp-requests.log"


class SettingsReportingLlm(ScriptedLlm):
    """Answers with its own name and the instructions it was given, so a test sees what a turn ran with."""

    model: str = "house-model"

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        instruction = cast(object, llm_request.config.system_instruction)  # pyright: ignore[reportUnknownMemberType]
        return ScriptedResponse(text=f"{self.model} read: {instruction}")


def model_for_settings(settings: Mapping[str, object]) -> SettingsReportingLlm | None:
    """The model a session's ``model`` setting names; an application would map names to its models."""
    name = settings.get("model")
    if name is None:
        return None
    if not isinstance(name, str):
        raise ValueError(f"the setting 'model' must be a model name, not {name!r}")
    return SettingsReportingLlm(model=name)


def instructions_for_settings(settings: Mapping[str, object]) -> str | None:
    tone = settings.get("tone")
    return None if tone is None else f"Answer in a {tone} tone."


def refund_ledger(directory: Path) -> Path:
    return directory / "warehouse-refunds.jsonl"


def refund_to_warehouse(order_id: str) -> str:
    """Refund an order once the warehouse that takes the return is known (asks the user which).

    Args:
        order_id: The order to refund.
    """
    warehouse = ask_user_input(
        "Which warehouse takes the return?", choices=["Berlin", "Lyon"], allows_free_text=False
    )
    execution = current_tool_execution()
    directory = state_dir()
    assert execution is not None and directory is not None
    entry = {
        "order_id": order_id,
        "warehouse": warehouse,
        "key": execution.idempotency_key,
        "thread": threading.current_thread().name,
    }
    with refund_ledger(directory).open("a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(entry) + "\n")
    return f"refunded {order_id} through {warehouse}"


def export_jobs(directory: Path) -> Path:
    """Where the export service keeps one file per job, as a remote service would."""
    return directory / "exports"


async def export_orders(month: str) -> str:
    """Export a month's orders: a remote job that the session polls until it is done.

    Args:
        month: The month, such as 2026-11.
    """
    execution = current_tool_execution()
    directory = state_dir()
    assert execution is not None and directory is not None
    job = started_tool_task()
    if job is None:
        job = f"export-{uuid.uuid4().hex[:8]}"
        export_jobs(directory).mkdir(exist_ok=True)
        (export_jobs(directory) / f"{job}.json").write_text(json.dumps({"month": month, "polls": 0}))
    await start_tool_task(job, poll_interval_seconds=1)


async def poll_export(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    """One look at an export job: done on its second poll."""
    directory = state_dir()
    assert directory is not None and poll.tool_call.task_id is not None
    path = export_jobs(directory) / f"{poll.tool_call.task_id}.json"
    job = json.loads(path.read_text())
    job["polls"] += 1
    path.write_text(json.dumps(job))
    if job["polls"] < 2:
        return ToolTaskPending(poll_interval_seconds=1)
    return ToolExecutionResult(f"export of {job['month']} ready after {job['polls']} polls")


TRANSFER_CALL_ID = "transfer-1"
"""The ID the transfer tests give the front desk's `transfer_to_agent` call."""


class TransferredToLlm(ScriptedLlm):
    """The sub-agent's scripted model, which counts the front desk's transfer as answered.

    The runner carries out a transfer in the model Step, so it has no record; ADK shows the sub-agent the
    transfer as a quoted transcript without the call's ID. The session's script picks the first response
    whose calls are not all recorded, so this model adds the transfer's ID, as the kit's provider server
    adds the IDs of the calls a request answers.
    """

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        scope = current_model_call()
        if scope is None:
            return await super().choose_response(llm_request)
        answered = scope.recorded_tool_call_ids | {TRANSFER_CALL_ID}
        with model_call_scope(dataclasses.replace(scope, recorded_tool_call_ids=answered)):
            return await super().choose_response(llm_request)


class ModelClientTracingLlm(ScriptedLlm):
    """The session's scripted model, inside a span of its own, as a provider's HTTP client would start."""

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        with trace.get_tracer("tests.model_client").start_as_current_span(MODEL_CLIENT_SPAN):
            return await super().choose_response(llm_request)


MODEL_CLIENT_SPAN = "POST /v1/models:generate"
"""The span the traced agent's model client starts for every model call."""
TRACED_INSTRUCTION = "You handle orders."
TRACED_TEMPERATURE = 0.25
TRACED_MAX_TOKENS = 512


@dataclass(frozen=True)
class SpecificsFlows:
    plain: AgentSessionFlow
    pipeline: AgentSessionFlow
    transfer: AgentSessionFlow
    structured: AgentSessionFlow
    inventory: AgentSessionFlow
    settings: AgentSessionFlow
    tool_requests: AgentSessionFlow
    traced: AgentSessionFlow

    @property
    def all(self) -> Sequence[AgentSessionFlow]:
        return (
            self.plain,
            self.pipeline,
            self.transfer,
            self.structured,
            self.inventory,
            self.settings,
            self.tool_requests,
            self.traced,
        )


def build_flows() -> SpecificsFlows:
    """An agent whose tools are read by default, one of which ADK confirms; a two-agent pipeline; a front
    desk that transfers to its billing sub-agent; an
    agent with an `output_schema` whose unlisted tools (ADK's `set_model_response`) need approval; an
    agent with an MCP toolset on the test kit's inventory server, with no tool policies; an agent whose
    model and instructions come from the session settings; an agent whose tools ask the user and start a
    remote task; and the matrix tools' agent with tracing on.
    """
    plain = LlmAgent(
        name="orders",
        model=ScriptedLlm(),
        instruction="You handle orders.",
        tools=[*MATRIX_TOOLS, FunctionTool(purge_order, require_confirmation=True)],
    )
    pipeline = OneAfterAnother(
        name="pipeline",
        sub_agents=[
            LlmAgent(name="drafter", model=ScriptedLlm(), instruction="Draft."),
            LlmAgent(name="reviewer", model=ScriptedLlm(), instruction="Review."),
        ],
    )
    # The front desk has no tool of its own: it hands billing questions to the billing agent.
    front_desk = LlmAgent(
        name="front_desk",
        model=ScriptedLlm(),
        instruction="Route the customer.",
        sub_agents=[
            LlmAgent(
                name="billing",
                model=TransferredToLlm(),
                instruction="Handle billing.",
                description="Purges and refunds orders.",
                tools=[FunctionTool(purge_order, require_confirmation=True)],
            )
        ],
    )
    structured = LlmAgent(
        name="order_status",
        model=ScriptedLlm(),
        instruction="Report an order's status.",
        tools=list(MATRIX_TOOLS),
        output_schema=OrderStatus,
    )
    directory = state_dir()
    # Only the Worker lists or calls the server's tools; the test process builds the Flows for their names.
    log = mcp_log_path(directory) if directory else Path(os.devnull)
    inventory = LlmAgent(
        name="inventory", model=ScriptedLlm(), instruction="Keep stock.", tools=[inventory_toolset(log)]
    )
    settings = GoogleAdkRunner(
        LlmAgent(name="orders", model=SettingsReportingLlm(), instruction="You handle orders."),
        model_for_settings=model_for_settings,
        instructions_for_settings=instructions_for_settings,
    )
    tool_requests = GoogleAdkRunner(
        LlmAgent(
            name="back_office",
            model=ScriptedLlm(),
            instruction="You refund and export orders.",
            tools=[refund_to_warehouse, export_orders],
        ),
        # Synchronous tools run on ADK's tool thread pool, which copies the current Dex tool call along.
        run_config=RunConfig(
            streaming_mode=StreamingMode.SSE, tool_thread_pool_config=ToolThreadPoolConfig()
        ),
        tool_tasks=ToolTaskHandlers({"export_orders": ToolTaskHandler(poll=poll_export)}),
    )
    traced = LlmAgent(
        name="orders",
        model=ModelClientTracingLlm(),
        instruction=TRACED_INSTRUCTION,
        tools=list(MATRIX_TOOLS),
        # Request parameters the chat spans report, as the request's GenerateContentConfig holds them.
        generate_content_config=types.GenerateContentConfig(
            temperature=TRACED_TEMPERATURE, max_output_tokens=TRACED_MAX_TOKENS
        ),
    )
    # Every tool without metadata is a read here, so only ADK's own confirmation asks for approval.
    options = AgentSessionOptions(default_tool_effect=ToolEffect.READ)
    return SpecificsFlows(
        plain=AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(plain)), flow_type="GoogleAdkSpecifics", options=options
        ),
        pipeline=AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(pipeline)), flow_type="GoogleAdkPipeline", options=options
        ),
        transfer=AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(front_desk)), flow_type="GoogleAdkTransfer", options=options
        ),
        structured=AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(structured)),
            flow_type="GoogleAdkStructured",
            options=matrix_session_options(),
        ),
        # The Worker trusts the kit's server, so every effect comes from its annotations or the default
        # (set_stock's destructiveHint asks for approval, which the shared scenario gives).
        inventory=AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(inventory, trust_mcp_annotations=True)),
            flow_type="GoogleAdkInventory",
        ),
        settings=AgentSessionFlow(settings, flow_type="GoogleAdkSettings"),
        tool_requests=AgentSessionFlow(
            with_model_call_scope(tool_requests),
            flow_type="GoogleAdkToolRequests",
            options=AgentSessionOptions(
                tool_policies={
                    "refund_to_warehouse": ToolPolicy(
                        ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False
                    ),
                    "export_orders": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
                }
            ),
        ),
        traced=AgentSessionFlow(
            # The runner's default run config streams (StreamingMode.SSE).
            with_model_call_scope(GoogleAdkRunner(traced)),
            flow_type="GoogleAdkTraced",
            options=AgentSessionOptions(
                default_tool_effect=ToolEffect.READ,
                # The core's TraceEmitter protocol wants a plain bool where AgentTracing has a cached
                # property, which pyright refuses; the Flow accepts it at runtime.
                # The invoke_agent root starts before any model call reports a provider: the Flow names it.
                tracing=AgentTracing(  # pyright: ignore[reportArgumentType]
                    agent_name="orders", provider_name="dex.scripted", record_message_content=True
                ),
            ),
        ),
    )
