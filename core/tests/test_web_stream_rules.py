"""When a held turn end counts as committed, and what a stream shows first, on scripted sequences.

Real sessions cannot hold a Step between writing its events and committing, nor a stream between an empty
poll and its snapshot read, so the interleavings that matter are scripted here: the Stream's next events
and the snapshots the server answers, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import cast

import grpc
from dex import ErrorSubStatus, LongPollTimeoutError, StreamMessage

from dex_agents import AgentSessionClient, AgentSessionStatus, AgentSnapshot, AgentState, AgentUsage
from dex_agents.values import AgentEvent
from dex_agents.web import EventStreamTimings
from dex_agents.web._stream_reads import committed_turn_end
from dex_agents.web._ui_stream import TurnTarget, ui_message_chunks


def _snapshot(active_turn_id: str | None) -> AgentSnapshot:
    status = (
        AgentSessionStatus.WAITING_FOR_USER_MESSAGE
        if active_turn_id is None
        else AgentSessionStatus.RUNNING_MODEL
    )
    state = AgentState(status, 0, active_turn_id, 3, None, accepts_turn_control=active_turn_id is not None)
    return AgentSnapshot(state, (), (), (), AgentUsage(), 0)


def _message(token: str, event_type: str, turn_id: str) -> StreamMessage[AgentEvent]:
    event = AgentEvent(event_type, turn_id, 1, "{}", "ApplyTurnControl-1")
    return StreamMessage(event, token, datetime.now(UTC), "#ApplyTurnControl-1")


_Answer = StreamMessage[AgentEvent] | None


class _ScriptedSession:
    """Answers snapshots from a list (the last repeats) and event reads from a token -> next event map.

    A token may map to a list of answers, one per read (the last repeats); ``None`` is an empty long poll.
    """

    def __init__(
        self,
        snapshots: Sequence[AgentSnapshot],
        events_after: dict[str, StreamMessage[AgentEvent] | list[_Answer]],
    ) -> None:
        self._snapshots = list(snapshots)
        self._events_after = events_after
        self.reads: list[str] = []

    async def get_agent_snapshot(self, session_id: str) -> AgentSnapshot:
        del session_id
        return self._snapshots.pop(0) if len(self._snapshots) > 1 else self._snapshots[0]

    async def read_agent_event(
        self, session_id: str, after: str, wait: timedelta
    ) -> StreamMessage[AgentEvent]:
        del wait
        self.reads.append(after)
        answer = self._events_after.get(after)
        message = answer.pop(0) if isinstance(answer, list) and len(answer) > 1 else answer
        if isinstance(message, list):
            message = message[0]
        if message is None:
            raise LongPollTimeoutError(
                grpc.StatusCode.DEADLINE_EXCEEDED,
                ErrorSubStatus.UNCATEGORIZED,
                "no event",
                "read",
                session_id,
            )
        return message


async def _committed(session: _ScriptedSession) -> AgentSnapshot | None:
    sessions = cast(AgentSessionClient, session)
    return await committed_turn_end(sessions, "s-1", "turn-1", "end", settle_seconds=1)


async def test_the_next_turns_start_before_the_commit_does_not_drop_a_steered_end() -> None:
    # ApplyTurnControl wrote turn_steered(turn-1) and turn_started(turn-2); its commit lands a read later.
    session = _ScriptedSession(
        [_snapshot("turn-1"), _snapshot("turn-1"), _snapshot("turn-2")],
        {"end": _message("next", "turn_started", "turn-2")},
    )
    committed = await _committed(session)
    assert committed is not None and committed.state is not None
    assert committed.state.active_turn_id == "turn-2"
    assert session.reads == ["end", "next"]


async def test_a_later_event_of_the_same_turn_drops_an_end_that_never_committed() -> None:
    # The attempt that wrote the end died; its retry writes the turn's events again.
    session = _ScriptedSession(
        [_snapshot("turn-1")],
        {
            "end": _message("other", "turn_started", "turn-2"),
            "other": _message("retry", "text_delta", "turn-1"),
        },
    )
    assert await _committed(session) is None
    assert session.reads == ["end", "other"]


async def test_an_end_that_commits_after_a_quiet_wait_is_kept() -> None:
    session = _ScriptedSession([_snapshot("turn-1"), _snapshot(None)], {})
    committed = await _committed(session)
    assert committed is not None and committed.state is not None and committed.state.active_turn_id is None
    assert session.reads == ["end"]


async def test_the_ai_sdk_stream_shows_events_written_between_an_empty_poll_and_its_snapshot() -> None:
    # The poll after "draft" comes back empty; before the stream reads the snapshot, the retried model call
    # writes its text and commits the turn's end. The snapshot then shows the turn ended, but its events
    # are in the Stream: the stream must show them, not finish from the snapshot without them.
    retried = _message("retry", "text_delta", "turn-1")
    retried = replace(retried, value=replace(retried.value, attempt=2, payload='{"text":"Shipped."}'))
    retried = replace(retried, value=replace(retried.value, step_execution_id="RunModel-1"))
    end = _message("end", "turn_completed", "turn-1")
    session = _ScriptedSession([_snapshot(None)], {"draft": [None, retried], "retry": end})
    sessions = cast(AgentSessionClient, session)
    timings = EventStreamTimings(long_poll_seconds=1, settle_seconds=1)
    chunks = [
        chunk
        async for chunk in ui_message_chunks(sessions, "s-1", "draft", TurnTarget("turn-1"), {}, timings)
    ]
    assert [chunk["type"] for chunk in chunks] == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert chunks[3]["delta"] == "Shipped." and chunks[-1]["finishReason"] == "stop"
    assert session.reads == ["draft", "draft", "retry"]
