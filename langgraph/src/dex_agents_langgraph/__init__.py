"""Durable LangChain `create_agent` and LangGraph sessions on Dex: every model call and tool call is a Step.

Build your agent with `DexToolGate()` as its first middleware (or your own graph with `dex_tool_node` and
`route_tool_calls`), wrap the graph factory in `LangGraphRunner`, and register it with
`dex_agents.AgentSessionFlow`; see the documentation's LangChain and LangGraph pages
(`docs/pages/frameworks/langgraph/`) for the effect table and the limits. The runner
also offers the session's built-in tools and an `McpToolSource`'s tools, and chooses each turn's model and
instructions from its session settings (`model_for_settings`, `instructions_for_settings`); a graph of your
own reads them with `dex_session_tools()` and `current_session_settings()`.
`dex_agents_langgraph.testing` holds `ScriptedChatModel`, a chat model for offline development and tests.
"""

from dex_agents_langgraph._effects import framework_effect
from dex_agents_langgraph._gate import DexToolGate, dex_tool_node, route_tool_calls
from dex_agents_langgraph._runner import UNKNOWN_TOOL_POLICY, GraphFactory, LangGraphRunner
from dex_agents_langgraph._settings import InstructionsForSettings, ModelForSettings
from dex_agents_langgraph._state import DexCheckpointSaver, LangGraphRunState
from dex_agents_langgraph._turn_scope import current_session_settings, dex_session_tools

__all__ = [
    "UNKNOWN_TOOL_POLICY",
    "DexCheckpointSaver",
    "DexToolGate",
    "GraphFactory",
    "InstructionsForSettings",
    "LangGraphRunState",
    "LangGraphRunner",
    "ModelForSettings",
    "current_session_settings",
    "dex_session_tools",
    "dex_tool_node",
    "framework_effect",
    "route_tool_calls",
]
