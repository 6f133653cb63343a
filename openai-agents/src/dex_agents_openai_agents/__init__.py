"""Durable OpenAI Agents SDK sessions on Dex: every model call and every tool call is its own Step.

Wrap an ordinary `agents.Agent` in `OpenAIAgentsRunner` and register it with
`dex_agents.AgentSessionFlow`; see the package README for the effect table and the limits.
"""

from dex_agents_openai_agents._effects import framework_effect
from dex_agents_openai_agents._gate import UndeferrableToolError
from dex_agents_openai_agents._hosted_mcp import HOSTED_MCP_APPROVED_RESULT
from dex_agents_openai_agents._run_events import HANDOFF_EVENT_TYPE
from dex_agents_openai_agents._runner import UNKNOWN_TOOL_POLICY, OpenAIAgentsRunner
from dex_agents_openai_agents._sdk_mcp import idempotency_key_meta
from dex_agents_openai_agents._settings import InstructionsForSettings, ModelForSettings
from dex_agents_openai_agents._state import OpenAIAgentsRunState

__all__ = [
    "HANDOFF_EVENT_TYPE",
    "HOSTED_MCP_APPROVED_RESULT",
    "UNKNOWN_TOOL_POLICY",
    "InstructionsForSettings",
    "ModelForSettings",
    "OpenAIAgentsRunState",
    "OpenAIAgentsRunner",
    "UndeferrableToolError",
    "framework_effect",
    "idempotency_key_meta",
]
