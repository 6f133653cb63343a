"""The benchmark's agent: two model calls around one read tool, answered by the package's scripted API.

The real Claude Code CLI runs the turn against `ScriptedClaudeApi` (the Messages API it calls at
`ANTHROPIC_BASE_URL`, on a loopback port of the process that runs the CLI), so the figures are the CLI's,
the SDK's, the adapter's and the engine's cost, not model latency. The read runs inline in the CLI, as
this adapter runs every read that needs no approval: the whole turn is one CLI run, one `RunModel` Step.
"""

from __future__ import annotations

import json
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, ToolAnnotations, tool
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from dex_agents_claude_agent_sdk.testing import ApiReply, ApiToolUse, ScriptedClaudeApi

SYSTEM_PROMPT = "You run the order desk."
ANSWER = "Order A-1 has shipped."


@tool("lookup_order", "Look up an order.", {"order_id": str}, annotations=ToolAnnotations(readOnlyHint=True))
async def lookup_order(arguments: dict[str, Any]) -> dict[str, Any]:
    """Look up an order."""
    text = json.dumps({"order_id": arguments["order_id"], "status": "shipped"})
    return {"content": [{"type": "text", "text": text}]}


TOOLS: list[SdkMcpTool[Any]] = [lookup_order]


def build_api() -> ScriptedClaudeApi:
    """Asks for the lookup, then answers; each reply follows from what the request's conversation holds."""
    lookup = ApiToolUse("lookup-1", "lookup_order", {"order_id": "A-1"})
    return ScriptedClaudeApi(
        [ApiReply(text="Let me look that up.", tool_uses=[lookup]), ApiReply(text=ANSWER)]
    )


def base_options() -> ClaudeAgentOptions:
    """The agent's own options, as an application writes them (no settings files)."""
    return ClaudeAgentOptions(system_prompt=SYSTEM_PROMPT, setting_sources=[])


def build_runner(api: ScriptedClaudeApi, *, inline_read_tools: bool = True) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(api.options(base_options()), TOOLS, inline_read_tools=inline_read_tools)


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        build_runner(build_api()),
        flow_type="ClaudeAgentSdkBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
