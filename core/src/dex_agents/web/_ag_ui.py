"""One turn as AG-UI events (``ag-ui-protocol`` 1.x), for ``HttpAgent`` and every AG-UI client.

The AG-UI endpoint reads the session exactly as the AI SDK chat stream does: it follows the same
`ui_message_chunks` (the dialect without ``reset-step``, so a model call's text is sent once its attempt
has committed) and turns each chunk into AG-UI events:

* A request is one AG-UI run: ``RUN_STARTED`` (``threadId`` is the session ID, ``runId`` the client's),
  then the turn, then ``RUN_FINISHED`` or ``RUN_ERROR``.
* A ``RunModel`` Step execution is a step (``STEP_STARTED``/``STEP_FINISHED``, ``model-call-<n>``); its text
  is a text message and its reasoning a reasoning message, both with IDs unique to the run.
* A tool call is ``TOOL_CALL_START``/``TOOL_CALL_ARGS`` (the whole arguments JSON)/``TOOL_CALL_END``, and
  its outcome ``TOOL_CALL_RESULT`` (the result text, the error, or the rejection).
* The plan is ``STATE_SNAPSHOT`` ``{"plan": ...}``.
* Approvals and questions the turn waits for end the run with ``RUN_FINISHED`` whose outcome is
  ``interrupt``: one AG-UI interrupt per pending session interrupt, with the same ID. They are the session's
  durable interrupts, so they survive a Worker restart: a later run that sends no message shows them again.
  A run whose ``resume`` answers them continues the same turn.
* A completed turn finishes with outcome ``success``; a steered or cancelled one with ``cancelled``; a
  failed one with ``RUN_ERROR``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    Interrupt,
    Message,
    MessagesSnapshotEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
    UserMessage,
)
from pydantic import ValidationError

from dex_agents.values import (
    AgentInterrupt,
    AgentPlan,
    AgentSnapshot,
    InterruptKind,
    MessageRole,
    ToolCallStatus,
)
from dex_agents.web._interactions import InterruptAnswer, answer_refusal
from dex_agents.web._json import parse_json_text
from dex_agents.web._requests import fail
from dex_agents.web._ui_translator import BrowserToolState, Chunk

__all__ = [
    "AG_UI_PROTOCOL_VERSION",
    "AgUiRequest",
    "AgUiTranslator",
    "browser_tools_of_turn",
    "encode_event",
    "messages_snapshot",
    "parse_ag_ui_request",
    "pending_interrupts",
    "resume_answers",
    "run_finished_success",
    "run_started",
    "state_snapshot",
]

#: The AG-UI protocol version the endpoint speaks (``RUN_STARTED.protocolVersion``).
AG_UI_PROTOCOL_VERSION = "1.0"

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


@dataclass(frozen=True)
class AgUiRequest:
    """What an AG-UI run asks for.

    Attributes:
        run_id: The client's run ID.
        user_text: The text of the input's last message when it is a user message: it is sent to the session.
        resume: The input's resume entries (an empty tuple without them).
    """

    run_id: str
    user_text: str | None
    resume: tuple[tuple[str, str, object], ...]


def parse_ag_ui_request(body: dict[str, Any], session_id: str) -> AgUiRequest:
    """Read a ``RunAgentInput`` body.

    Only the last message is read, and only when it is the user's: the session keeps the conversation, so
    earlier messages (the client's copy) are not sent again.

    Raises:
        BadRequestError: 400 for a body that is not a ``RunAgentInput``, a ``threadId`` that is not the
            session ID, or a user message with other parts than text.
    """
    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc'])}: {problem['msg']}"
            for problem in error.errors()[:3]
        )
        fail(400, f"the body is not an AG-UI RunAgentInput ({problems})")
    if run.thread_id != session_id:
        fail(400, f"threadId must be the session ID {session_id!r}")
    user_text: str | None = None
    if run.messages and isinstance(run.messages[-1], UserMessage):
        content = run.messages[-1].content
        if isinstance(content, str):
            user_text = content
        else:
            texts = [getattr(part, "text", None) for part in content]
            if any(not isinstance(text, str) for text in texts):
                fail(400, "a user message may only have text parts")
            user_text = "".join(cast(list[str], texts))
    resume = tuple((entry.interrupt_id, entry.status, entry.payload) for entry in run.resume or ())
    if resume and user_text is not None:
        fail(400, "a run resumes interrupts or sends a user message, not both")
    return AgUiRequest(run.run_id, user_text, resume)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def resume_answers(request: AgUiRequest, snapshot: AgentSnapshot) -> list[InterruptAnswer]:
    """The resume entries that answer interrupts still pending in ``snapshot``.

    An approval is answered with ``{"approved": bool, "reason"?: str}`` (or a bare boolean); a question with
    ``{"answer": str}`` (or a bare string). ``status: "cancelled"`` rejects the call or declines the
    question. An entry for an interrupt that is no longer pending changes nothing (it was answered elsewhere).

    Raises:
        BadRequestError: 400 for a payload that does not answer its interrupt.
    """
    pending = {interrupt.interrupt_id: interrupt for interrupt in snapshot.pending_interrupts}
    answers: list[InterruptAnswer] = []
    for interrupt_id, status, payload in request.resume:
        interrupt = pending.get(interrupt_id)
        if interrupt is None:
            continue
        fields = cast(dict[str, Any], payload) if isinstance(payload, dict) else {}
        reason = _text(fields.get("reason"))
        if status == "cancelled":
            answers.append(InterruptAnswer(interrupt_id, approved=False, reason=reason))
        elif interrupt.kind is InterruptKind.TOOL_APPROVAL:
            approved = payload if isinstance(payload, bool) else fields.get("approved")
            if not isinstance(approved, bool):
                fail(400, f"resume {interrupt_id!r} with the payload {{'approved': true|false}}")
            answers.append(
                InterruptAnswer(interrupt_id, approved=approved, reason=None if approved else reason)
            )
        else:
            answer = payload if isinstance(payload, str) else _text(fields.get("answer"))
            if answer is None or not answer.strip():
                fail(400, f"resume {interrupt_id!r} with the payload {{'answer': '<text>'}}")
            refusal = answer_refusal(snapshot, interrupt_id, answer)
            if refusal is not None:
                fail(409, refusal)
            answers.append(InterruptAnswer(interrupt_id, approved=True, answer=answer))
    return answers


def browser_tools_of_turn(snapshot: AgentSnapshot, turn_id: str) -> dict[str, int]:
    """How far the run that ended on the turn's interrupts showed each of its tool calls and questions."""
    tools: dict[str, int] = {}
    for record in snapshot.tool_calls:
        if record.turn_id != turn_id:
            continue
        if record.is_final:
            tools[record.tool_call_id] = BrowserToolState.OUTPUT
        elif record.status is ToolCallStatus.AWAITING_APPROVAL:
            tools[record.tool_call_id] = BrowserToolState.APPROVAL
        else:
            tools[record.tool_call_id] = BrowserToolState.INPUT
    for interrupt in snapshot.pending_interrupts:
        if interrupt.kind is InterruptKind.QUESTION and interrupt.tool_call_id in tools:
            tools.setdefault(interrupt.interrupt_id, BrowserToolState.INPUT)
    return tools


def _interrupt(interrupt: AgentInterrupt) -> Interrupt:
    details: dict[str, Any] = {
        "kind": interrupt.kind.value,
        "tool_name": interrupt.tool_name,
        "arguments": parse_json_text(interrupt.arguments),
    }
    if interrupt.kind is InterruptKind.TOOL_APPROVAL:
        return Interrupt(
            id=interrupt.interrupt_id,
            reason=interrupt.kind.value,
            message=f"Approve the call of {interrupt.tool_name}?",
            tool_call_id=interrupt.tool_call_id,
            response_schema=_APPROVAL_SCHEMA,
            expires_at=interrupt.deadline,
            metadata={"dex": details},
        )
    answer: dict[str, Any] = {"type": "string", "minLength": 1}
    if interrupt.choices and not interrupt.allows_free_text:
        answer["enum"] = list(interrupt.choices)
    details["choices"] = list(interrupt.choices)
    details["allows_free_text"] = interrupt.allows_free_text
    return Interrupt(
        id=interrupt.interrupt_id,
        reason=interrupt.kind.value,
        message=interrupt.question,
        tool_call_id=interrupt.tool_call_id,
        response_schema={"type": "object", "properties": {"answer": answer}, "required": ["answer"]},
        expires_at=interrupt.deadline,
        metadata={"dex": details},
    )


def pending_interrupts(snapshot: AgentSnapshot, turn_id: str) -> list[Interrupt]:
    """The turn's pending approvals and questions as AG-UI interrupts (the same IDs)."""
    calls = {record.tool_call_id for record in snapshot.tool_calls if record.turn_id == turn_id}
    return [_interrupt(item) for item in snapshot.pending_interrupts if item.tool_call_id in calls]


def _plan_json(plan: AgentPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "revision": plan.revision,
        "status": plan.status.value,
        "tasks": [{"content": task.content, "status": task.status.value} for task in plan.tasks],
        "updated_at": plan.updated_at,
    }


def state_snapshot(snapshot: AgentSnapshot) -> StateSnapshotEvent:
    """The session's state as AG-UI sees it: ``{"plan": ...}`` (``null`` without a plan)."""
    return StateSnapshotEvent(snapshot={"plan": _plan_json(snapshot.plan)})


def _output_text(output: object) -> str:
    return output if isinstance(output, str) else json.dumps(output, separators=(",", ":"))


def messages_snapshot(snapshot: AgentSnapshot, active_turn_id: str | None) -> MessagesSnapshotEvent:
    """The stored conversation as AG-UI messages; of the active turn only its user message.

    The active turn's own events follow the snapshot, so its answer and tool calls are shown once.
    """
    messages: list[Message] = []
    for stored in snapshot.messages:
        message_id = f"dex-message-{stored.sequence}"
        if stored.turn_id == active_turn_id and stored.role is not MessageRole.USER:
            continue
        if stored.role is MessageRole.USER:
            messages.append(UserMessage(id=message_id, content=stored.text or ""))
        elif stored.role is MessageRole.TOOL and stored.tool_call_id is not None:
            content = stored.tool_output or stored.text or ""
            messages.append(ToolMessage(id=message_id, content=content, tool_call_id=stored.tool_call_id))
        elif stored.role is MessageRole.ASSISTANT and stored.tool_call_id is not None:
            call = ToolCall(
                id=stored.tool_call_id,
                function=FunctionCall(name=stored.tool_name or "", arguments=stored.tool_arguments or "{}"),
            )
            messages.append(AssistantMessage(id=message_id, content=stored.text, tool_calls=[call]))
        elif stored.role is MessageRole.ASSISTANT and stored.text:
            messages.append(AssistantMessage(id=message_id, content=stored.text))
    return MessagesSnapshotEvent(messages=messages)


def run_started(session_id: str, run_id: str) -> RunStartedEvent:
    return RunStartedEvent(thread_id=session_id, run_id=run_id, protocol_version=AG_UI_PROTOCOL_VERSION)


def run_finished_success(session_id: str, run_id: str) -> RunFinishedEvent:
    return RunFinishedEvent(thread_id=session_id, run_id=run_id, outcome=RunFinishedSuccessOutcome())


class AgUiTranslator:
    """Turns the UI message chunks of one turn into the AG-UI events of one run."""

    def __init__(self, session_id: str, run_id: str) -> None:
        self._session_id = session_id
        self._run_id = run_id
        self._steps = 0
        self._open_step: str | None = None
        self.finish_reason: str | None = None
        self.turn_id: str | None = None

    def _id(self, part_id: object) -> str:
        return f"{self._run_id}-{part_id}"

    def on_chunk(self, chunk: Chunk) -> list[BaseEvent]:
        """The events of one chunk; ``finish`` gives none (`finish` reads committed state for them)."""
        kind = chunk["type"]
        if kind == "start-step":
            self._steps += 1
            self._open_step = f"model-call-{self._steps}"
            return [StepStartedEvent(step_name=self._open_step)]
        if kind == "finish-step" and self._open_step is not None:
            step, self._open_step = self._open_step, None
            return [StepFinishedEvent(step_name=step)]
        if kind == "text-start":
            return [TextMessageStartEvent(message_id=self._id(chunk["id"]), role="assistant")]
        if kind == "text-delta":
            delta = str(chunk["delta"])
            return [TextMessageContentEvent(message_id=self._id(chunk["id"]), delta=delta)] if delta else []
        if kind == "text-end":
            return [TextMessageEndEvent(message_id=self._id(chunk["id"]))]
        if kind == "reasoning-start":
            message_id = self._id(chunk["id"])
            return [
                ReasoningStartEvent(message_id=message_id),
                ReasoningMessageStartEvent(message_id=message_id),
            ]
        if kind == "reasoning-delta":
            delta = str(chunk["delta"])
            message_id = self._id(chunk["id"])
            return [ReasoningMessageContentEvent(message_id=message_id, delta=delta)] if delta else []
        if kind == "reasoning-end":
            message_id = self._id(chunk["id"])
            return [ReasoningMessageEndEvent(message_id=message_id), ReasoningEndEvent(message_id=message_id)]
        if kind == "tool-input-available":
            call_id = str(chunk["toolCallId"])
            return [
                ToolCallStartEvent(tool_call_id=call_id, tool_call_name=str(chunk["toolName"])),
                ToolCallArgsEvent(tool_call_id=call_id, delta=_output_text(chunk["input"])),
                ToolCallEndEvent(tool_call_id=call_id),
            ]
        if kind in ("tool-output-available", "tool-output-error", "tool-output-denied"):
            call_id = str(chunk["toolCallId"])
            if kind == "tool-output-available":
                content = _output_text(chunk["output"])
            elif kind == "tool-output-error":
                content = str(chunk["errorText"])
            else:
                content = "The user rejected the call."
            return [
                ToolCallResultEvent(message_id=f"{call_id}-result", tool_call_id=call_id, content=content)
            ]
        if kind == "data-dex-plan":
            return [StateSnapshotEvent(snapshot={"plan": chunk["data"]})]
        if kind == "error":
            self.finish_reason = "error"
            return [RunErrorEvent(message=str(chunk["errorText"]), code="turn_failed")]
        if kind == "finish":
            if self.finish_reason is None:
                self.finish_reason = str(chunk["finishReason"])
            metadata = cast(Mapping[str, Any], chunk.get("messageMetadata") or {})
            dex = cast(Mapping[str, Any], metadata.get("dex") or {})
            self.turn_id = _text(dex.get("turn_id"))
        return []

    def finish(self, snapshot: AgentSnapshot | None) -> list[BaseEvent]:
        """The run's last event, after ``finish``: ``RUN_FINISHED`` with its outcome (none after an error).

        Args:
            snapshot: Committed state read after the turn stopped, for the interrupts it waits for.
        """
        reason = self.finish_reason
        if reason == "error":
            return []
        outcome: RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
        if reason == "other":
            outcome = RunFinishedCancelledOutcome()
        elif reason == "tool-calls" and snapshot is not None and self.turn_id is not None:
            interrupts = pending_interrupts(snapshot, self.turn_id)
            outcome = (
                RunFinishedInterruptOutcome(interrupts=interrupts)
                if interrupts
                else RunFinishedSuccessOutcome()
            )
        else:
            outcome = RunFinishedSuccessOutcome()
        return [RunFinishedEvent(thread_id=self._session_id, run_id=self._run_id, outcome=outcome)]


def encode_event(event: BaseEvent) -> str:
    """Return an event as the JSON of one SSE ``data`` field (camelCase, unset fields left out)."""
    return event.model_dump_json(by_alias=True)
