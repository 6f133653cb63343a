"""The runner capability that compaction needs: a size estimate, a cut, and one summary call."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dex_agents.events import AgentEventWriter
from dex_agents.runner import AgentTurnContext, ModelCallMetadata
from dex_agents.values import AgentMessage, AgentUsage, ContextSummary

__all__ = [
    "ContextCompactionRunner",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "is_compaction_runner",
]

_CAPABILITY_METHODS = ("estimate_input_tokens", "select_compaction_cutoff", "summarize_context")


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

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int | Awaitable[int]:
        """Return the size, in tokens, of the model input `run_model_step` would send for ``turn``.

        Count what the framework would send: the summary, the messages, the turn's unstored items and
        whatever else it adds, such as instructions and tool definitions. It may be a coroutine function.
        """
        ...

    def select_compaction_cutoff(
        self, turn: AgentTurnContext, retained_token_budget: int
    ) -> int | None | Awaitable[int | None]:
        """Return the sequence of the last message to summarize, or `None` to make the model call as is.

        Keep about ``retained_token_budget`` tokens of the newest messages. The cut must never separate a
        tool call from its result: every tool call at or before the returned sequence has its result at
        or before it. A sequence at or before the current summary's ``last_sequence`` means no compaction.
        It may be a coroutine function.
        """
        ...

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Make one model call that summarizes ``request.previous_summary`` and ``request.messages``."""
        ...


def is_compaction_runner(runner: object) -> bool:
    """Whether ``runner`` implements every method of `ContextCompactionRunner`."""
    return all(callable(getattr(runner, name, None)) for name in _CAPABILITY_METHODS)
