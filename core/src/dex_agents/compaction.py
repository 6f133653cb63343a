"""Context compaction: the policy that triggers it and the runner capability that performs it.

With `AgentSessionOptions.compaction` set, `RunModel` asks the runner, before each model call, how large the
next model input is. Once it reaches ``trigger_ratio`` of the context window, the runner picks the last
message to summarize, and the `CompactContext` Step makes one summary call, stores the summary, and goes
back to `RunModel`. From then on the runner receives the summary in `AgentTurnContext.context_summary` and
only the messages after it in `AgentTurnContext.messages`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dex_agents.events import AgentEventWriter
from dex_agents.runner import AgentTurnContext, ModelCallMetadata
from dex_agents.values import AgentMessage, AgentUsage, ContextSummary

__all__ = [
    "CompactionPolicy",
    "ContextCompactionRunner",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "is_compaction_runner",
]

_CAPABILITY_METHODS = ("estimate_input_tokens", "select_compaction_cutoff", "summarize_context")


@dataclass(frozen=True)
class CompactionPolicy:
    """When a session compacts its context, for `AgentSessionOptions.compaction`.

    Attributes:
        context_window_tokens: The model's context window, in tokens as the runner counts them. It is also
            the input budget of the summary call.
        trigger_ratio: Compaction starts when the next model input reaches this share of the window.
        retained_ratio: The share of the window the runner keeps unsummarized after the cut.

    Raises:
        ValueError: If the window is not positive, a ratio is outside (0, 1], or ``retained_ratio`` is not
            below ``trigger_ratio`` (the pair would compact on every model call).
    """

    context_window_tokens: int
    trigger_ratio: float = 0.85
    retained_ratio: float = 0.3

    def __post_init__(self) -> None:
        if isinstance(self.context_window_tokens, bool) or self.context_window_tokens <= 0:
            raise ValueError(
                f"context_window_tokens must be a positive number, got {self.context_window_tokens!r}"
            )
        for name, ratio in (("trigger_ratio", self.trigger_ratio), ("retained_ratio", self.retained_ratio)):
            if not 0 < ratio <= 1:
                raise ValueError(f"{name} must be above 0 and at most 1, got {ratio!r}")
        if self.retained_ratio >= self.trigger_ratio:
            raise ValueError(
                f"retained_ratio ({self.retained_ratio}) must be below trigger_ratio ({self.trigger_ratio}), "
                "or every model call would compact again"
            )

    @property
    def trigger_tokens(self) -> int:
        """The model input size, in tokens, from which a model call compacts first."""
        return int(self.context_window_tokens * self.trigger_ratio)

    @property
    def retained_token_budget(self) -> int:
        """The tokens the runner keeps after the cut: `select_compaction_cutoff`'s budget."""
        return int(self.context_window_tokens * self.retained_ratio)


@dataclass(frozen=True)
class ContextSummaryRequest:
    """One summary call for `ContextCompactionRunner.summarize_context`.

    Attributes:
        flow_id: The session ID.
        turn_id: The turn whose model call triggered the compaction.
        attempt: The one-based `CompactContext` attempt.
        previous_summary: The summary so far, which the new one must fold in; `None` the first time.
        messages: The messages to summarize: those after the previous summary through ``through_sequence``.
        through_sequence: The last message the new summary covers.
        events: Writes events stamped with the turn, the `CompactContext` Step execution and the attempt.
        heartbeat_function: Records liveness; call `heartbeat()` instead.
        input_token_budget: The most input the summary call may take: the policy's context window.
        session_settings: The settings the turn started with, an empty mapping when there are none.
    """

    flow_id: str
    turn_id: str
    attempt: int
    previous_summary: ContextSummary | None
    messages: Sequence[AgentMessage]
    through_sequence: int
    events: AgentEventWriter
    heartbeat_function: Callable[[], Awaitable[None]]
    input_token_budget: int
    session_settings: Mapping[str, object] = field(default_factory=dict[str, object])

    async def heartbeat(self) -> None:
        """Record liveness. The session already does this every 20 seconds."""
        await self.heartbeat_function()


@dataclass(frozen=True)
class ContextSummaryResult:
    """What one summary call returned.

    Attributes:
        text: The summary; blank text fails the `CompactContext` attempt.
        usage: Usage of the summary call, added to the session's usage.
        model_call_metadata: What the framework reports about the summary call; it names the call's
            ``chat`` span when tracing is on, and the session never stores it.
    """

    text: str
    usage: AgentUsage = field(default_factory=AgentUsage)
    model_call_metadata: ModelCallMetadata | None = None


@runtime_checkable
class ContextCompactionRunner(Protocol):
    """Optional runner capability that `AgentSessionOptions.compaction` requires.

    The session calls the first two methods inside `RunModel`, before the model call, so they must be quick
    and make no model call; `summarize_context` makes exactly one.
    """

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Return the size, in tokens, of the model input `run_model_step` would send for ``turn``.

        Count what the framework would send: the summary, the messages, the turn's unstored items and
        whatever else it adds, such as instructions and tool definitions.
        """
        ...

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Return the sequence of the last message to summarize, or `None` to make the model call as is.

        Keep about ``retained_token_budget`` tokens of the newest messages. The cut must never separate a
        tool call from its result: every tool call at or before the returned sequence has its result at
        or before it. A sequence at or before the current summary's ``last_sequence`` means no compaction.
        """
        ...

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make one model call that summarizes ``request.previous_summary`` and ``request.messages``."""
        ...


def is_compaction_runner(runner: object) -> bool:
    """Whether ``runner`` implements every method of `ContextCompactionRunner`."""
    return all(callable(getattr(runner, name, None)) for name in _CAPABILITY_METHODS)
