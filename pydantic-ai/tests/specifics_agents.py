"""Agents for the session-level tests of Pydantic AI specifics; the test and its Worker build them here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dex_agents import AgentSessionFlow
from dex_agents.testing import MATRIX_TOOLS, STATE_DIR_ENV, matrix_session_options, with_model_call_scope
from fastmcp.client import Client
from fastmcp.client.transports import StdioTransport
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

from dex_agents_pydantic_ai import PydanticAiRunner
from tests.scripted_model import scripted_function_model


class Forecast(BaseModel):
    """The structured output of the forecast agent."""

    city: str
    temperature_c: int


MCP_SERVER_SCRIPT = Path(__file__).with_name("mcp_inventory_server.py")


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the MCP agent logs its requests."""
    return state_dir / "mcp-requests.log"


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """A plain agent with the matrix tools, the same agent with structured output, and an MCP agent."""
    plain = Agent(scripted_function_model(), tools=list(MATRIX_TOOLS))
    forecast = Agent(scripted_function_model(), tools=list(MATRIX_TOOLS), output_type=Forecast)
    # The test process builds the Flows only to talk to sessions; the server runs when a Worker lists tools.
    state_dir = Path(os.environ.get(STATE_DIR_ENV, "."))
    transport = StdioTransport(
        command=sys.executable,
        args=[str(MCP_SERVER_SCRIPT)],
        env={"MCP_TEST_LOG": str(mcp_log_path(state_dir))},
        keep_alive=False,
    )
    inventory = Agent(scripted_function_model(), toolsets=[MCPToolset(Client(transport))])
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
        # No explicit policies: every effect comes from the server's annotations or the default.
        AgentSessionFlow(with_model_call_scope(PydanticAiRunner(inventory)), flow_type="PydanticAiMcp"),
    )
