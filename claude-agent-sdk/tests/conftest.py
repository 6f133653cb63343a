"""The one stack of the session feature tests: a devserver, a Worker serving `tests.feature_agents`, and the
core kit's inventory MCP server on Streamable HTTP, shared by every test module that asks for `features`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from dex_agents import AgentSessionClient, AgentSnapshot
from dex_agents.testing import (
    AgentTestStack,
    McpInventoryHttpServer,
    ScriptedResponse,
    ScriptedToolCall,
    start_mcp_inventory_http_server,
    wait_for_turn_end,
)

from tests.feature_agents import build_flows, http_url_file
from tests.matrix_spec import PACKAGE_DIR


@dataclass
class Features:
    """The feature stack and a session client per Flow of `tests.feature_agents`."""

    stack: AgentTestStack
    shipping: McpInventoryHttpServer
    settings: AgentSessionClient
    tool_requests: AgentSessionClient
    mcp: AgentSessionClient
    traced: AgentSessionClient
    official: AgentSessionClient

    async def start(
        self, sessions: AgentSessionClient, prefix: str, prompt: str, *responses: ScriptedResponse
    ) -> str:
        """Start a new session whose first turn the scripted model answers with ``responses``."""
        session = self.stack.new_session_id(prefix)
        self.stack.scripts.set_turns(session, [list(responses)])
        await sessions.start_session(session, prompt)
        return session

    async def one_call_turn(
        self, sessions: AgentSessionClient, prefix: str, prompt: str, call: ScriptedToolCall, answer: str
    ) -> tuple[str, AgentSnapshot]:
        """Run a new session's first turn, one tool call then ``answer``, to its end without a turn error."""
        session = await self.start(
            sessions, prefix, prompt, ScriptedResponse(tool_calls=(call,)), ScriptedResponse(text=answer)
        )
        done = await wait_for_turn_end(sessions, session, 1, timeout=120)
        assert done.state is not None and done.state.last_turn_error is None, done.state
        return session, done

    def last_model_input(self, session: str) -> str:
        """What the session's last model call saw, as the scripted model rendered it."""
        return self.stack.invocations.model_calls(session)[-1].model_input_text

    def shipping_requests(self) -> list[str]:
        """The Streamable HTTP inventory server's request log, one request a line."""
        log = _http_log(self.stack.state_dir)
        return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def _http_log(state_dir: Path) -> Path:
    return state_dir / "mcp-http-requests.log"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def features(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Features]:
    state_dir = tmp_path_factory.mktemp("features")
    async with await start_mcp_inventory_http_server(_http_log(state_dir)) as shipping:
        http_url_file(state_dir).write_text(shipping.url, encoding="utf-8")
        flows = build_flows(state_dir)
        async with AgentTestStack(state_dir, flows, "tests.feature_agents", worker_cwd=PACKAGE_DIR) as stack:
            await stack.start_worker()
            yield Features(stack, shipping, *(stack.sessions(flow) for flow in flows))
