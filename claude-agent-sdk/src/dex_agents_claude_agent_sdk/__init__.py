"""Durable Claude Agent SDK sessions on Dex: the Claude Code harness runs each turn, every write is a Step.

Wrap your `ClaudeAgentOptions` and `@tool` tools (and any `dex_agents.mcp.McpToolSource`) in
`ClaudeAgentRunner` and register it with `dex_agents.AgentSessionFlow`. The documentation site's Claude
Agent SDK pages (`docs/pages/frameworks/claude-agent-sdk/`) hold the effect table ("Permissions, effects
and policies") and the limits.
"""

from dex_agents_claude_agent_sdk._effects import framework_effect
from dex_agents_claude_agent_sdk._gate import INLINE_TOOL_REQUEST_MESSAGE
from dex_agents_claude_agent_sdk._runner import (
    ISOLATION_ENV,
    REFUSED_TOOL_CALL_MESSAGE,
    ClaudeAgentRunner,
    OptionsFactory,
)
from dex_agents_claude_agent_sdk._settings import InstructionsForSettings, ModelForSettings
from dex_agents_claude_agent_sdk._state import ClaudeRunState, PendingToolUse, TranscriptStore

__all__ = [
    "INLINE_TOOL_REQUEST_MESSAGE",
    "ISOLATION_ENV",
    "REFUSED_TOOL_CALL_MESSAGE",
    "ClaudeAgentRunner",
    "ClaudeRunState",
    "InstructionsForSettings",
    "ModelForSettings",
    "OptionsFactory",
    "PendingToolUse",
    "TranscriptStore",
    "framework_effect",
]
