"""Durable Pydantic AI agent sessions on Dex: every model call and every tool call is its own Step.

Wrap an ordinary `pydantic_ai.Agent` in `PydanticAiRunner` and register it with
`dex_agents.AgentSessionFlow`; see the package README for the effect table and the limits.
`dex_agents_pydantic_ai.testing` holds `ScriptedModel`, a Pydantic AI model for offline development.
"""

from dex_agents_pydantic_ai._effects import framework_effect
from dex_agents_pydantic_ai._gate import ToolCallInModelStepError
from dex_agents_pydantic_ai._runner import UNKNOWN_TOOL_POLICY, PydanticAiRunner
from dex_agents_pydantic_ai._state import PydanticAiRunState

__all__ = [
    "UNKNOWN_TOOL_POLICY",
    "PydanticAiRunState",
    "PydanticAiRunner",
    "ToolCallInModelStepError",
    "framework_effect",
]
