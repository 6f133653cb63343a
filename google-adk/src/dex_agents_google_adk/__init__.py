"""Durable Google ADK agent sessions on Dex: every model call and every tool call is its own Step.

Wrap an ordinary ADK `App` (or root agent) in `GoogleAdkRunner` and register it with
`dex_agents.AgentSessionFlow`; see the documentation's Google ADK pages (`docs/pages/frameworks/google-adk/`)
for the effect table and the limits.
`dex_agents_google_adk.testing` holds `ScriptedLlm`, an ADK model for offline development and tests.
"""

from dex_agents_google_adk._app import AdkServices
from dex_agents_google_adk._effects import framework_effect
from dex_agents_google_adk._gate import DexToolGate, SecondModelCallError, UnrecordedConfirmationError
from dex_agents_google_adk._runner import (
    AGENT_TRANSFER_EVENT_TYPE,
    DEFAULT_USER_ID,
    UNKNOWN_TOOL_POLICY,
    GoogleAdkRunner,
)
from dex_agents_google_adk._settings import InstructionsForSettings, ModelForSettings
from dex_agents_google_adk._state import GoogleAdkRunState
from dex_agents_google_adk._tool_execution import McpCallInterruptedError
from dex_agents_google_adk._tracing import ADK_INSTRUMENTATION_SCOPE, without_adk_spans

__all__ = [
    "ADK_INSTRUMENTATION_SCOPE",
    "AGENT_TRANSFER_EVENT_TYPE",
    "DEFAULT_USER_ID",
    "UNKNOWN_TOOL_POLICY",
    "AdkServices",
    "DexToolGate",
    "GoogleAdkRunState",
    "GoogleAdkRunner",
    "InstructionsForSettings",
    "McpCallInterruptedError",
    "ModelForSettings",
    "SecondModelCallError",
    "UnrecordedConfirmationError",
    "framework_effect",
    "without_adk_spans",
]
