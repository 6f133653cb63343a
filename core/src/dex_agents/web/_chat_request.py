"""What a ``useChat`` request asks for: a new user message, a plan approval, or answers to the turn.

``useChat`` sends its whole message list; only the last message is read. The session keeps the
conversation, so earlier messages are never taken from the browser. A user message carries text (with
``metadata.dex.plan_mode`` to plan first), or a ``data-dex-plan-approval`` part ``{"revision"}`` that
approves the plan. An assistant message carries approval answers and the outputs the browser gave its
question parts (``addToolOutput``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from dex_agents.values import AgentSnapshot, InterruptKind
from dex_agents.web._requests import fail
from dex_agents.web._ui_translator import BrowserToolState

__all__ = [
    "PLAN_APPROVAL_PART",
    "ApprovalAnswer",
    "BrowserToolOutput",
    "ChatRequest",
    "approvals_from_outputs",
    "parse_chat_request",
]

#: The user message part that approves the plan: ``{"type": PLAN_APPROVAL_PART, "data": {"revision": n}}``.
PLAN_APPROVAL_PART = "data-dex-plan-approval"

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
class BrowserToolOutput:
    """A tool part to which the browser gave an output itself (``addToolOutput``), such as a question's.

    Attributes:
        tool_call_id: The part's ``toolCallId``.
        output: Its ``output`` (``output-available``); `None` for an ``output-error``.
        error_text: Its ``errorText`` (``output-error``).
        failed: Whether the browser set ``output-error``.
    """

    tool_call_id: str
    output: object
    error_text: str | None
    failed: bool


@dataclass(frozen=True)
class ChatRequest:
    """The request's last message, read.

    Attributes:
        user_text: The text of a new user message; ``None`` when the last message is the assistant's, or
            approves the plan.
        plan_mode: The user message asks for a planning turn (``metadata.dex.plan_mode``).
        plan_revision: The plan revision a user message approves.
        approvals: The approval answers of the assistant's last message.
        tool_outputs: The outputs of the assistant's last message's tool parts (the server's own outputs
            among them; the app reads those of pending questions as answers).
        browser_tools: How far the browser's assistant message shows each tool call.
        resume_token: Where the previous response of this turn stopped, from the message metadata.
        turn_id: The turn that response belonged to.
    """

    user_text: str | None
    plan_mode: bool = False
    plan_revision: int | None = None
    approvals: tuple[ApprovalAnswer, ...] = ()
    tool_outputs: tuple[BrowserToolOutput, ...] = ()
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


def _dex_metadata(message: dict[str, Any]) -> dict[str, Any]:
    metadata = message.get("metadata")
    dex = cast(dict[str, Any], metadata).get("dex") if isinstance(metadata, dict) else None
    return cast(dict[str, Any], dex) if isinstance(dex, dict) else {}


def _tool_output(part: dict[str, Any], call_id: str, state: str) -> BrowserToolOutput | None:
    if state == "output-available":
        return BrowserToolOutput(call_id, part.get("output"), None, failed=False)
    if state == "output-error":
        error_text = part.get("errorText")
        return BrowserToolOutput(
            call_id, None, error_text if isinstance(error_text, str) else None, failed=True
        )
    return None


def _plan_revision(parts: list[dict[str, Any]]) -> int | None:
    approvals = [part for part in parts if part.get("type") == PLAN_APPROVAL_PART]
    if not approvals:
        return None
    data = approvals[-1].get("data")
    revision = cast(dict[str, Any], data).get("revision") if isinstance(data, dict) else None
    if isinstance(revision, bool) or not isinstance(revision, int):
        fail(400, f"a {PLAN_APPROVAL_PART} part must carry data {{'revision': <integer>}}")
    return revision


def _user_request(message: dict[str, Any], parts: list[dict[str, Any]]) -> ChatRequest:
    texts = [part.get("text") for part in parts if part.get("type") == "text"]
    text = "".join(item for item in texts if isinstance(item, str))
    plan_mode = _dex_metadata(message).get("plan_mode")
    if plan_mode is not None and not isinstance(plan_mode, bool):
        fail(400, "metadata.dex.plan_mode must be true, false or null")
    revision = _plan_revision(parts)
    if revision is not None:
        if text.strip():
            fail(400, f"a message that approves the plan ({PLAN_APPROVAL_PART}) carries no text")
        return ChatRequest(user_text=None, plan_revision=revision)
    if not text.strip():
        fail(422, "the user message has no text")
    return ChatRequest(user_text=text, plan_mode=bool(plan_mode))


def parse_chat_request(body: dict[str, Any]) -> ChatRequest:
    """Read the last message of a ``useChat`` request body.

    Raises:
        BadRequestError: 400 for a body without messages or with a malformed last message, 422 for a user
            message with neither text nor a plan approval.
    """
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        fail(400, "the request must carry a non-empty 'messages' list")
    last = _object(cast(list[object], messages)[-1], "the last message")
    role = last.get("role")
    parts = _parts(last)
    if role == "user":
        return _user_request(last, parts)
    if role != "assistant":
        fail(400, f"the last message must be the user's or the assistant's, got role {role!r}")
    approvals: list[ApprovalAnswer] = []
    outputs: list[BrowserToolOutput] = []
    tools: dict[str, int] = {}
    for part in parts:
        answer = _approval(part)
        if answer is not None:
            approvals.append(answer)
        call_id, state = part.get("toolCallId"), part.get("state")
        if isinstance(call_id, str) and isinstance(state, str) and state in _TOOL_STATES:
            tools[call_id] = _TOOL_STATES[state]
            output = _tool_output(part, call_id, state)
            if output is not None:
                outputs.append(output)
    dex = _dex_metadata(last)
    token = dex.get("resume_token") if isinstance(dex.get("resume_token"), str) else None
    turn_id = dex.get("turn_id") if isinstance(dex.get("turn_id"), str) else None
    return ChatRequest(
        user_text=None,
        approvals=tuple(approvals),
        tool_outputs=tuple(outputs),
        browser_tools=tools,
        resume_token=token,
        turn_id=turn_id,
    )


def approvals_from_outputs(
    snapshot: AgentSnapshot, outputs: Sequence[BrowserToolOutput]
) -> list[ApprovalAnswer]:
    """Read the outputs an ai 5 browser gave the parts of calls that wait for approval.

    Outputs of other parts are ignored.

    Raises:
        BadRequestError: 400 for an output that is not ``{"approved": bool, "reason"?: str}``.
    """
    approvals = {
        interrupt.tool_call_id: interrupt.interrupt_id
        for interrupt in snapshot.pending_interrupts
        if interrupt.kind is InterruptKind.TOOL_APPROVAL
    }
    answers: list[ApprovalAnswer] = []
    for output in outputs:
        approval_id = approvals.get(output.tool_call_id)
        if approval_id is None:
            continue
        value: object = output.output
        fields = cast(dict[str, Any], value) if isinstance(value, dict) else {}
        approved, reason = fields.get("approved"), fields.get("reason")
        if output.failed or not isinstance(approved, bool) or not isinstance(reason, str | None):
            fail(
                400,
                f"answer the approval of {output.tool_call_id!r} with the output "
                '{"approved": true or false, "reason": optional text}',
            )
        answers.append(ApprovalAnswer(approval_id, approved, reason or None))
    return answers
