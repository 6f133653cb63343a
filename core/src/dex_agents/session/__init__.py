"""The session Flow, its Steps and RPCs."""

from dex_agents.session._flow import AgentSessionFlow
from dex_agents.session._session_options import DEFAULT_MAX_DURABLE_WAIT, AgentSessionOptions

__all__ = ["DEFAULT_MAX_DURABLE_WAIT", "AgentSessionFlow", "AgentSessionOptions"]
