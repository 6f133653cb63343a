"""`AgentSessionFlow` and `AgentSessionOptions`, importable from where dex-agents 0.1.0 kept them."""

from dex_agents.session import AgentSessionFlow, AgentSessionOptions

__all__ = ["AgentSessionFlow", "AgentSessionOptions"]
