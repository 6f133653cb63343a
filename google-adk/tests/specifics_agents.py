"""Applications for the session-level tests of ADK specifics; the test and its Worker build them here."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator
from pathlib import Path

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    matrix_session_options,
    run_scripted_tool,
    with_model_call_scope,
)
from google.adk.agents import BaseAgent, InvocationContext, LlmAgent
from google.adk.events import Event
from google.adk.tools.function_tool import FunctionTool
from pydantic import BaseModel

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedLlm
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


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the inventory agent logs its requests."""
    return state_dir / "mcp-requests.log"


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """An agent whose tools are read by default, one of which ADK confirms; a two-agent pipeline; an
    agent with an `output_schema` whose unlisted tools (ADK's `set_model_response`) need approval; and an
    agent with an MCP toolset on the test kit's inventory server, with no tool policies.
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
    structured = LlmAgent(
        name="order_status",
        model=ScriptedLlm(),
        instruction="Report an order's status.",
        tools=list(MATRIX_TOOLS),
        output_schema=OrderStatus,
    )
    state_dir = os.environ.get(STATE_DIR_ENV)
    # Only the Worker lists or calls the server's tools; the test process builds the Flows for their names.
    log = mcp_log_path(Path(state_dir)) if state_dir else Path(os.devnull)
    inventory = LlmAgent(
        name="inventory", model=ScriptedLlm(), instruction="Keep stock.", tools=[inventory_toolset(log)]
    )
    # Every tool without metadata is a read here, so only ADK's own confirmation asks for approval.
    options = AgentSessionOptions(default_tool_effect=ToolEffect.READ)
    return (
        AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(plain)), flow_type="GoogleAdkSpecifics", options=options
        ),
        AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(pipeline)), flow_type="GoogleAdkPipeline", options=options
        ),
        AgentSessionFlow(
            with_model_call_scope(GoogleAdkRunner(structured)),
            flow_type="GoogleAdkStructured",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(with_model_call_scope(GoogleAdkRunner(inventory)), flow_type="GoogleAdkInventory"),
    )
