"""Agents for the session-level tests of the SDK specifics; the test and its Worker build them here."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from agents import (
    Agent,
    GuardrailFunctionOutput,
    HostedMCPTool,
    RunContextWrapper,
    Tool,
    TResponseInputItem,
    function_tool,
    handoff,
    input_guardrail,
)
from agents.agent import AgentBase
from agents.mcp import MCPServerStdio
from dex_agents import AgentSessionFlow
from dex_agents.testing import (
    MATRIX_TOOLS,
    STATE_DIR_ENV,
    matrix_session_options,
    mcp_inventory_server_command,
    with_model_call_scope,
)
from mcp.types import CallToolResult
from mcp.types import Tool as MCPTool
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall

from dex_agents_openai_agents import OpenAIAgentsRunner
from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel, call_item, text_item


def mcp_log_path(state_dir: Path) -> Path:
    """Where the MCP server of the MCP agent logs its requests."""
    return state_dir / "mcp-requests.log"


class WorkerStdioServer(MCPServerStdio):
    """A stdio MCP server that connects on first use, in the Worker's event loop, and stays connected.

    `run_agent_worker` owns the Worker's event loop, so the test cannot `async with server:` around it as an
    application does. One task holds the connection open (and closes it when the loop shuts down); every
    Step uses the connected session.
    """

    _connected: asyncio.Future[None] | None = None
    _holder: asyncio.Task[None] | None = None

    async def _ensure_connected(self) -> None:
        if self._connected is None:
            self._connected = asyncio.get_running_loop().create_future()
            self._holder = asyncio.create_task(self._hold(self._connected))
        await asyncio.shield(self._connected)

    async def _hold(self, connected: asyncio.Future[None]) -> None:
        try:
            async with self:
                connected.set_result(None)
                await asyncio.Event().wait()
        except BaseException as error:
            if not connected.done():
                connected.set_exception(error)
            raise

    async def list_tools(
        self, run_context: RunContextWrapper[Any] | None = None, agent: AgentBase[Any] | None = None
    ) -> list[MCPTool]:
        await self._ensure_connected()
        return await super().list_tools(run_context, agent)

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any] | None, meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        await self._ensure_connected()
        return await super().call_tool(tool_name, arguments, meta)


async def _triage_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del items, offered
    return ScriptedAnswer(
        [call_item("transfer_to_billing", {}, "handoff-1")], input_tokens=11, output_tokens=3
    )


async def _billing_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del offered
    looked_up = any(
        cast(Mapping[str, Any], item).get("type") == "function_call_output"
        and cast(Mapping[str, Any], item).get("call_id") == "lookup-1"
        for item in items
    )
    if not looked_up:
        return ScriptedAnswer(
            [
                text_item("Billing here, checking A-1."),
                call_item("lookup_order", {"order_id": "A-1"}, "lookup-1"),
            ],
            input_tokens=13,
            output_tokens=4,
        )
    return ScriptedAnswer([text_item("Billing: order A-1 is paid.")], input_tokens=17, output_tokens=5)


def hosted_git_tool() -> HostedMCPTool:
    """A hosted git MCP server whose every tool call needs approval (at the provider)."""
    return HostedMCPTool(
        tool_config={
            "type": "mcp",
            "server_label": "git",
            "server_url": "https://git.invalid/mcp",
            "require_approval": "always",
        }
    )


async def hosted_git_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    """The provider's side of `hosted_git_tool`: it asks to delete branch ``old``, then runs or drops it.

    After an approval it returns the hosted call's ``mcp_call`` item with the server's output; after a
    rejection it repeats the reason the request carried.
    """
    del offered
    last = cast(Mapping[str, Any], items[-1])
    if last.get("type") != "mcp_approval_response":
        request = McpApprovalRequest(
            id=f"mcpr-{len(items)}",
            type="mcp_approval_request",
            name="delete_branch",
            arguments='{"branch":"old"}',
            server_label="git",
        )
        return ScriptedAnswer([text_item("Asking first."), request])
    if last.get("approve") is not True:
        return ScriptedAnswer([text_item(f"Not deleted: {last.get('reason')}")])
    call = McpCall(
        id=f"mcp-{len(items)}",
        type="mcp_call",
        name="delete_branch",
        arguments='{"branch":"old"}',
        server_label="git",
        output="branch old deleted",
    )
    return ScriptedAnswer([call, text_item("Deleted branch old.")])


@input_guardrail
async def no_passwords(
    context: RunContextWrapper[Any], agent: Agent[Any], items: str | list[TResponseInputItem]
) -> GuardrailFunctionOutput:
    """Trips when the user's last message asks for a password."""
    last = items if isinstance(items, str) else str(cast(Mapping[str, Any], items[-1]).get("content", ""))
    return GuardrailFunctionOutput(output_info=None, tripwire_triggered="password" in last.lower())


def build_flows() -> tuple[AgentSessionFlow, ...]:
    """A plain agent with the matrix tools, a triage agent that hands off, a guarded agent, an MCP agent,
    and an agent with a hosted MCP server that asks for approval."""
    tools: list[Tool] = [function_tool(tool) for tool in MATRIX_TOOLS]
    plain = Agent[None](name="orders", model=ScriptedResponsesModel.from_script_store(), tools=tools)
    billing = Agent[None](name="billing", model=ScriptedResponsesModel(_billing_answer), tools=tools)
    triage = Agent[None](
        name="triage", model=ScriptedResponsesModel(_triage_answer), handoffs=[handoff(billing)]
    )
    guarded = Agent[None](
        name="guarded",
        model=ScriptedResponsesModel.from_script_store(),
        tools=tools,
        input_guardrails=[no_passwords],
    )
    state_dir = Path(os.environ.get(STATE_DIR_ENV, "."))
    command = mcp_inventory_server_command(mcp_log_path(state_dir))
    inventory = WorkerStdioServer(
        params={"command": command.command, "args": command.args, "env": {**os.environ, **command.env}},
        name="inventory",
        # The SDK's 5 s default covers starting the server process, which a loaded CI machine can exceed.
        client_session_timeout_seconds=30,
    )
    stock = Agent[None](
        name="stock", model=ScriptedResponsesModel.from_script_store(), mcp_servers=[inventory]
    )
    return (
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(plain)),
            flow_type="OpenAIAgentsSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(triage)),
            flow_type="OpenAIAgentsHandoff",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(guarded)),
            flow_type="OpenAIAgentsGuarded",
            options=matrix_session_options(),
        ),
        # The Worker trusts the kit's server, so every effect comes from its annotations or the default
        # (set_stock's destructiveHint asks for approval, which the shared scenario gives).
        AgentSessionFlow(
            with_model_call_scope(OpenAIAgentsRunner(stock, trust_mcp_annotations=True)),
            flow_type="OpenAIAgentsMcp",
        ),
        AgentSessionFlow(
            OpenAIAgentsRunner(
                Agent[None](
                    name="git", model=ScriptedResponsesModel(hosted_git_answer), tools=[hosted_git_tool()]
                )
            ),
            flow_type="OpenAIAgentsHostedMcp",
        ),
    )
