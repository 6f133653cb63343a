"""A scripted agent whose tools are the inventory MCP server's, through `McpToolSource`, and its Worker child.

``McpScriptedRunner`` is ``ScriptedRunner`` with the source in place of its own tools: each model call lists
the source's tools (once per Worker, then from the cache), defers every call the script makes through
`McpToolSource.deferred_tool_call`, and runs it in its tool Step with `McpToolSource.call_tool`. It passes
the polls and cancellations of the tasks those calls start to the source, which is how any runner offers
MCP tasks: the source is the `ToolTaskPoller` and `ToolTaskCanceller` of the calls it owns.

The stdio server is a subprocess the Worker starts for each listing and each call, logging to the stack's
state directory. When the state directory holds a Streamable HTTP server's URL (`write_http_server_url`),
the agent also has that server's tools, as ``shipping__<tool>``.
"""

import dataclasses
import os
from pathlib import Path

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSnapshot,
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolEffect,
    ToolPolicy,
    ToolTaskCancellation,
    ToolTaskPoll,
    ToolTaskPollOutcome,
)
from dex_agents.mcp import McpHttpServer, McpServer, McpStdioServer, McpToolSource
from dex_agents.testing import (
    STATE_DIR_ENV,
    FileGate,
    ScriptedRunner,
    mcp_inventory_server_command,
    run_agent_worker,
)

#: A call whose ID ends with this holds its first attempt at a gate right after it saved its task handle.
HELD_AFTER_CHECKPOINT = "-held"
#: The event a held call writes between saving its task handle and reaching its gate.
TASK_HANDLE_SAVED_EVENT = "core_tests.mcp_task_handle_saved"


def tool_outputs(snapshot: AgentSnapshot) -> dict[str, str]:
    """The output the model saw for each tool call of the snapshot's stored messages."""
    return {
        message.tool_call_id: message.tool_output
        for message in snapshot.messages
        if message.tool_call_id and message.tool_output
    }


def mcp_log_path(state_dir: Path) -> Path:
    """The stdio inventory server's request log."""
    return state_dir / "mcp-requests.log"


def _http_url_path(state_dir: Path) -> Path:
    return state_dir / "mcp-http-url"


def write_http_server_url(state_dir: Path, url: str) -> None:
    """Give the agent built for ``state_dir`` a Streamable HTTP server named ``shipping`` at ``url``."""
    _http_url_path(state_dir).write_text(url, encoding="utf-8")


def checkpoint_gate(state_dir: Path, tool_call_id: str) -> FileGate:
    """The gate a held call (`HELD_AFTER_CHECKPOINT`) waits at once its task handle reached Dex."""
    return FileGate(state_dir, f"checkpoint-{tool_call_id}")


class McpScriptedRunner(ScriptedRunner):
    """``ScriptedRunner`` whose tools, and the tasks they start, come from an `McpToolSource`."""

    def __init__(self, source: McpToolSource, state_dir: Path) -> None:
        super().__init__(tools=())
        self._source = source
        self._state_dir = state_dir

    def agent_tool_names(self) -> tuple[str, ...]:
        # Its only tools are the servers', checked once this Worker listed them.
        return self._source.agent_tool_names()

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

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        call_id = call.tool_call.tool_call_id
        if call_id.endswith(HELD_AFTER_CHECKPOINT) and call.attempt == 1:
            gate = checkpoint_gate(self._state_dir, call_id)
            save, events = call.checkpoint_function, call.events

            async def save_then_hold(checkpoint: str) -> None:
                await save(checkpoint)
                # A heartbeat waits only for the Worker's output queue; the event travels behind it, so once
                # the event is readable the checkpoint reached Dex.
                events.write_event(TASK_HANDLE_SAVED_EVENT, {"tool_call_id": call_id})
                await gate.pass_through()

            call = dataclasses.replace(call, checkpoint_function=save_then_hold)
        return await self._source.call_tool(call)

    async def poll_tool_task(self, poll: ToolTaskPoll) -> ToolTaskPollOutcome:
        if self._source.owns_tool_call(poll.tool_call):
            return await self._source.poll_tool_task(poll)
        return await super().poll_tool_task(poll)

    async def cancel_tool_task(self, cancellation: ToolTaskCancellation) -> None:
        if self._source.owns_tool_call(cancellation.tool_call):
            await self._source.cancel_tool_task(cancellation)
        else:
            await super().cancel_tool_task(cancellation)


def build_mcp_flow(state_dir: Path) -> AgentSessionFlow:
    """The MCP agent's Flow, as the test and its Worker build it; building it contacts no server."""
    command = mcp_inventory_server_command(mcp_log_path(state_dir))
    servers: list[McpServer] = [
        McpStdioServer(
            "inventory",
            command.command,
            command.args,
            env=command.env,
            # The kit's own server: this Worker trusts its annotations (count_items is a read, and so on).
            trust_annotations=True,
            # place_order has no hints; this Worker knows it places one order per call and needs no approval.
            tool_policies={
                "place_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
            },
        )
    ]
    url_path = _http_url_path(state_dir)
    if url_path.exists():
        servers.append(
            McpHttpServer("shipping", url_path.read_text(encoding="utf-8"), trust_annotations=True)
        )
    source = McpToolSource(servers)
    return AgentSessionFlow(
        McpScriptedRunner(source, state_dir),
        flow_type="CoreMcp",
        options=AgentSessionOptions(tool_policies=source.merge_tool_policies()),
    )


if __name__ == "__main__":
    run_agent_worker([build_mcp_flow(Path(os.environ[STATE_DIR_ENV]))])
