"""The shared MCP inventory scenario against an MCP-free agent: ``ScriptedRunner`` with like-named tools."""

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from dex_agents import AgentSessionClient
from dex_agents.testing import AgentTestStack, run_mcp_inventory_scenario
from tests.agents import CORE_DIR
from tests.inventory_agent import build_inventory_flow, inventory_log_path

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Inventory:
    stack: AgentTestStack
    sessions: AgentSessionClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def inventory(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Inventory]:
    flow = build_inventory_flow()
    async with AgentTestStack(
        tmp_path_factory.mktemp("inventory"),
        [flow],
        "tests.inventory_agent",
        worker_cwd=CORE_DIR,
    ) as stack:
        await stack.start_worker()
        yield Inventory(stack, stack.sessions(flow))


async def test_the_mcp_inventory_scenario_passes_with_one_call_per_tool_and_effects_from_policies(
    inventory: Inventory,
) -> None:
    stack = inventory.stack
    session_id = stack.new_session_id("inventory")
    log = inventory_log_path(stack.state_dir)

    run = await run_mcp_inventory_scenario(inventory.sessions, stack, session_id, log)

    assert sorted(run.requests) == ["tools/call count_items", "tools/call order_more", "tools/call set_stock"]
    assert run.snapshot.messages[-1].text == "Stock updated."
    assert run.snapshot.tool_calls == (), "a completed turn keeps no tool call records"
