"""Context compaction: the policy that triggers it and the runner capability that performs it.

With `AgentSessionOptions.compaction` set, `RunModel` asks the runner, before each model call, how large the
next model input is. Once it reaches ``trigger_ratio`` of the context window, the runner picks the last
message to summarize, and the `CompactContext` Step makes one summary call, stores the summary, and goes
back to `RunModel`. From then on the runner receives the summary in `AgentTurnContext.context_summary` and
only the messages after it in `AgentTurnContext.messages`.

The texts a runner shows its model are shared by every runner, so a transcript reads the same whichever
framework wrote it: `CONTEXT_SUMMARY_HEADER` before the summary where the model input starts
(`context_summary_text`), and `left_out_messages_note` in a summary call that could not take every message.
`build_summary_prompt` writes a summary call's one prompt from them, and `DEFAULT_SUMMARY_INSTRUCTIONS` says
what a summary must keep.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dex_agents.events import AgentEventWriter
from dex_agents.runner import AgentTurnContext, ModelCallMetadata
from dex_agents.values import AgentMessage, AgentUsage, ContextSummary

__all__ = [
    "CONTEXT_SUMMARY_HEADER",
    "DEFAULT_CONTEXT_WINDOW_BYTES",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "CompactionPolicy",
    "ContextCompactionRunner",
    "ContextSummaryRequest",
    "ContextSummaryResult",
    "build_summary_prompt",
    "context_summary_text",
    "is_compaction_runner",
    "left_out_messages_note",
]

CONTEXT_SUMMARY_HEADER = "[Dex] Summary of the earlier conversation:"
"""The line before the summary text where a model input starts once the session has compacted."""

DEFAULT_CONTEXT_WINDOW_BYTES = 4 * 1024 * 1024
"""`CompactionPolicy.context_window_bytes` by default: the stored messages one model call loads, about."""

DEFAULT_SUMMARY_INSTRUCTIONS = (
    "You keep the running summary of a conversation between a user and an AI assistant that uses tools. "
    "The assistant will continue from your summary and the newest messages only, so your summary replaces "
    "everything it covers. Fold the earlier summary, when there is one, and the conversation after it into "
    "one summary. Keep what the assistant needs to go on: the user's goals, preferences and open requests; "
    "decisions and promises; facts, names, IDs, amounts and dates; which tool calls ran and what they "
    "returned, above all writes such as payments, refunds or messages sent, so that none is repeated; and "
    "tool calls that failed or whose outcome is unknown. Leave out greetings and small talk. Write short "
    "notes in the language of the conversation, with no preamble."
)
"""The instructions of a summary call, unless a runner is given its own."""

_CAPABILITY_METHODS = ("estimate_input_tokens", "select_compaction_cutoff", "summarize_context")


@dataclass(frozen=True)
class CompactionPolicy:
    """When a session compacts its context, for `AgentSessionOptions.compaction`.

    The window is measured twice: in tokens as the runner counts them, and in the stored bytes of the
    messages the model call loads. Either reaching ``trigger_ratio`` of its window starts a compaction, so
    a session of very large messages (whose tokens a runner may undercount) still compacts, and the bytes
    a model call loads stay flat however large the messages are.

    Attributes:
        context_window_tokens: The model's context window, in tokens as the runner counts them. It is also
            the input budget of the summary call.
        trigger_ratio: Compaction starts when the next model input reaches this share of either window.
        retained_ratio: The share of the window the runner keeps unsummarized after the cut.
        context_window_bytes: The most stored bytes of messages (their JSON, runner items included) a model
            call loads. Past ``trigger_ratio`` of it the session compacts, and the runner's cut keeps about
            ``retained_ratio`` of it.

    Raises:
        ValueError: If the window is not positive, a ratio is outside (0, 1], or ``retained_ratio`` is not
            below ``trigger_ratio`` (the pair would compact on every model call).
    """

    context_window_tokens: int
    trigger_ratio: float = 0.85
    retained_ratio: float = 0.3
    context_window_bytes: int = DEFAULT_CONTEXT_WINDOW_BYTES

    def __post_init__(self) -> None:
        if isinstance(self.context_window_tokens, bool) or self.context_window_tokens <= 0:
            raise ValueError(
                f"context_window_tokens must be a positive number, got {self.context_window_tokens!r}"
            )
        if isinstance(self.context_window_bytes, bool) or self.context_window_bytes <= 0:
            raise ValueError(
                f"context_window_bytes must be a positive number, got {self.context_window_bytes!r}"
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

    @property
    def trigger_bytes(self) -> int:
        """The stored bytes of a model call's messages from which it compacts first."""
        return int(self.context_window_bytes * self.trigger_ratio)

    @property
    def retained_bytes(self) -> int:
        """The stored bytes of messages a cut keeps, about."""
        return int(self.context_window_bytes * self.retained_ratio)


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


def context_summary_text(summary: ContextSummary) -> str:
    """Return the text a model input starts with once the session has compacted.

    Args:
        summary: The session's current summary.

    Returns:
        `CONTEXT_SUMMARY_HEADER`, a blank line, and the summary's text.
    """
    return f"{CONTEXT_SUMMARY_HEADER}\n\n{summary.text}"


def left_out_messages_note(count: int) -> str:
    """Return the line that tells a summary model how many of the oldest messages did not fit its request.

    Args:
        count: How many stored messages were left out; at least 1.

    Returns:
        ``[Dex] <count> earlier messages did not fit in this request and are left out.``, in the singular
        for one message.

    Raises:
        ValueError: If ``count`` is below 1: with nothing left out, a request carries no note.
    """
    if isinstance(count, bool) or count < 1:
        raise ValueError(f"a left-out note needs at least one left-out message, got {count!r}")
    if count == 1:
        return "[Dex] 1 earlier message did not fit in this request and is left out."
    return f"[Dex] {count} earlier messages did not fit in this request and are left out."


def build_summary_prompt(
    previous_summary: ContextSummary | None, transcript_lines: Sequence[str], *, left_out: int = 0
) -> str:
    """Return the one user prompt of a summary call: what to fold in, then the conversation as a transcript.

    The previous summary comes first under `CONTEXT_SUMMARY_HEADER`, then `left_out_messages_note` when
    messages were left out, then the transcript under a heading that says whether it follows a summary.

    Args:
        previous_summary: The summary to fold in, or `None` the first time.
        transcript_lines: The messages to summarize, one line per message (or per tool call), in order.
        left_out: How many of the oldest messages to summarize did not fit the request.

    Returns:
        The prompt, its sections separated by blank lines.
    """
    sections: list[str] = []
    if previous_summary is not None:
        sections.append(context_summary_text(previous_summary))
    if left_out:
        sections.append(left_out_messages_note(left_out))
    heading = "The conversation since that summary:" if previous_summary is not None else "The conversation:"
    sections.append("\n".join([heading, *transcript_lines]))
    return "\n\n".join(sections)
