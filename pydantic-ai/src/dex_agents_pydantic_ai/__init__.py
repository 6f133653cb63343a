"""Durable Pydantic AI agent sessions on Dex: every model call and every tool call is its own Step.

Wrap an ordinary `pydantic_ai.Agent` in `PydanticAiRunner` and register it with
`dex_agents.AgentSessionFlow`; see the package README for the effect table, long sessions (compaction
and session settings) and the limits.
`dex_agents_pydantic_ai.testing` holds `ScriptedModel`, a Pydantic AI model for offline development.
"""

# The core's wire texts of compaction, re-exported: this package named them before the core did.
from dex_agents import CONTEXT_SUMMARY_HEADER, DEFAULT_SUMMARY_INSTRUCTIONS

from dex_agents_pydantic_ai._compaction import CHARACTERS_PER_TOKEN, TokenEstimator, estimate_tokens
from dex_agents_pydantic_ai._effects import framework_effect
from dex_agents_pydantic_ai._gate import ToolCallInModelStepError
from dex_agents_pydantic_ai._runner import UNKNOWN_TOOL_POLICY, PydanticAiRunner
from dex_agents_pydantic_ai._settings import InstructionsForSettings, ModelForSettings
from dex_agents_pydantic_ai._state import PydanticAiRunState

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "CONTEXT_SUMMARY_HEADER",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "UNKNOWN_TOOL_POLICY",
    "InstructionsForSettings",
    "ModelForSettings",
    "PydanticAiRunState",
    "PydanticAiRunner",
    "TokenEstimator",
    "ToolCallInModelStepError",
    "estimate_tokens",
    "framework_effect",
]
