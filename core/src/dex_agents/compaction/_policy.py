"""`CompactionPolicy`: when a session compacts, in tokens and in stored bytes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_CONTEXT_WINDOW_BYTES", "CompactionPolicy"]

DEFAULT_CONTEXT_WINDOW_BYTES = 4 * 1024 * 1024
"""`CompactionPolicy.context_window_bytes` by default: the stored messages one model call loads, about."""


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
