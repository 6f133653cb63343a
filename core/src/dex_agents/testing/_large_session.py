"""Matrix item 17: a session of 100 KiB messages and tool results past 20 MiB, served by fresh Workers.

Each turn sends a 100 KiB user message; the model reads several orders at once, each read returning
100 KiB, and then answers. Every few turns the Worker is SIGKILLed and replaced, so the next turn, snapshot
and page are served by a Worker whose blob cache is empty. After every turn the snapshot and a page of
messages must answer, the turn must have ended without an error, and each read's whole output must be
readable from the session while the model saw only its first part. At the end, paging from the newest
message back returns every stored message exactly once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from dex_agents import (
    DEFAULT_INLINE_TOOL_OUTPUT_BYTES,
    MAX_RPC_OUTPUT_BYTES,
    AgentMessage,
    AgentSessionClient,
    AgentSnapshot,
    tool_output_view,
)
from dex_agents.testing._invocations import Invocation
from dex_agents.testing._matrix_spec import wait_for_turn_end
from dex_agents.testing._script import ScriptedResponse, ScriptedToolCall

__all__ = [
    "LARGE_MESSAGE_BYTES",
    "LARGE_SESSION_STORED_BYTES",
    "LargeSessionRun",
    "read_every_message",
    "run_large_session",
]

#: The size of each user message and each tool output of the large session.
LARGE_MESSAGE_BYTES = 100 * 1024
#: What the large session stores before it stops: its messages (with their runner items) and tool outputs.
LARGE_SESSION_STORED_BYTES = 20 * 1024 * 1024
_READS_PER_TURN = 6
_TURNS_BETWEEN_WORKER_KILLS = 4
_MAX_TURNS = 60
# A turn with six 100 KiB results takes longer than a small one, more so on a cold Worker.
_TURN_TIMEOUT_SECONDS = 120.0


@dataclass(frozen=True)
class LargeSessionRun:
    """What the large session did.

    Attributes:
        turns: Turns taken, all ended without an error.
        stored_bytes: Its stored messages (JSON with their runner items) and tool outputs stored apart.
        message_count: Stored messages, each returned once by paging.
        worker_kills: Workers SIGKILLed between turns.
        largest_snapshot_bytes: The largest snapshot's JSON.
        largest_page_bytes: The largest page's JSON.
    """

    turns: int
    stored_bytes: int
    message_count: int
    worker_kills: int
    largest_snapshot_bytes: int
    largest_page_bytes: int


def _json_size(value: object) -> int:
    return len(json.dumps(asdict(value), separators=(",", ":"), sort_keys=True))  # pyright: ignore[reportArgumentType]


def _user_text(turn: int) -> str:
    head = f"Turn {turn}: please check these orders against the attached statement.\n"
    return head + "statement line; " * ((LARGE_MESSAGE_BYTES - len(head)) // len("statement line; "))


def large_session_turn(
    read: Callable[[str, str], ScriptedToolCall], turn: int, *, one_call_per_response: bool = False
) -> list[ScriptedResponse]:
    """One turn's script: several 100 KiB tool calls at once (or one per model response), then an answer."""
    calls = [read(f"read-{turn}-{number}", f"A-{turn}-{number}") for number in range(_READS_PER_TURN)]
    answer = ScriptedResponse(text=f"Turn {turn}: every order matches.")
    if one_call_per_response:
        return [*(ScriptedResponse(tool_calls=(call,)) for call in calls), answer]
    return [ScriptedResponse(tool_calls=tuple(calls)), answer]


async def read_every_message(
    sessions: AgentSessionClient, session_id: str, *, include_framework_items: bool = False, limit: int = 200
) -> tuple[list[AgentMessage], int]:
    """Page from the newest message back, as a UI scrolling back does.

    Returns:
        Every message, oldest first, and the largest page's JSON size.
    """
    found: list[AgentMessage] = []
    largest = 0
    before: int | None = None
    while True:
        page = await sessions.list_agent_messages(
            session_id, before_sequence=before, limit=limit, include_framework_items=include_framework_items
        )
        assert not page.missing_chunks, f"the client did not load the chunks the page named: {page}"
        largest = max(largest, _json_size(page))
        found[:0] = page.messages
        if page.next_before_sequence is None:
            return found, largest
        assert page.messages, f"a page before {before} is empty but names {page.next_before_sequence}"
        before = page.next_before_sequence


async def run_large_session(
    sessions: AgentSessionClient,
    session_id: str,
    *,
    read: Callable[[str, str], ScriptedToolCall],
    script: Callable[[list[list[ScriptedResponse]]], None],
    replace_worker: Callable[[], Awaitable[None]],
    model_calls: Callable[[], list[Invocation]],
    one_call_per_response: bool = False,
) -> LargeSessionRun:
    """Run the large session and check it after every turn.

    Args:
        sessions: The client of the Flow under test.
        session_id: A new session ID.
        read: Builds a scripted call of the read tool from a tool call ID and an order ID; the call must
            return `LARGE_MESSAGE_BYTES` bytes.
        script: Writes the session's script, one list of responses per turn.
        replace_worker: SIGKILLs the Worker and starts a fresh one (awaitable).
        model_calls: The session's logged model calls.
        one_call_per_response: Ask for the tool calls one per model response, for a whole-turn harness
            that defers at most one call of a response (the Claude Agent SDK's). Such a harness also shows
            its model its own preview of a large result, so the item checks only that the model saw no
            more of an output than the session's view.

    Returns:
        What the session did.
    """
    script(
        [
            large_session_turn(read, turn, one_call_per_response=one_call_per_response)
            for turn in range(1, _MAX_TURNS + 1)
        ]
    )
    stored = 0
    kills = 0
    largest_snapshot = 0
    largest_page = 0
    seen_through = 0
    turn = 0
    while stored < LARGE_SESSION_STORED_BYTES:
        turn += 1
        assert turn <= _MAX_TURNS, f"{_MAX_TURNS} turns stored only {stored} bytes"
        if turn == 1:
            await sessions.start_session(session_id, _user_text(turn))
        else:
            assert await sessions.send_user_message(session_id, _user_text(turn))
        ended = await wait_for_turn_end(sessions, session_id, turn, timeout=_TURN_TIMEOUT_SECONDS)
        assert ended.state is not None and ended.state.last_turn_error is None, (
            f"turn {turn} failed at {stored} stored bytes: {ended.state}"
        )
        snapshot: AgentSnapshot = await sessions.get_agent_snapshot(session_id)
        size = _json_size(snapshot)
        assert size <= MAX_RPC_OUTPUT_BYTES and snapshot.messages and not snapshot.missing_chunks, (
            f"turn {turn}: a {size}-byte snapshot with {len(snapshot.messages)} messages"
        )
        assert all(not message.framework_item for message in snapshot.messages)
        largest_snapshot = max(largest_snapshot, size)
        turn_messages, page_size = await _messages_after(sessions, session_id, seen_through)
        largest_page = max(largest_page, page_size)
        stored += sum(_json_size(message) for message in turn_messages)
        seen_through = turn_messages[-1].sequence
        for number in range(_READS_PER_TURN):
            output = await sessions.get_tool_output(session_id, f"turn-{turn}", f"read-{turn}-{number}")
            assert output is not None and len(output) == LARGE_MESSAGE_BYTES, (
                f"turn {turn}: read-{turn}-{number}'s whole output is not stored apart"
            )
            stored += len(output)
        if turn == 1:
            _check_the_model_saw_views(model_calls(), whole_view=not one_call_per_response)
        if turn % _TURNS_BETWEEN_WORKER_KILLS == 0:
            await replace_worker()
            kills += 1
    every, _ = await read_every_message(sessions, session_id, limit=50)
    sequences = [message.sequence for message in every]
    assert sequences == list(range(1, seen_through + 1)), "paging did not return every message exactly once"
    return LargeSessionRun(turn, stored, len(every), kills, largest_snapshot, largest_page)


async def _messages_after(
    sessions: AgentSessionClient, session_id: str, after: int
) -> tuple[list[AgentMessage], int]:
    """The messages stored after ``after``, with their runner items, and the largest page's size."""
    found: list[AgentMessage] = []
    largest = 0
    before: int | None = None
    while True:
        page = await sessions.list_agent_messages(
            session_id, before_sequence=before, limit=20, include_framework_items=True
        )
        largest = max(largest, _json_size(page))
        found[:0] = [message for message in page.messages if message.sequence > after]
        if page.next_before_sequence is None or page.messages[0].sequence <= after + 1:
            return found, largest
        before = page.next_before_sequence


def _check_the_model_saw_views(calls: list[Invocation], *, whole_view: bool) -> None:
    """The model call after turn 1's tool calls saw no 100 KiB output whole, and each one's view and note."""
    view = tool_output_view("x" * LARGE_MESSAGE_BYTES, DEFAULT_INLINE_TOOL_OUTPUT_BYTES)
    head = view[: view.index("\n")]
    # The note, as far as no framework's rendering escapes any of it.
    note = f"it is {LARGE_MESSAGE_BYTES:,} bytes, and only the first {len(head):,} are shown here"
    answering = [call for call in calls if call.kind == "model" and call.turn_id == "turn-1"][-1]
    text = answering.model_input_text
    assert "x" * (len(head) + 1) not in text, "the model saw more of an output than its first part"
    if whole_view:
        assert text.count(note) >= _READS_PER_TURN, "the model did not see each large output's note"
        assert text.count(head) >= _READS_PER_TURN, "the model did not see each large output's first part"
