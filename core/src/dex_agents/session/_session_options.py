"""Options of one agent session Flow type."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType

from dex_agents._tools._builtins import BUILT_IN_TOOL_NAMES, WRITE_TODOS
from dex_agents._tracing._spans import TraceEmitter
from dex_agents.compaction import CompactionPolicy
from dex_agents.limits import (
    DEFAULT_INLINE_TOOL_OUTPUT_BYTES,
    DEFAULT_MESSAGE_WINDOW_MAX_BYTES,
    MAX_MESSAGE_CHUNK_BYTES,
    MAX_TOOL_OUTPUT_BYTES,
)
from dex_agents.persistence import DEFAULT_AGENT_EVENTS_CAPACITY_BYTES
from dex_agents.runner import ToolPolicy
from dex_agents.values import ToolEffect

__all__ = ["DEFAULT_MAX_DURABLE_WAIT", "MIN_INLINE_TOOL_OUTPUT_BYTES", "AgentSessionOptions"]

#: The smallest ``max_inline_tool_output_bytes``: room for the note `tool_output_view` adds and some output.
MIN_INLINE_TOOL_OUTPUT_BYTES = 1024

#: The longest ``durable_wait`` a session allows unless its options say otherwise.
DEFAULT_MAX_DURABLE_WAIT = timedelta(days=7)


def _require_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")


@dataclass(frozen=True)
class AgentSessionOptions:
    """How a session Flow type treats its tools, events, stored messages and context.

    Attributes:
        tool_policies: Policies by tool name; they win over framework metadata and the default effect.
        default_tool_effect: The effect of a tool without a policy or framework metadata.
        agent_events_capacity_bytes: The byte budget of the Flow type's `AgentEvents` Stream.
        interrupt_deadline: How long an approval or a question waits before the call is rejected with
            `approval deadline passed` or `question deadline passed`; `None` waits forever. Rounded up to
            whole seconds.
        built_in_tools: The built-in tools the session enables: ``ask_user``, ``durable_wait`` and
            ``write_todos``. An enabled name is reserved for the built-in; a disabled one is an ordinary
            tool name. Runners offer the enabled ones to their model.
        max_durable_wait: The longest wait a ``durable_wait`` call may ask for; a longer one records
            ``failed`` with a message the model reads.
        plan_mode_enabled: Allow planning turns (`AgentUserMessage.plan_mode`) and ``execute_plan``. It
            needs ``write_todos`` and a runner whose ``supports_plan_mode`` is `True`.
        message_window_size: The most messages kept one per `AgentMessages` instance; a Step that leaves
            more moves the oldest into immutable chunks.
        message_window_max_bytes: The most stored bytes of messages the window keeps; a Step that leaves
            more moves the oldest into chunks too. Every Step that stores a message loads the whole
            window, so this bounds what it loads whatever the size of the messages.
        message_chunk_size: The most messages in one chunk.
        message_chunk_max_bytes: The largest chunk, in bytes of its stored JSON, at most
            `MAX_MESSAGE_CHUNK_BYTES`; a message too large for a chunk of its own skips the window. Keep
            it below the server's largest value.
        max_inline_tool_output_bytes: The largest tool output, in UTF-8 bytes, that the call's record
            and the model keep whole. A larger one (up to `MAX_TOOL_OUTPUT_BYTES`) is stored apart in
            `AgentToolOutputs`, readable with `AgentSessionClient.get_tool_output`, and the model receives
            its first part with a note (`tool_output_view`); a still larger one records the call
            ``failed``.
        retained_message_limit: With compaction, chunks entirely before the summary are deleted while at
            least this many messages are stored after them; `None` keeps every message.
        compaction: When to summarize the earlier conversation; needs a runner that implements
            `ContextCompactionRunner`. `None` never compacts (and never deletes a message).
        tracing: OpenTelemetry GenAI spans for the sessions, a `dex_agents.otel.AgentTracing` (the ``otel``
            extra). `None`, the default, traces nothing, stores no `AgentTraceContext` and never loads
            OpenTelemetry.
    """

    tool_policies: Mapping[str, ToolPolicy] = field(default_factory=dict[str, ToolPolicy])
    default_tool_effect: ToolEffect = ToolEffect.UNCLASSIFIED
    agent_events_capacity_bytes: int = DEFAULT_AGENT_EVENTS_CAPACITY_BYTES
    interrupt_deadline: timedelta | None = None
    message_window_size: int = 64
    message_chunk_size: int = 32
    message_chunk_max_bytes: int = 1024 * 1024
    message_window_max_bytes: int = DEFAULT_MESSAGE_WINDOW_MAX_BYTES
    max_inline_tool_output_bytes: int = DEFAULT_INLINE_TOOL_OUTPUT_BYTES
    retained_message_limit: int | None = 1000
    compaction: CompactionPolicy | None = None
    built_in_tools: Collection[str] = ()
    max_durable_wait: timedelta = DEFAULT_MAX_DURABLE_WAIT
    plan_mode_enabled: bool = False
    tracing: TraceEmitter | None = None

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
        if isinstance(self.built_in_tools, str):
            raise TypeError("built_in_tools must be a collection of tool names, not one name")
        unknown = sorted(set(self.built_in_tools) - set(BUILT_IN_TOOL_NAMES))
        if unknown:
            raise ValueError(
                f"built_in_tools names unknown built-in tools {unknown}; the built-ins are "
                f"{list(BUILT_IN_TOOL_NAMES)}"
            )
        if self.max_durable_wait < timedelta(seconds=1):
            raise ValueError(f"max_durable_wait must be at least one second, got {self.max_durable_wait}")
        if self.plan_mode_enabled and WRITE_TODOS not in self.built_in_tools:
            raise ValueError("plan_mode_enabled needs the write_todos built-in tool in built_in_tools")
        # In the order runners offer them, so every Worker of a Flow type shows the model the same list.
        object.__setattr__(
            self,
            "built_in_tools",
            tuple(name for name in BUILT_IN_TOOL_NAMES if name in set(self.built_in_tools)),
        )
        _require_positive_int("message_window_size", self.message_window_size)
        _require_positive_int("message_chunk_size", self.message_chunk_size)
        _require_positive_int("message_chunk_max_bytes", self.message_chunk_max_bytes)
        if self.message_chunk_max_bytes > MAX_MESSAGE_CHUNK_BYTES:
            raise ValueError(
                f"message_chunk_max_bytes must be at most {MAX_MESSAGE_CHUNK_BYTES} (8 MiB), "
                f"got {self.message_chunk_max_bytes}"
            )
        _require_positive_int("message_window_max_bytes", self.message_window_max_bytes)
        _require_positive_int("max_inline_tool_output_bytes", self.max_inline_tool_output_bytes)
        if self.max_inline_tool_output_bytes > MAX_TOOL_OUTPUT_BYTES:
            raise ValueError(
                "max_inline_tool_output_bytes must be at most MAX_TOOL_OUTPUT_BYTES "
                f"({MAX_TOOL_OUTPUT_BYTES}), got {self.max_inline_tool_output_bytes}"
            )
        if self.max_inline_tool_output_bytes < MIN_INLINE_TOOL_OUTPUT_BYTES:
            raise ValueError(
                f"max_inline_tool_output_bytes must be at least {MIN_INLINE_TOOL_OUTPUT_BYTES}, so the model "
                f"sees part of a large output beside the note, got {self.max_inline_tool_output_bytes}"
            )
        if self.retained_message_limit is not None:
            _require_positive_int("retained_message_limit", self.retained_message_limit)
        if self.compaction is not None and not isinstance(self.compaction, CompactionPolicy):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"compaction must be a CompactionPolicy, got {type(self.compaction).__name__}")
        if self.tracing is not None and not isinstance(self.tracing, TraceEmitter):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(
                f"tracing must be a dex_agents.otel.AgentTracing, got {type(self.tracing).__name__}"
            )
        # A caller's dict could change after the Flow is built; the session must see one set of policies.
        object.__setattr__(self, "tool_policies", MappingProxyType(dict(self.tool_policies)))
        object.__setattr__(self, "default_tool_effect", ToolEffect(self.default_tool_effect))
