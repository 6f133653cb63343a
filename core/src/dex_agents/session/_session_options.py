"""Options of one agent session Flow type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from dex_agents.persistence import DEFAULT_AGENT_EVENTS_CAPACITY_BYTES
from dex_agents.runner import ToolPolicy
from dex_agents.values import ToolEffect

__all__ = ["AgentSessionOptions"]


@dataclass(frozen=True)
class AgentSessionOptions:
    """How a session Flow type treats its tools and events.

    Attributes:
        tool_policies: Policies by tool name; they win over framework metadata and the default effect.
        default_tool_effect: The effect of a tool without a policy or framework metadata.
        agent_events_capacity_bytes: The byte budget of the Flow type's `AgentEvents` Stream.
        interrupt_deadline: How long an approval waits before the call is rejected with
            `approval deadline passed`; `None` waits forever. Rounded up to whole seconds.
    """

    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict[str, ToolPolicy])
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    agent_events_capacity_bytes: int = DEFAULT_AGENT_EVENTS_CAPACITY_BYTES
    interrupt_deadline: timedelta | None = None

    def __post_init__(self) -> None:
        for name, policy in self.tool_policies.items():
            if not isinstance(policy, ToolPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
                raise TypeError(
                    f"the policy of tool {name!r} must be a ToolPolicy, got {type(policy).__name__}"
                )
        if self.agent_events_capacity_bytes <= 0:
            raise ValueError(
                f"agent_events_capacity_bytes must be positive, got {self.agent_events_capacity_bytes}"
            )
        if self.interrupt_deadline is not None and self.interrupt_deadline <= timedelta(0):
            raise ValueError(f"interrupt_deadline must be positive, got {self.interrupt_deadline}")
        # A caller's dict could change after the Flow is built; the session must see one set of policies.
        object.__setattr__(self, "tool_policies", MappingProxyType(dict(self.tool_policies)))
        object.__setattr__(self, "default_tool_effect", ToolEffect(self.default_tool_effect))
