"""The session Flow, its Steps and RPCs."""

from dex_agents.session._flow import AgentSessionFlow
from dex_agents.session._session_options import AgentSessionOptions

__all__ = ["AgentSessionFlow", "AgentSessionOptions"]
