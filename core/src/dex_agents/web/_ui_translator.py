"""How one turn becomes UI message chunks: its steps and text, tool parts, approvals, questions, the plan.

Text and reasoning come from the events of the turn's ``RunModel`` Step executions; tool parts, approvals,
questions and the plan come from committed state (the turn's records and pending interrupts, or its stored
messages once it ended), which the stream reads at the points `TurnTranslator.needs_sync` asks for.

A tool part belongs to the UI step of the ``RunModel`` execution that asked for the call. That execution
wrote the call's ``tool_call_deferred`` event (its ``step_execution_id``) before it committed the record, so
the translator shows a record only once it has read that event: a snapshot read while the stream is still
in an earlier step can already hold a later model call's records, and those wait for their own step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from dex_agents._tools._builtins import ASK_USER
from dex_agents.values import (
    AgentEvent,
    AgentInterrupt,
    AgentPlan,
    AgentSnapshot,
    AgentToolCall,
    InterruptKind,
    MessageRole,
    QuestionResolution,
    ToolCallStatus,
)
from dex_agents.web._ai_sdk import AiSdkDialect
from dex_agents.web._json import parse_json_text
from dex_agents.web._stream_reads import turn_has_ended

__all__ = [
    "PLAN_DATA_PART",
    "QUESTION_TOOL_NAME",
    "BrowserToolState",
    "Chunk",
    "TurnTranslator",
    "is_model_step",
]

#: The data part that carries the session's plan (``id`` ``plan``).
PLAN_DATA_PART = "data-dex-plan"
#: The tool name of every question part, whether the model's ``ask_user`` call or a tool's question.
QUESTION_TOOL_NAME = ASK_USER

_MODEL_STEP_PREFIX = "RunModel-"
_PLAN_PART_ID = "plan"

Chunk = dict[str, Any]


class BrowserToolState:
    """How far the browser's message shows a tool call: its input, an approval request, or its output."""

    INPUT = 1
    APPROVAL = 2
    OUTPUT = 3


def is_model_step(event: AgentEvent) -> bool:
    return event.step_execution_id.startswith(_MODEL_STEP_PREFIX)


class TurnTranslator:
    """Turns one turn's events and committed records into UI message chunks."""

    def __init__(self, browser_tools: Mapping[str, int], dialect: AiSdkDialect = AiSdkDialect.LATEST) -> None:
        self.tools: dict[str, int] = dict(browser_tools)
        self._dialect = dialect
        self._step: tuple[str, int] | None = None
        self._step_open = False
        self._text_id: str | None = None
        self._reasoning_id: str | None = None
        self._part_count = 0
        self.streamed_text = False
        # Tool calls that events announced and committed state does not show yet, by the attempt that
        # announced them; a replaced attempt's calls never commit.
        self._announced: dict[str, tuple[str, int]] = {}
        # Every call whose tool_call_deferred event the stream read, by the attempt that announced it: the
        # calls whose parts may be shown, each in the step of the model call that asked for it.
        self._announced_in: dict[str, tuple[str, int]] = {}
        # For a client without reset-step: the current model call's text and reasoning chunks, held until
        # its attempt commits (`release_held`), so a retry never leaves a dead attempt's text on screen.
        self._held: list[Chunk] = []
        self._finished: set[str] = set()
        # Approvals the events showed rejected: once the turn ended, stored messages cannot tell.
        self._rejected: set[str] = set()
        # Every interrupt the events showed resolved, rejected or not.
        self._resolved: set[str] = set()
        # The parts of the questions tools asked, by interrupt ID: the asking call's ID.
        self._tool_questions: dict[str, str] = {}
        # Questions the events showed answered (True) or declined or expired (False).
        self._question_ends: dict[str, bool] = {}
        # The plan a plan_updated event announced, until committed state shows it; the plan last sent.
        self._plan_announced: tuple[int, str] | None = None
        self._plan_sent: tuple[int, str] | None = None

    @property
    def needs_sync(self) -> bool:
        return bool(self._announced) or bool(self._finished) or self._plan_announced is not None

    def _new_part_id(self, kind: str) -> str:
        self._part_count += 1
        return f"{kind}-{self._part_count}"

    @property
    def model_step_id(self) -> str | None:
        """The ``RunModel`` Step execution the open UI step shows, if any."""
        return self._step[0] if self._step is not None else None

    def _end_parts(self) -> list[Chunk]:
        chunks: list[Chunk] = []
        if self._reasoning_id is not None:
            chunks.append({"type": "reasoning-end", "id": self._reasoning_id})
            self._reasoning_id = None
        if self._text_id is not None:
            chunks.append({"type": "text-end", "id": self._text_id})
            self._text_id = None
        return chunks

    def close_parts(self) -> list[Chunk]:
        if self._held:
            # Held parts stay together: they end where they are released.
            self._held += self._end_parts()
            return []
        return self._end_parts()

    def release_held(self) -> list[Chunk]:
        """Send the held text and reasoning of the current model call: its attempt has committed."""
        if not self._held:
            return []
        chunks = self._held + self._end_parts()
        self._held = []
        return chunks

    def close_step(self) -> list[Chunk]:
        chunks = self.close_parts()
        if self._step_open:
            chunks.append({"type": "finish-step"})
            self._step_open = False
        return chunks

    def model_step_begins(self, event: AgentEvent) -> bool:
        """Whether ``event`` comes from a model Step execution this stream has not seen."""
        return is_model_step(event) and (self._step is None or self._step[0] != event.step_execution_id)

    def on_event(self, event: AgentEvent) -> list[Chunk]:
        chunks: list[Chunk] = []
        parsed = parse_json_text(event.payload)
        payload = cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {}
        if is_model_step(event):
            current = self._step
            if current is None or current[0] != event.step_execution_id:
                chunks += self.close_step()
                chunks.append({"type": "start-step"})
                self._step = (event.step_execution_id, event.attempt)
                self._step_open = True
            elif event.attempt > current[1]:
                # A retry replaced the attempt: drop its partial parts and the calls it announced.
                if self._dialect.has_reset_step:
                    chunks.append({"type": "reset-step"})
                else:
                    self._held = []  # the client never saw them
                    self.streamed_text = False
                self._text_id = self._reasoning_id = None
                self._step = (event.step_execution_id, event.attempt)
                self._announced = {
                    call: source for call, source in self._announced.items() if source[0] != current[0]
                }
                self._announced_in = {
                    call: source for call, source in self._announced_in.items() if source[0] != current[0]
                }
                # Its plan never commits; a retry that writes the plan announces it again.
                self._plan_announced = None
            elif event.attempt < current[1]:
                return []
            step_chunks = self._model_step_event(event, payload)
            if self._dialect.has_reset_step:
                chunks += step_chunks
            else:
                self._held += step_chunks
        if event.type == "tool_call_finished":
            self._finished.add(str(payload.get("tool_call_id", "")))
        elif event.type == "interrupt_resolved":
            self.observe_resolution(event)
        elif event.type == "plan_updated":
            revision, status = payload.get("revision"), payload.get("status")
            if isinstance(revision, int) and isinstance(status, str):
                self._plan_announced = (revision, status)
        return chunks

    def _model_step_event(self, event: AgentEvent, payload: dict[str, Any]) -> list[Chunk]:
        text = payload.get("text")
        if event.type == "text_delta" and isinstance(text, str):
            chunks: list[Chunk] = []
            if self._reasoning_id is not None:
                chunks.append({"type": "reasoning-end", "id": self._reasoning_id})
                self._reasoning_id = None
            if self._text_id is None:
                self._text_id = self._new_part_id("text")
                chunks.append({"type": "text-start", "id": self._text_id})
            chunks.append({"type": "text-delta", "id": self._text_id, "delta": text})
            self.streamed_text = True
            return chunks
        if event.type == "reasoning_delta" and isinstance(text, str):
            chunks = []
            if self._reasoning_id is None:
                self._reasoning_id = self._new_part_id("reasoning")
                chunks.append({"type": "reasoning-start", "id": self._reasoning_id})
            chunks.append({"type": "reasoning-delta", "id": self._reasoning_id, "delta": text})
            return chunks
        if event.type == "tool_call_deferred":
            call_id = str(payload.get("tool_call_id", ""))
            source = (event.step_execution_id, event.attempt)
            self._announced_in[call_id] = source
            if call_id not in self.tools:
                self._announced[call_id] = source
        return []

    def _may_show(self, call_id: str, every_call: bool) -> bool:
        return every_call or call_id in self.tools or call_id in self._announced_in

    def observe_resolution(self, event: AgentEvent) -> None:
        """Note how an ``interrupt_resolved`` event resolved its interrupt; any other event is ignored.

        The stream calls it before it syncs on that event too: a sync that finds the turn already ended
        shows calls from stored messages, which cannot tell a rejected call from one that ran.
        """
        if event.type != "interrupt_resolved":
            return
        parsed = parse_json_text(event.payload)
        payload = cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {}
        interrupt_id = str(payload.get("interrupt_id", ""))
        self._resolved.add(interrupt_id)
        if payload.get("approved") is False:
            self._rejected.add(interrupt_id)
        if payload.get("kind") == InterruptKind.QUESTION.value:
            self._question_ends[interrupt_id] = payload.get("answered") is True

    def sync(self, snapshot: AgentSnapshot, turn_id: str, *, every_call: bool = False) -> list[Chunk]:
        """Bring the tool parts up to the turn's committed records, or its stored messages once it ended.

        Args:
            snapshot: Committed state.
            turn_id: The turn the stream shows.
            every_call: Show calls whose ``tool_call_deferred`` event the stream has not read too (in the
                open step). Only for a stream that has read every event written before ``snapshot``: the
                events it missed are lost, not late.
        """
        if turn_has_ended(snapshot, turn_id):
            self._announced.clear()
            self._finished.clear()
            return self._stored_tool_calls(snapshot, turn_id, every_call=every_call)
        pending = {interrupt.tool_call_id: interrupt for interrupt in snapshot.pending_interrupts}
        records = [
            record
            for record in snapshot.tool_calls
            if record.turn_id == turn_id and self._may_show(record.tool_call_id, every_call)
        ]
        # A committed record of the open model call means that call committed: its held text is final.
        step = self.model_step_id
        committed = any(self._announced_in.get(record.tool_call_id, ("", 0))[0] == step for record in records)
        chunks: list[Chunk] = self.release_held() if committed else []
        # Inputs first, then approvals, then outcomes: the same order however far the calls have got.
        for record in records:
            call_id = record.tool_call_id
            self._announced.pop(call_id, None)
            if call_id not in self.tools:
                chunks += self.close_parts()
                chunks.append(_tool_input(call_id, record.tool_name, record.arguments))
                self.tools[call_id] = BrowserToolState.INPUT
        for record in records:
            call_id = record.tool_call_id
            interrupt = pending.get(call_id)
            if (
                record.status is ToolCallStatus.AWAITING_APPROVAL
                and interrupt is not None
                and self.tools[call_id] < BrowserToolState.APPROVAL
            ):
                if self._dialect.has_approvals:
                    approval_id = interrupt.interrupt_id
                    chunks.append(
                        {"type": "tool-approval-request", "approvalId": approval_id, "toolCallId": call_id}
                    )
                # Without approval chunks, the input-available part itself asks (see `AiSdkDialect`).
                self.tools[call_id] = BrowserToolState.APPROVAL
        chunks += self._question_parts(snapshot.pending_interrupts, records)
        for record in records:
            call_id = record.tool_call_id
            if record.is_final:
                self._finished.discard(call_id)
                if self.tools[call_id] < BrowserToolState.OUTPUT:
                    chunks.append(self._tool_outcome(record))
                    self.tools[call_id] = BrowserToolState.OUTPUT
        chunks += self._resolved_tool_questions(snapshot.pending_interrupts, records)
        known = {record.tool_call_id for record in snapshot.tool_calls if record.turn_id == turn_id}
        # A finished call without a record belongs to an ended turn; the end's reconciliation shows it.
        self._finished &= known
        return chunks + self.plan_part(snapshot.plan)

    def _question_parts(
        self, interrupts: Sequence[AgentInterrupt], records: Sequence[AgentToolCall]
    ) -> list[Chunk]:
        """Add a part for each pending question a tool asked (an ``ask_user`` call's own part asks)."""
        calls = {record.tool_call_id for record in records}
        chunks: list[Chunk] = []
        for interrupt in interrupts:
            question_id = interrupt.interrupt_id
            if (
                interrupt.kind is not InterruptKind.QUESTION
                or interrupt.tool_call_id not in calls
                or question_id == interrupt.tool_call_id
            ):
                continue
            self._tool_questions[question_id] = interrupt.tool_call_id
            if question_id in self.tools:
                continue  # the browser's message has the part already
            question = {
                "question": interrupt.question,
                "choices": list(interrupt.choices),
                "allows_free_text": interrupt.allows_free_text,
                "deadline": interrupt.deadline,
                "tool_call_id": interrupt.tool_call_id,
                "tool_name": interrupt.tool_name,
            }
            chunks += self.close_parts()
            chunks.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": question_id,
                    "toolName": QUESTION_TOOL_NAME,
                    "input": question,
                    "dynamic": True,
                }
            )
            self.tools[question_id] = BrowserToolState.INPUT
        return chunks

    def _resolved_tool_questions(
        self, interrupts: Sequence[AgentInterrupt] | None, records: Sequence[AgentToolCall]
    ) -> list[Chunk]:
        """End the parts of tools' questions that are no longer pending and the browser did not answer.

        Args:
            interrupts: The pending interrupts; `None` once the turn ended (nothing is pending).
            records: The turn's tool call records (none once the turn ended).
        """
        pending = {interrupt.interrupt_id for interrupt in interrupts or ()}
        answers = {
            answer.interrupt_id: answer
            for record in records
            for answer in record.input_answers
            if answer.resolution is QuestionResolution.ANSWERED
        }
        final = {record.tool_call_id for record in records if record.is_final}
        chunks: list[Chunk] = []
        for question_id, call_id in self._tool_questions.items():
            if question_id in pending or self.tools.get(question_id, 0) >= BrowserToolState.OUTPUT:
                continue
            answer = answers.get(question_id)
            answered = self._question_ends.get(question_id)
            if answer is not None:
                output: object = {"status": "answered", "answer": answer.answer}
            elif answered is True:
                output = {"status": "answered"}
            elif answered is False or call_id in final or interrupts is None:
                chunks.append(self._denied(question_id, "The question was not answered."))
                self.tools[question_id] = BrowserToolState.OUTPUT
                continue
            else:
                continue  # resolved, but neither the events nor the record tell how yet
            chunks.append(
                {
                    "type": "tool-output-available",
                    "toolCallId": question_id,
                    "output": output,
                    "dynamic": True,
                }
            )
            self.tools[question_id] = BrowserToolState.OUTPUT
        return chunks

    def plan_part(self, plan: AgentPlan | None) -> list[Chunk]:
        """Send the plan once committed state shows the revision the turn's events announced."""
        announced = self._plan_announced
        if announced is None or plan is None or plan.revision < announced[0]:
            return []
        if plan.revision == announced[0] and plan.status.value != announced[1]:
            return []
        self._plan_announced = None
        shown = (plan.revision, plan.status.value)
        if shown == self._plan_sent:
            return []
        self._plan_sent = shown
        tasks = [{"content": task.content, "status": task.status.value} for task in plan.tasks]
        data = {
            "revision": plan.revision,
            "status": plan.status.value,
            "tasks": tasks,
            "updated_at": plan.updated_at,
        }
        return [{"type": PLAN_DATA_PART, "id": _PLAN_PART_ID, "data": data}]

    def reconcile_ended_turn(self, snapshot: AgentSnapshot, turn_id: str) -> list[Chunk]:
        """Show what the ended turn stored that the stream has not shown: its tool calls and answer."""
        chunks = self._stored_tool_calls(snapshot, turn_id, every_call=True)
        chunks += self._resolved_tool_questions(None, ())
        chunks += self.plan_part(snapshot.plan)
        if not self.streamed_text:
            chunks += self._stored_answer([m for m in snapshot.messages if m.turn_id == turn_id])
        return chunks

    def _stored_tool_calls(self, snapshot: AgentSnapshot, turn_id: str, *, every_call: bool) -> list[Chunk]:
        """The tool parts of an ended turn that the stream has not shown, from its stored messages."""
        messages = [message for message in snapshot.messages if message.turn_id == turn_id]
        chunks: list[Chunk] = []
        for message in messages:
            call_id = message.tool_call_id
            if call_id is None or not self._may_show(call_id, every_call):
                continue
            if message.role is MessageRole.ASSISTANT and call_id not in self.tools:
                chunks += self.close_parts()
                chunks.append(_tool_input(call_id, message.tool_name or "", message.tool_arguments))
                self.tools[call_id] = BrowserToolState.INPUT
            elif message.role is MessageRole.TOOL and self.tools.get(call_id, 0) < BrowserToolState.OUTPUT:
                if (
                    not every_call
                    and self.tools.get(call_id) == BrowserToolState.APPROVAL
                    and call_id not in self._resolved
                ):
                    # Whether its approval was rejected is in an event not read yet: the turn end's
                    # reconciliation, which has read them all, shows it.
                    continue
                if call_id not in self.tools:
                    chunks.append(_tool_input(call_id, message.tool_name or "", message.tool_arguments))
                if call_id in self._rejected:
                    chunks.append(self._denied(call_id, message.tool_output or "The user rejected the call."))
                else:
                    output = parse_json_text(message.tool_output)
                    chunks.append(
                        {
                            "type": "tool-output-available",
                            "toolCallId": call_id,
                            "output": output,
                            "dynamic": True,
                        }
                    )
                self.tools[call_id] = BrowserToolState.OUTPUT
        return chunks

    def _stored_answer(self, messages: Sequence[Any]) -> list[Chunk]:
        """The turn's last answer text, for a stream whose text deltas the Stream lost."""
        answer: list[str] = []
        for message in messages:
            if message.role is MessageRole.TOOL:
                answer = []
            elif message.role is MessageRole.ASSISTANT and message.text and message.tool_call_id is None:
                answer.append(message.text)
        if not answer:
            return []
        part_id = self._new_part_id("text")
        return [
            {"type": "text-start", "id": part_id},
            {"type": "text-delta", "id": part_id, "delta": "\n\n".join(answer)},
            {"type": "text-end", "id": part_id},
        ]

    def _denied(self, call_id: str, reason: str) -> Chunk:
        """A call or question the user turned down; an output error for a client without denials."""
        if self._dialect.has_denials:
            return {"type": "tool-output-denied", "toolCallId": call_id}
        return {"type": "tool-output-error", "toolCallId": call_id, "errorText": reason, "dynamic": True}

    def _tool_outcome(self, record: AgentToolCall) -> Chunk:
        if record.status is ToolCallStatus.SUCCEEDED:
            return {
                "type": "tool-output-available",
                "toolCallId": record.tool_call_id,
                "output": parse_json_text(record.output),
                "dynamic": True,
            }
        if record.status is ToolCallStatus.REJECTED:
            return self._denied(
                record.tool_call_id, record.rejection_message or "The user rejected the call."
            )
        error = record.error or f"the tool call ended as {record.status.value}"
        return {
            "type": "tool-output-error",
            "toolCallId": record.tool_call_id,
            "errorText": error,
            "dynamic": True,
        }

    def waits_only_for_the_user(self, snapshot: AgentSnapshot, turn_id: str) -> bool:
        """Whether every unfinished call of the turn waits for the browser's approval or answer.

        The browser must have been shown the approval or question and not have answered it yet.
        """
        asked = {interrupt.tool_call_id: interrupt for interrupt in snapshot.pending_interrupts}
        unfinished = [
            record for record in snapshot.tool_calls if record.turn_id == turn_id and not record.is_final
        ]
        return bool(unfinished) and all(self._waits_for_the_browser(record, asked) for record in unfinished)

    def _waits_for_the_browser(self, record: AgentToolCall, asked: Mapping[str, AgentInterrupt]) -> bool:
        interrupt = asked.get(record.tool_call_id)
        if interrupt is None:
            return False
        shown = self.tools.get(interrupt.interrupt_id)
        if record.status is ToolCallStatus.AWAITING_APPROVAL:
            return shown == BrowserToolState.APPROVAL
        return record.status is ToolCallStatus.AWAITING_ANSWER and shown == BrowserToolState.INPUT


def _tool_input(call_id: str, tool_name: str, arguments: str | None) -> Chunk:
    return {
        "type": "tool-input-available",
        "toolCallId": call_id,
        "toolName": tool_name,
        "input": parse_json_text(arguments) if arguments else {},
        "dynamic": True,
    }
