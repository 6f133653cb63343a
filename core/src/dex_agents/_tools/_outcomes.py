"""What one run of a deferred tool call, or one poll of its task, hands back to the session.

A tool returns its result (`ToolExecutionResult`) or fails for the model to see (`ToolExecutionError`). Two
more outcomes stop a call without ending it: `ToolInputRequested`, when the tool needs the user's answer
before it takes any effect, and `ToolTaskStarted`, when the tool started remote work that the session polls
in later Steps. A poll returns `ToolTaskPending` while that work runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from dex_agents.limits import MAX_QUESTION_BYTES, MAX_QUESTION_CHOICES, utf8_size

__all__ = [
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolInputRequested",
    "ToolTaskPending",
    "ToolTaskStarted",
    "check_question",
]


@dataclass(frozen=True)
class ToolExecutionResult:
    """The result of a tool that ran.

    Attributes:
        output: The text the model sees.
    """

    output: str


class ToolExecutionError(Exception):
    """A tool failure the model should see.

    The session records the call `failed` with this message and does not retry it. Any other exception
    from `execute_deferred_tool_call` fails the Step attempt instead.
    """

    def __init__(self, message: str) -> None:
        """Create the error.

        Args:
            message: What went wrong, as the model should read it.
        """
        super().__init__(message)
        self.message = message


def check_question(question: object, choices: Sequence[object], allows_free_text: object) -> tuple[str, ...]:
    """Check a question for the user and return its choices as a tuple.

    Args:
        question: The question text.
        choices: The answers it offers.
        allows_free_text: Whether it accepts an answer outside ``choices``.

    Returns:
        The choices.

    Raises:
        ValueError: If the question is blank or longer than `MAX_QUESTION_BYTES`, a choice is blank,
            repeated or too long, there are more than `MAX_QUESTION_CHOICES` choices, or the question takes
            neither free text nor a choice.
        TypeError: If a value has the wrong type.
    """
    if not isinstance(question, str):
        raise TypeError(f"a question must be text, got {type(question).__name__}")
    if not question.strip():
        raise ValueError("a question must not be blank")
    if utf8_size(question) > MAX_QUESTION_BYTES:
        raise ValueError(f"a question must be at most {MAX_QUESTION_BYTES} bytes of UTF-8")
    if isinstance(choices, str):
        raise TypeError("choices must be a list of texts, not one text")
    checked: list[str] = []
    for choice in choices:
        if not isinstance(choice, str):
            raise TypeError(f"every choice must be text, got {type(choice).__name__}")
        if not choice.strip():
            raise ValueError("a choice must not be blank")
        if utf8_size(choice) > MAX_QUESTION_BYTES:
            raise ValueError(f"a choice must be at most {MAX_QUESTION_BYTES} bytes of UTF-8")
        if choice in checked:
            raise ValueError(f"the choice {choice!r} appears twice")
        checked.append(choice)
    if len(checked) > MAX_QUESTION_CHOICES:
        raise ValueError(f"a question offers at most {MAX_QUESTION_CHOICES} choices, got {len(checked)}")
    if not isinstance(allows_free_text, bool):
        raise TypeError(f"allows_free_text must be a bool, got {type(allows_free_text).__name__}")
    if not allows_free_text and not checked:
        raise ValueError("a question that allows no free text needs at least one choice")
    return tuple(checked)


@dataclass(frozen=True)
class ToolInputRequested:
    """The tool needs the user's answer before it takes any effect.

    The session raises a question (interrupt ``<tool_call_id>-input-<n>``), and once the user answers it
    runs the tool again with the answer in `DeferredToolExecution.input_answers`. A declined or expired
    question ends the call as `rejected`, so the tool never runs with a missing answer. Tool code asks
    through `dex_agents.ask_user_input`, which returns this outcome for it. A poll of a started task may
    return it too; the task then receives the answer, the decline or the passed deadline in its next poll.

    Attributes:
        question: What the user is asked; not blank.
        choices: The answers offered, each one at most once.
        allows_free_text: Whether an answer outside ``choices`` is accepted; `False` needs choices.
        continuation: Opaque text the session keeps as `AgentToolCall.input_continuation`, so the next
            run (or poll) knows where the tool stopped.

    Raises:
        ValueError: If the question is not valid (see `check_question`).
        TypeError: If a field has the wrong type.
    """

    question: str
    choices: Sequence[str] = field(default_factory=tuple[str, ...])
    allows_free_text: bool = True
    continuation: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "choices", check_question(self.question, self.choices, self.allows_free_text)
        )
        if self.continuation is not None and not isinstance(self.continuation, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"continuation must be text or None, got {type(self.continuation).__name__}")


@dataclass(frozen=True)
class ToolTaskStarted:
    """The tool started remote work that outlives the tool Step; the session polls it.

    Save the task's handle with `DeferredToolExecution.save_heartbeat_checkpoint` before returning this, so
    a retried attempt finds it in ``heartbeat_checkpoint`` and returns the same task instead of starting
    the work again (`dex_agents.start_tool_task` does both). Return it only when
    `DeferredToolExecution.supports_tool_tasks` is set; the runner's ``poll_tool_task`` then polls the task.
    The session does not check the fields here: a blank ``task_id`` or an interval that is not a number
    records the call `failed` (a read) or `outcome_unknown` (a write), because the task may be running.

    Attributes:
        task_id: The task's handle, kept as `AgentToolCall.task_id`.
        poll_interval_seconds: Seconds until the first poll, rounded up to whole seconds from 1 to a day.
    """

    task_id: str
    poll_interval_seconds: float


@dataclass(frozen=True)
class ToolTaskPending:
    """A poll found the task still running.

    Attributes:
        poll_interval_seconds: Seconds until the next poll, rounded up to whole seconds from 1 to a day.
        continuation: Opaque text the next poll reads as ``tool_call.input_continuation``; `None` clears it.
            A poll that delivered an answer keeps naming the answered request here for as long as it needs
            to recognise it, then returns `None`, so an identical later question reads as a new one.
    """

    poll_interval_seconds: float
    continuation: str | None = None
