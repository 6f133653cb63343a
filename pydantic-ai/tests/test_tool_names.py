"""`agent_tool_names`: the names of the agent's tools, for the session's check of its tool policies."""

from __future__ import annotations

import dataclasses

from dex_agents.mcp import McpStdioServer, McpToolSource
from dex_agents.testing import SessionSide
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import DynamicToolset, ExternalToolset, FunctionToolset

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


def refund_order(order_id: str) -> str:
    """Refund an order."""
    return f"{order_id} refunded"


def track_parcel(parcel_id: str) -> str:
    """Track a parcel."""
    return f"{parcel_id} is on its way"


class Refund(BaseModel):
    order_id: str


def test_the_names_are_the_agents_tools_as_the_model_calls_them_without_output_tools() -> None:
    billing = FunctionToolset([refund_order]).prefixed("billing")
    parcels = FunctionToolset([track_parcel]).renamed({"where_is": "track_parcel"})
    pick_date = ToolDefinition(name="pick_date", parameters_json_schema={"type": "object"})
    client_side = ExternalToolset([pick_date])
    agent = Agent(
        ScriptedModel(["unused"]),
        tools=[lookup_order],
        toolsets=[billing, parcels.filtered(lambda ctx, tool_def: True), client_side],
        output_type=Refund,
    )

    names = PydanticAiRunner(agent).agent_tool_names()

    assert names == {"lookup_order", "billing_refund_order", "where_is", "pick_date"}


async def test_a_toolset_known_only_at_run_time_gives_none_until_a_model_request_offered_it() -> None:
    model = ScriptedModel(["Done."])

    def parcels(ctx: RunContext[None]) -> FunctionToolset[None]:
        del ctx
        return FunctionToolset([track_parcel])

    agent = Agent(model, deps_type=type(None), tools=[lookup_order], toolsets=[DynamicToolset(parcels)])

    runner = PydanticAiRunner(agent)
    assert runner.agent_tool_names() is None
    session = SessionSide()
    session.start_turn(runner.build_user_message("Where is it?"))

    await runner.run_model_step(dataclasses.replace(session.context(), enabled_built_in_tools=("ask_user",)))

    # The request offered ask_user too, but the session's built-ins are the session's to add.
    assert model.calls[-1].tool_names == ("lookup_order", "track_parcel", "ask_user")
    assert runner.agent_tool_names() == {"lookup_order", "track_parcel"}


def test_an_mcp_tool_source_adds_the_tools_it_listed_and_none_before_it_lists() -> None:
    source = McpToolSource([McpStdioServer("inventory", "never-started", [])])
    runner = PydanticAiRunner(Agent(ScriptedModel(["unused"]), tools=[lookup_order]), mcp_tools=source)

    # The session counts policies for a server the source has not listed yet as real until it lists.
    assert runner.agent_tool_names() == {"lookup_order"}
