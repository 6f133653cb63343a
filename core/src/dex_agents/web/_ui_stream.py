"""One turn as the AI SDK UI message stream (``x-vercel-ai-ui-message-stream: v1``), for ``useChat``.

The mapping:

* A turn is one assistant UI message (``start`` ... ``finish``).
* A ``RunModel`` Step execution is one AI SDK step (``start-step`` ... ``finish-step``); its text and
  reasoning deltas are text and reasoning parts. A higher attempt of the same execution sends
  ``reset-step``, which drops the parts of the attempt it replaces; deltas of a lower attempt are dropped.
* Tool calls are dynamic tool parts. Their arguments, approvals and results come from committed state (the
  turn's tool call records, or its stored messages once the turn ended), never from events alone, so a
  part never shows a call that a dead attempt asked for.
* A pending approval is ``tool-approval-request`` whose ``approvalId`` is the interrupt ID.
* A pending question is a dynamic ``ask_user`` tool part awaiting its output, whose ``toolCallId`` is the
  question's interrupt ID: the ``ask_user`` call's own part, or, for a question a tool asks
  (``<tool_call_id>-input-<n>``), a part added after the asking call's, with input ``{question, choices,
  allows_free_text, deadline, tool_call_id, tool_name}``. ``useChat`` answers it with ``addToolOutput``.
* The plan is one data part, ``data-dex-plan`` with ``id`` ``plan``, sent again (the client replaces it in
  place) each time the turn changes the plan.
* The stream finishes with ``tool-calls`` when the turn waits only for the user: approvals and questions
  still pending that the browser was shown and has not answered, so ``useChat`` can send the answers; it
  carries the Dex resume token in the message metadata
  (``{"dex": {"resume_token", "turn_id", "turn_end"}}``) so the request with the answers continues where
  it stopped. A turn that ended finishes with ``stop`` (completed), ``error`` (failed) or ``other``
  (steered or cancelled), and ``turn_end`` names its end event (``null`` while approvals wait, or when the
  Stream lost the end event).
* A turn end is sent once it committed; committed state ends a stream whose events the Stream lost.
* Older AI SDK majors get only the chunks their schema accepts (no ``reset-step`` before 7, no approval or
  denial chunks before 6): see ``_ai_sdk``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from dex import StreamMessage

from dex_agents.client import AgentSessionClient
from dex_agents.values import AgentEvent, AgentSnapshot, MessageRole
from dex_agents.web._ai_sdk import AiSdkDialect
from dex_agents.web._event_stream import EventStreamTimings
from dex_agents.web._stream_reads import (
    TURN_END_EVENT_TYPES,
    RejectedResumeTokenError,
    committed_turn_end,
    newest_token,
    read_next_event,
    snapshot_or_none,
    turn_has_ended,
)
from dex_agents.web._ui_translator import Chunk, TurnTranslator, is_model_step

__all__ = [
    "UI_MESSAGE_STREAM_HEADERS",
    "TurnTarget",
    "encode_chunk",
    "ui_message_chunks",
]

#: Headers of a UI message stream response (``text/event-stream`` comes from the SSE response).
UI_MESSAGE_STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1", "x-accel-buffering": "no"}

# A steered or cancelled turn did not finish its work, and it did not fail either: the AI SDK's "other".
_FINISH_REASONS = {
    "turn_completed": "stop",
    "turn_failed": "error",
    "turn_steered": "other",
    "turn_cancelled": "other",
}


@dataclass(frozen=True)
class TurnTarget:
    """Which turn a stream follows.

    Attributes:
        turn_id: The turn; ``None`` for the next turn that starts (the one a sent message starts).
        skip_turn_id: With ``turn_id`` ``None``: the turn that ran when the message was sent.
        user_text: With ``turn_id`` ``None``: the sent message, to find its turn in committed state.
        after_sequence: With ``turn_id`` ``None``: the newest stored message's sequence before sending.
    """

    turn_id: str | None
    skip_turn_id: str | None = None
    user_text: str | None = None
    after_sequence: int = 0


def _find_target_turn(snapshot: AgentSnapshot, target: TurnTarget) -> str | None:
    """The turn a sent message started, from committed state (for a stream that missed its start)."""
    for message in snapshot.messages:
        if (
            message.role is MessageRole.USER
            and message.sequence > target.after_sequence
            and message.text == target.user_text
        ):
            return message.turn_id
    state = snapshot.state
    if state is not None and state.active_turn_id not in (None, target.skip_turn_id):
        return state.active_turn_id
    return None


def _start(turn_id: str) -> Chunk:
    return {"type": "start", "messageId": f"dex-{turn_id}"}


def _finish(reason: str, turn_id: str, token: str, turn_end: str | None = None) -> Chunk:
    return {
        "type": "finish",
        "finishReason": reason,
        "messageMetadata": {"dex": {"turn_id": turn_id, "resume_token": token, "turn_end": turn_end}},
    }


async def ui_message_chunks(
    sessions: AgentSessionClient,
    session_id: str,
    token: str,
    target: TurnTarget,
    browser_tools: Mapping[str, int],
    timings: EventStreamTimings,
    dialect: AiSdkDialect = AiSdkDialect.LATEST,
) -> AsyncIterator[Chunk]:
    """Yield the UI message chunks of one turn, from the events after ``token``.

    Args:
        sessions: The session client.
        session_id: The session.
        token: The resume token to read events after.
        target: The turn to follow.
        browser_tools: How far the browser's message already shows each tool call, by tool call ID.
        timings: Long-poll and settle waits.
        dialect: The client's AI SDK major: what it accepts.

    Yields:
        UI message chunks, ending with ``finish``.
    """
    translator = TurnTranslator(browser_tools, dialect)
    turn_id = target.turn_id
    started = False
    pending: StreamMessage[AgentEvent] | None = None
    while True:
        wait = (
            timings.settle_seconds if translator.needs_sync or turn_id is None else timings.long_poll_seconds
        )
        try:
            message = pending or await read_next_event(sessions, session_id, token, wait)
        except RejectedResumeTokenError:
            # The previous response's token expired: committed state fills in what the events would have.
            token = await newest_token(sessions, session_id)
            continue
        pending = None
        if message is None:
            snapshot = await snapshot_or_none(sessions, session_id)
            if snapshot is None:
                continue
            if turn_id is None:
                turn_id = _find_target_turn(snapshot, target)
                if turn_id is None:
                    continue
            if not started:
                started = True
                yield _start(turn_id)
            # The snapshot may show Steps that ran after the empty wait; their events were written before
            # their commit, so they are in the Stream now. Show them before anything the snapshot says.
            try:
                pending = await read_next_event(sessions, session_id, token, timings.settle_seconds)
            except RejectedResumeTokenError:
                continue  # the next read starts again from the newest event
            if pending is not None:
                continue
            if turn_has_ended(snapshot, turn_id):
                for chunk in _ended(translator, snapshot, turn_id, None, token):
                    yield chunk
                return
            # Every event written before the snapshot has been read: a call whose tool_call_deferred event
            # never came lost it, and shows in the open step.
            for chunk in translator.sync(snapshot, turn_id, every_call=True):
                yield chunk
            if translator.waits_only_for_the_user(snapshot, turn_id):
                # The model call that asked has committed: its held text is final.
                end = [*translator.release_held(), *translator.close_step()]
                for chunk in [*end, _finish("tool-calls", turn_id, token)]:
                    yield chunk
                return
            continue
        event = message.value
        if turn_id is None:
            if event.type != "turn_started" or event.turn_id in (None, target.skip_turn_id):
                token = message.resume_token
                continue
            turn_id = event.turn_id
        if event.turn_id != turn_id:
            token = message.resume_token
            continue
        if not started:
            started = True
            yield _start(turn_id)
        if event.step_execution_id != translator.model_step_id:
            # Another Step's event: Steps of a turn run one after the other, so the model call before it
            # committed, and the text held for it is final.
            for chunk in translator.release_held():
                yield chunk
        if event.type in TURN_END_EVENT_TYPES:
            snapshot = await committed_turn_end(
                sessions, session_id, turn_id, message.resume_token, timings.settle_seconds
            )
            if snapshot is None:
                # A later event of the turn arrived first: this end's attempt never committed. Read on.
                token = message.resume_token
                continue
            for chunk in _ended(translator, snapshot, turn_id, event.type, message.resume_token):
                yield chunk
            return
        if translator.needs_sync and (translator.model_step_begins(event) or not is_model_step(event)):
            # Tool Steps and the next model call start only after the last model call committed its
            # records, so committed state now shows the calls the events announced.
            translator.observe_resolution(event)
            snapshot = await snapshot_or_none(sessions, session_id)
            if snapshot is not None:
                for chunk in translator.sync(snapshot, turn_id):
                    yield chunk
        for chunk in translator.on_event(event):
            yield chunk
        token = message.resume_token


def _ended(
    translator: TurnTranslator, snapshot: AgentSnapshot, turn_id: str, end_type: str | None, token: str
) -> list[Chunk]:
    chunks = translator.release_held()
    chunks += translator.reconcile_ended_turn(snapshot, turn_id)
    chunks += translator.close_step()
    state = snapshot.state
    failed = end_type == "turn_failed" or (
        end_type is None and state is not None and state.last_turn_error is not None
    )
    if failed:
        error = state.last_turn_error if state is not None else None
        chunks.append({"type": "error", "errorText": error or "the turn failed"})
    reason = _FINISH_REASONS.get(end_type or "", "error" if failed else "stop")
    chunks.append(_finish(reason, turn_id, token, end_type))
    return chunks


def encode_chunk(chunk: Chunk) -> str:
    """Return a chunk as the compact JSON of one SSE ``data`` field."""
    return json.dumps(chunk, separators=(",", ":"))
