"""Agents for the session-level tests of Pydantic AI specifics; the test and its Worker build them here."""

from __future__ import annotations

import os
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    matrix_session_options,
    mcp_inventory_server_command,
    with_model_call_scope,
)
from fastmcp.client import Client
from fastmcp.client.transports import StdioTransport
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.settings import ModelSettings

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.provider_matrix_spec import chat_model


class Forecast(BaseModel):
    """The structured output of the forecast agent."""

    city: str
    temperature_c: int


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the MCP agent logs its requests."""
    return state_dir / "mcp-requests.log"


PROVIDER_TIMEOUT_SECONDS = 1.0
"""The provider agent's client timeout: a first byte later than this fails the request."""


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """A plain agent with the matrix tools, the same agent with structured output, an MCP agent, and the
    plain agent on `OpenAIChatModel` behind the kit's scripted provider server, with a short client timeout
    and one client retry.
    """
    plain = Agent(ScriptedModel.from_script_store(), tools=list(MATRIX_TOOLS))
    forecast = Agent(ScriptedModel.from_script_store(), tools=list(MATRIX_TOOLS), output_type=Forecast)
    # The test process builds the Flows only to talk to sessions; the server runs when a Worker lists tools.
    state_dir = Path(os.environ.get(STATE_DIR_ENV, "."))
    server = mcp_inventory_server_command(mcp_log_path(state_dir))
    transport = StdioTransport(server.command, server.args, env=server.env, keep_alive=False)
    inventory = Agent(ScriptedModel.from_script_store(), toolsets=[MCPToolset(Client(transport))])
    provider = Agent(chat_model(), tools=list(MATRIX_TOOLS))
    provider_settings = ModelSettings(timeout=PROVIDER_TIMEOUT_SECONDS, max_retries=1)
    return (
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(plain)),
            flow_type="PydanticAiSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(forecast)),
            flow_type="PydanticAiForecast",
            options=matrix_session_options(),
        ),
        # The Worker trusts the kit's server, so every effect comes from its annotations or the default
        # (set_stock's destructiveHint asks for approval, which the shared scenario gives).
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(inventory, trust_mcp_annotations=True)),
            flow_type="PydanticAiMcp",
        ),
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(provider, model_settings=provider_settings)),
            flow_type="PydanticAiProvider",
            options=matrix_session_options(),
        ),
    )
