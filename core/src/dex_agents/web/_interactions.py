"""Questions and plans from a browser: answers from ``useChat`` parts, and why the session refused one.

`answer_question` and `execute_plan` answer a refusal with a bare ``False``. The browser gets a 409 whose
message names the cause, read from a snapshot taken right after the refusal (or, for an answer checked
before anything is sent, the snapshot the request read).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from dex_agents.values import AgentInterrupt, AgentSessionStatus, AgentSnapshot, InterruptKind, PlanStatus
from dex_agents.web._access import SessionAction
from dex_agents.web._chat_request import BrowserToolOutput
from dex_agents.web._requests import fail

__all__ = [
    "BrowserAnswer",
    "InterruptAnswer",
    "answer_refusal",
    "browser_answers",
    "deadline_has_passed",
    "plan_refusal",
    "resolve_refusal",
]

_APPROVABLE = frozenset({PlanStatus.DRAFT, PlanStatus.ACTIVE})
_MAX_ANSWER_SHOWN = 80


def deadline_has_passed(interrupt: AgentInterrupt) -> bool:
    """Whether the interrupt's deadline (RFC 3339, UTC) is behind this process's clock."""
    if interrupt.deadline is None:
        return False
    deadline = datetime.fromisoformat(interrupt.deadline.replace("Z", "+00:00"))
    return datetime.now(UTC) >= deadline


def _shown(answer: str) -> str:
    return repr(answer if len(answer) <= _MAX_ANSWER_SHOWN else answer[:_MAX_ANSWER_SHOWN] + "…")


def answer_refusal(snapshot: AgentSnapshot, interrupt_id: str, answer: str) -> str | None:
    """Why ``answer`` to ``interrupt_id`` is refused, as far as ``snapshot`` tells; `None` if it is not.

    Args:
        snapshot: The session as it is now.
        interrupt_id: The question's interrupt ID.
        answer: The answer (not blank: blank answers are refused before this).

    Returns:
        The refusal's message, or `None` when the snapshot shows nothing against the answer.
    """
    interrupt = next(
        (item for item in snapshot.pending_interrupts if item.interrupt_id == interrupt_id), None
    )
    if interrupt is None:
        return f"the question {interrupt_id!r} is not pending (answered, declined, expired, or unknown)"
    if interrupt.kind is not InterruptKind.QUESTION:
        return f"{interrupt_id!r} asks for an approval, not an answer: approve or reject it"
    if deadline_has_passed(interrupt):
        return f"the question {interrupt_id!r} passed its deadline ({interrupt.deadline})"
    if not interrupt.allows_free_text and answer not in interrupt.choices:
        return (
            f"the question {interrupt_id!r} takes only one of its choices ({', '.join(interrupt.choices)}), "
            f"not {_shown(answer)}"
        )
    return None


def resolve_refusal(snapshot: AgentSnapshot, interrupt_id: str, *, approved: bool) -> str:
    """Why ``resolve_interrupt`` refused to approve, reject or decline ``interrupt_id``."""
    interrupt = next(
        (item for item in snapshot.pending_interrupts if item.interrupt_id == interrupt_id), None
    )
    if interrupt is not None and interrupt.kind is InterruptKind.QUESTION and approved:
        return f"{interrupt_id!r} is a question: answer it, or decline it with .../reject"
    if interrupt is not None and deadline_has_passed(interrupt):
        return f"the interrupt {interrupt_id!r} passed its deadline ({interrupt.deadline})"
    return f"the interrupt {interrupt_id!r} is not pending (answered, unknown, or past its deadline)"


def plan_refusal(snapshot: AgentSnapshot, revision: int) -> str:
    """Why ``execute_plan`` refused ``revision``, as far as ``snapshot`` tells."""
    state = snapshot.state
    plan = snapshot.plan
    if state is None:
        return "the session has not started yet"
    if plan is None:
        return "the session has no plan to execute"
    if plan.revision != revision:
        return f"plan revision {revision} is not the current one: the plan is at revision {plan.revision}"
    if plan.status not in _APPROVABLE:
        return f"the plan is {plan.status.value}; only a draft or active plan can be executed"
    if state.active_turn_id is not None or state.status is not AgentSessionStatus.WAITING_FOR_USER_MESSAGE:
        return "a turn is running; approve the plan once it has ended"
    if snapshot.queued_messages or snapshot.steered_messages:
        return "messages are waiting to start the next turn; approve the plan once they have been answered"
    if snapshot.pending_interrupts:
        return "the session is waiting for an approval or an answer"
    return f"plan revision {revision} was approved already, and its turn is starting"


@dataclass(frozen=True)
class InterruptAnswer:
    """How a request resolves one pending interrupt: what the session is sent, and the action it needs.

    Attributes:
        interrupt_id: The approval or question.
        approved: Approve the call; `False` rejects it, or declines the question.
        reason: Why it was rejected or declined (sent as the rejection message).
        answer: The answer to a question (then ``approved`` is `True`).
    """

    interrupt_id: str
    approved: bool
    reason: str | None = None
    answer: str | None = None

    @property
    def action(self) -> SessionAction:
        if self.answer is not None:
            return SessionAction.ANSWER
        return SessionAction.APPROVE if self.approved else SessionAction.REJECT


@dataclass(frozen=True)
class BrowserAnswer:
    """A pending question's answer (``answer`` set) or decline (``answer`` `None`) from a ``useChat`` part."""

    interrupt_id: str
    answer: str | None
    decline_message: str | None


def _answer_text(output: BrowserToolOutput) -> str:
    value = output.output
    if isinstance(value, dict):
        value = cast(dict[str, Any], value).get("answer")
    if not isinstance(value, str):
        fail(
            400,
            f"the output of question {output.tool_call_id!r} must be the answer text, or an object whose "
            "'answer' is the text",
        )
    if not value.strip():
        fail(422, f"the answer to question {output.tool_call_id!r} must not be blank")
    return value


def browser_answers(snapshot: AgentSnapshot, outputs: Sequence[BrowserToolOutput]) -> list[BrowserAnswer]:
    """Read the outputs the browser gave to pending questions' parts as their answers or declines.

    Every answer is checked against ``snapshot`` first, so a refused one refuses the request before any
    of its answers is sent. Outputs of other parts (the server's own, or of questions no longer pending)
    are ignored.

    Raises:
        BadRequestError: 400 for an output that is not text, 422 for a blank answer, 409 for an answer the
            question does not take (naming its choices).
    """
    questions = {
        interrupt.interrupt_id: interrupt
        for interrupt in snapshot.pending_interrupts
        if interrupt.kind is InterruptKind.QUESTION
    }
    answers: list[BrowserAnswer] = []
    for output in outputs:
        if output.tool_call_id not in questions:
            continue
        if output.failed:
            answers.append(BrowserAnswer(output.tool_call_id, None, output.error_text))
            continue
        text = _answer_text(output)
        refusal = answer_refusal(snapshot, output.tool_call_id, text)
        if refusal is not None:
            fail(409, refusal)
        answers.append(BrowserAnswer(output.tool_call_id, text, None))
    return answers
