"""An MCP-free stand-in for the adapters' MCP inventory agent, and the Worker child that serves it.

``ScriptedRunner`` with three plain tools named like the inventory server's; each appends the line the
server would log. Their effects come from explicit policies (``order_more`` has none, so it falls back to the
session's default, ``unclassified``), as an MCP adapter derives them from a trusted server's annotations:
``set_stock`` is idempotent and destructive there, so its policy asks for approval too.
"""

import os
from pathlib import Path

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing import STATE_DIR_ENV, ScriptedRunner, run_agent_worker, with_model_call_scope


def inventory_log_path(state_dir: Path) -> Path:
    """Where the inventory tools log their calls."""
    return state_dir / "inventory-requests.log"


def _log_call(tool_name: str) -> None:
    with inventory_log_path(Path(os.environ[STATE_DIR_ENV])).open("a") as log:
        log.write(f"tools/call {tool_name}\n")


async def count_items(sku: str) -> str:
    """Count the items of a SKU (a read)."""
    _log_call("count_items")
    return f"{sku}: 4 in stock"


async def set_stock(sku: str, count: int) -> str:
    """Set the stock of a SKU (an idempotent write)."""
    _log_call("set_stock")
    return f"{sku} set to {count}"


async def order_more(sku: str) -> str:
    """Order more of a SKU (unclassified)."""
    _log_call("order_more")
    return f"ordered more {sku}"


def build_inventory_flow() -> AgentSessionFlow:
    """The inventory agent's Flow, as the test and its Worker build it."""
    return AgentSessionFlow(
        with_model_call_scope(ScriptedRunner(tools=(count_items, set_stock, order_more))),
        flow_type="CoreInventory",
        options=AgentSessionOptions(
            tool_policies={
                "count_items": ToolPolicy(ToolEffect.READ),
                "set_stock": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE, requires_approval=True),
            }
        ),
    )


if __name__ == "__main__":
    run_agent_worker([build_inventory_flow()])
