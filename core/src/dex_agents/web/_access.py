"""Who may see a session and who may act on it: the app's access rule, told the action.

Seeing and acting are separate rights. A support agent may read a customer's session without approving its
refunds, so the rule is asked about each action, not once per session. A refusal to see answers 404 (the
session's existence is not confirmed); a refusal to act on a session the request may see answers 403.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum

from starlette.requests import Request

__all__ = ["SessionAccess", "SessionAccessRule", "SessionAction", "access_rule"]


class SessionAction(StrEnum):
    """What a request does to a session; the access rule is asked about exactly one.

    Attributes:
        VIEW: Read the snapshot, older messages or events, open the page, or follow a turn's UI stream.
        SEND: Send a user message (also through the AI SDK chat endpoint).
        STEER: Steer the running turn.
        DELETE_QUEUED: Delete a queued message.
        CANCEL: Cancel the running turn.
        APPROVE: Approve a tool call.
        REJECT: Reject a tool call, or decline a question.
        ANSWER: Answer a question.
        EXECUTE_PLAN: Approve the plan's revision, which starts the turn that carries it out.
    """

    VIEW = "view"
    SEND = "send"
    STEER = "steer"
    DELETE_QUEUED = "delete_queued"
    CANCEL = "cancel"
    APPROVE = "approve"
    REJECT = "reject"
    ANSWER = "answer"
    EXECUTE_PLAN = "execute_plan"


#: Decides whether a request may do ``action`` to a session: ``rule(request, session_id, action)``.
SessionAccessRule = Callable[[Request, str, SessionAction], Awaitable[bool]]

#: The older, action-blind hook: one answer for seeing and acting alike.
SessionAccess = Callable[[Request, str], Awaitable[bool]]


def access_rule(
    access: SessionAccessRule | None, session_access: SessionAccess | None, *, allow_any_session: bool
) -> SessionAccessRule | None:
    """Return the one rule the app applies, or `None` when the caller opted out of access checks.

    Raises:
        TypeError: If no rule is given and ``allow_any_session`` is not set, or more than one is given.
    """
    given = [name for name, value in (("access", access), ("session_access", session_access)) if value]
    if allow_any_session:
        given.append("allow_any_session=True")
    if len(given) > 1:
        raise TypeError(f"pass one of access=, session_access= and allow_any_session=True, not {given}")
    if not given:
        raise TypeError(
            "create_agent_web_app needs an access rule: pass access=rule, where "
            "rule(request, session_id, action) says whether the request may view or act on the session; or "
            "pass allow_any_session=True to let anyone who reaches the app see and drive every session "
            "(only behind your own authentication, or on loopback for development)"
        )
    if access is not None:
        return access
    if session_access is not None:
        action_blind = session_access

        async def same_answer_for_every_action(
            request: Request, session_id: str, action: SessionAction
        ) -> bool:
            del action
            return await action_blind(request, session_id)

        return same_answer_for_every_action
    return None
