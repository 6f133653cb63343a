"""What a ``useChat`` request asks for: a new user message, or answers to the turn's approvals.

``useChat`` sends its whole message list; only the last message is read. The session keeps the
conversation, so earlier messages are never taken from the browser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from dex_agents.web._requests import fail
from dex_agents.web._ui_stream import BrowserToolState

__all__ = ["ApprovalAnswer", "ChatRequest", "parse_chat_request"]

_TOOL_STATES = {
    "input-streaming": BrowserToolState.INPUT,
    "input-available": BrowserToolState.INPUT,
    "approval-requested": BrowserToolState.APPROVAL,
    "approval-responded": BrowserToolState.APPROVAL,
    "output-available": BrowserToolState.OUTPUT,
    "output-error": BrowserToolState.OUTPUT,
    "output-denied": BrowserToolState.OUTPUT,
}


@dataclass(frozen=True)
class ApprovalAnswer:
    """One ``tool-approval-response``: the approval's ID (the interrupt ID), the decision, the reason."""

    approval_id: str
    approved: bool
    reason: str | None


@dataclass(frozen=True)
class ChatRequest:
    """The request's last message, read.

    Attributes:
        user_text: The text of a new user message; ``None`` when the last message is the assistant's.
        approvals: The approval answers of the assistant's last message.
        browser_tools: How far the browser's assistant message shows each tool call.
        resume_token: Where the previous response of this turn stopped, from the message metadata.
        turn_id: The turn that response belonged to.
    """

    user_text: str | None
    approvals: tuple[ApprovalAnswer, ...] = ()
    browser_tools: dict[str, int] | None = None
    resume_token: str | None = None
    turn_id: str | None = None


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        fail(400, f"{what} must be a JSON object")
    return cast(dict[str, Any], value)


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts = message.get("parts")
    if not isinstance(parts, list):
        fail(400, "the last message must have a 'parts' list")
    return [_object(part, "every message part") for part in cast(list[object], parts)]


def _approval(part: dict[str, Any]) -> ApprovalAnswer | None:
    if part.get("type") == "tool-approval-response":
        approval_id, approved, reason = part.get("approvalId"), part.get("approved"), part.get("reason")
    else:
        approval = part.get("approval")
        if not isinstance(approval, dict):
            return None
        fields = cast(dict[str, Any], approval)
        approval_id, approved, reason = fields.get("id"), fields.get("approved"), fields.get("reason")
        if approved is None:
            return None  # asked, not answered yet
    if not isinstance(approval_id, str) or not approval_id:
        fail(400, "a tool approval response must name its approval ID")
    if not isinstance(approved, bool):
        fail(400, f"the approval {approval_id!r} must say approved true or false")
    if reason is not None and not isinstance(reason, str):
        fail(400, f"the reason of approval {approval_id!r} must be a string")
    return ApprovalAnswer(approval_id, approved, reason or None)


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    """Read the last message of a ``useChat`` request body.

    Raises:
        BadRequestError: 400 for a body without messages or with a malformed last message, 422 for a user
            message without text.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        fail(400, "the request must carry a non-empty 'messages' list")
    last = _object(cast(list[object], messages)[-1], "the last message")
    role = last.get("role")
    parts = _parts(last)
    if role == "user":
        texts = [part.get("text") for part in parts if part.get("type") == "text"]
        text = "".join(item for item in texts if isinstance(item, str))
        if not text.strip():
            fail(422, "the user message has no text")
        return ChatRequest(user_text=text)
    if role != "assistant":
        fail(400, f"the last message must be the user's or the assistant's, got role {role!r}")
    approvals: list[ApprovalAnswer] = []
    tools: dict[str, int] = {}
    for part in parts:
        answer = _approval(part)
        if answer is not None:
            approvals.append(answer)
        call_id, state = part.get("toolCallId"), part.get("state")
        if isinstance(call_id, str) and isinstance(state, str) and state in _TOOL_STATES:
            tools[call_id] = _TOOL_STATES[state]
    metadata = last.get("metadata")
    dex = cast(dict[str, Any], metadata).get("dex") if isinstance(metadata, dict) else None
    token = turn_id = None
    if isinstance(dex, dict):
        fields = cast(dict[str, Any], dex)
        token = fields.get("resume_token") if isinstance(fields.get("resume_token"), str) else None
        turn_id = fields.get("turn_id") if isinstance(fields.get("turn_id"), str) else None
    return ChatRequest(
        user_text=None, approvals=tuple(approvals), browser_tools=tools, resume_token=token, turn_id=turn_id
    )
