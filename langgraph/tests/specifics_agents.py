"""Agents for the session-level tests of LangChain specifics; the test and its Worker build them here."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path
from typing import Any

from dex_agents import AgentSessionFlow
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    matrix_session_options,
    with_model_call_scope,
)
from langchain.agents import create_agent
from langchain.agents.structured_output import ToolStrategy
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import inventory_client


class Forecast(BaseModel):
    """The structured output of the forecast agent."""

    city: str
    temperature_c: int


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the MCP agent logs its requests."""
    return state_dir / "mcp-requests.log"


def _list_mcp_tools() -> list[BaseTool]:
    state_dir = os.environ.get(STATE_DIR_ENV)
    # The test process lists the tools only to build its Flow objects; only a Worker's requests are logged.
    log = mcp_log_path(Path(state_dir)) if state_dir else Path(os.devnull)
    client = inventory_client(log)
    # Listing is async and Flows are built both inside the test's event loop and at a Worker's start, so
    # it runs on a thread of its own either way.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, client.get_tools()).result()


def _runner(tools: list[Any], **agent_options: Any) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            ScriptedChatModel(),
            tools=tools,
            middleware=[DexToolGate()],
            checkpointer=checkpointer,
            **agent_options,
        )

    return LangGraphRunner(build, allowed_msgpack_modules=[(__name__, "Forecast")])


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    """A plain agent with the matrix tools, the same agent with structured output, and an MCP agent."""
    return (
        AgentSessionFlow(
            with_model_call_scope(_runner(list(MATRIX_TOOLS))),
            flow_type="LangGraphSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(_runner(list(MATRIX_TOOLS), response_format=ToolStrategy(Forecast))),
            flow_type="LangGraphForecast",
            options=matrix_session_options(),
        ),
        # No explicit policies: every effect comes from the server's annotations or the default.
        AgentSessionFlow(with_model_call_scope(_runner(_list_mcp_tools())), flow_type="LangGraphMcp"),
    )
