"""A scripted agent whose tools are the inventory MCP server's, through `McpToolSource`, and its Worker child.

``McpScriptedRunner`` is ``ScriptedRunner`` with the source in place of its own tools: each model call lists
the source's tools (once per Worker, then from the cache), defers every call the script makes through
`McpToolSource.deferred_tool_call`, and runs it in its tool Step with `McpToolSource.call_tool`. The server
is a stdio subprocess the Worker starts for each listing and each call, logging to the stack's state
directory.
"""

import dataclasses
import os
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.mcp import McpStdioServer, McpToolSource
from dex_agents.testing import STATE_DIR_ENV, ScriptedRunner, mcp_inventory_server_command, run_agent_worker


def mcp_log_path(state_dir: Path) -> Path:
    """The inventory server's request log."""
    return state_dir / "mcp-requests.log"


class McpScriptedRunner(ScriptedRunner):
    """``ScriptedRunner`` whose tools come from an `McpToolSource`."""

    def __init__(self, source: McpToolSource) -> None:
        super().__init__(tools=())
        self._source = source

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        await self._source.list_tools()
        outcome = await super().run_model_step(turn)
        if not isinstance(outcome, ToolCallsRequested):
            return outcome
        calls = [
            self._source.deferred_tool_call(
                turn, tool_call_id=call.tool_call_id, tool_name=call.tool_name, arguments=call.arguments
            )
            for call in outcome.tool_calls
        ]
        return dataclasses.replace(outcome, tool_calls=calls)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        return await self._source.call_tool(call)


def build_mcp_flow(state_dir: Path) -> AgentSessionFlow:
    """The MCP agent's Flow, as the test and its Worker build it; building it contacts no server."""
    command = mcp_inventory_server_command(mcp_log_path(state_dir))
    inventory = McpStdioServer(
        "inventory",
        command.command,
        command.args,
        env=command.env,
        # place_order has no hints; this Worker knows it places one order per call and needs no approval.
        tool_policies={"place_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)},
    )
    source = McpToolSource([inventory])
    return AgentSessionFlow(
        McpScriptedRunner(source),
        flow_type="CoreMcp",
        options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
    )


if __name__ == "__main__":
    run_agent_worker([build_mcp_flow(Path(os.environ[STATE_DIR_ENV]))])
