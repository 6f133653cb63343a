"""Message storage rules on the SDK's own Step context (see ``storage_sim``): window, chunks, index, reads."""

import json
from dataclasses import replace

import pytest

from dex_agents import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    CONTEXT_SUMMARY,
    MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT,
    MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT,
    TURN_REPLY_SEQUENCE,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageChunkRange,
    AgentMessageIndex,
    AgentSessionOptions,
    CompactionPolicy,
    ContextSummary,
    MessageRole,
    TurnReplySequence,
    message_sequence_key,
)
from dex_agents.session._errors import SessionStateError
from dex_agents.session._storage import (
    CHUNK_ENCODING_OVERHEAD_BYTES,
    MessagesNotLoadedError,
    append_messages,
    chunk_loads,
    plan_rollover,
    read_index,
    read_last_messages,
    read_messages,
    reply_count,
)
from tests.storage_sim import StoredSession, message, sequences

SMALL = AgentSessionOptions(message_window_size=4, message_chunk_size=2, message_chunk_max_bytes=4096)


def store(
    session: StoredSession, *texts: str, turn_id: str = "turn-1", users: int | None = None
) -> list[str]:
    """One Step that appends ``texts``; returns the keys its commit wrote."""
    context = session.step()
    roles = [MessageRole.USER] * (users or 0) + [MessageRole.ASSISTANT] * (len(texts) - (users or 0))
    session.state, _ = append_messages(
        context,
        session.options,
        session.state,
        turn_id,
        [message(text, role) for text, role in zip(texts, roles, strict=True)],
        user_message_count=users,
    )
    return session.commit(context)


def everything(session: StoredSession) -> list[AgentMessage]:
    return read_messages(session.step(), 0, session.state.next_message_sequence - 1)


def layout(session: StoredSession) -> tuple[AgentMessageIndex | None, list[int]]:
    context = session.step()
    return read_index(context), [int(key) for key in AGENT_MESSAGES.get_all_instance_keys(context)]


def test_a_window_past_its_size_rolls_its_oldest_messages_into_chunks_and_reads_back_identically() -> None:
    session = StoredSession(SMALL)
    for number in range(1, 12):
        store(session, f"message {number}")
    index, window = layout(session)
    assert index is not None
    assert index.chunks == tuple(AgentMessageChunkRange(first, first + 1) for first in (1, 3, 5, 7))
    assert (index.first_sequence, index.window_first_sequence) == (1, 9)
    assert window == [9, 10, 11]
    assert [item.text for item in everything(session)] == [f"message {n}" for n in range(1, 12)]
    snapshot, first = read_last_messages(session.step(), session.state.next_message_sequence, 5)
    assert (sequences(snapshot), first) == ([7, 8, 9, 10, 11], 1)
    page, _ = read_last_messages(session.step(), session.state.next_message_sequence, 3, before_sequence=6)
    assert sequences(page) == [3, 4, 5]


def test_the_index_is_written_only_when_a_chunk_is_written_and_an_empty_append_writes_nothing() -> None:
    session = StoredSession(SMALL)
    written = [store(session, f"m{number}") for number in range(1, 6)]
    index_key = AGENT_MESSAGE_INDEX.name
    assert [index_key in keys for keys in written] == [False, False, False, False, True]
    assert store(session) == []
    assert session.state.next_message_sequence == 6


def test_one_commit_moves_at_most_four_chunks_and_a_0_1_0_window_drains_over_later_commits() -> None:
    # A session stored by dex-agents 0.1.0: 30 messages in AgentMessages and no index.
    legacy = StoredSession(AgentSessionOptions(message_window_size=1000))
    for number in range(1, 31):
        store(legacy, f"old {number}")
    assert read_index(legacy.step()) is None
    session = StoredSession(SMALL, attributes=legacy.attributes, state=legacy.state)
    before = everything(session)
    store(session, "new 31")
    index, window = layout(session)
    assert index is not None and len(index.chunks) == MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT
    assert (index.first_sequence, index.window_first_sequence, window[0]) == (1, 9, 9)
    assert everything(session)[:30] == before  # the half-moved session reads back identically
    drained = 0
    while len(layout(session)[1]) > SMALL.message_window_size:
        store(session, f"new {session.state.next_message_sequence}")
        drained += 1
    assert drained == 3
    assert everything(session)[:30] == before


def test_a_rollover_closes_a_chunk_at_its_byte_limit_and_bounds_a_commit_in_bytes() -> None:
    options = AgentSessionOptions(message_window_size=2, message_chunk_size=32, message_chunk_max_bytes=1000)
    plan = plan_rollover(list(range(1, 11)), [400] * 10, options)
    # Two 400-byte messages and a comma fit in 1,000 bytes with the chunk's 15; a third does not.
    assert plan.chunks == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert plan.sizes == (CHUNK_ENCODING_OVERHEAD_BYTES + 801,) * 4
    big = AgentSessionOptions(
        message_window_size=1,
        message_chunk_size=1,
        message_chunk_max_bytes=MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT,
    )
    three_mib = 3 * 1024 * 1024
    assert len(plan_rollover([1, 2, 3, 4], [three_mib] * 4, big).chunks) == 2  # 6 MiB, not 9
    # A first chunk larger than the per-commit bound still moves, alone.
    assert plan_rollover([1, 2, 3], [9 * 1024 * 1024, 10, 10], big).chunks == ((0,),)
    # A chunk never spans a gap, where an oversized message's own chunk sits.
    gap = plan_rollover([1, 2, 4, 5, 6], [10] * 5, replace(options, message_window_size=1))
    assert gap.chunks == ((0, 1), (2, 3, 4))


def test_an_oversized_message_skips_the_window_for_its_own_chunk_and_rollover_steps_over_it() -> None:
    session = StoredSession(SMALL)
    store(session, "a", "b")
    store(session, "x" * 5000)  # its chunk alone would exceed message_chunk_max_bytes (4,096)
    index, window = layout(session)
    assert index is not None and index.chunks == (AgentMessageChunkRange(3, 3),)
    assert window == [1, 2]
    stored_alone = AGENT_MESSAGE_CHUNKS.get(session.step(), message_sequence_key(3))
    assert [item.text for item in stored_alone.messages] == ["x" * 5000]
    for text in "cdefg":
        store(session, text)
    index, window = layout(session)
    assert index is not None
    assert index.chunks == (
        AgentMessageChunkRange(1, 2),
        AgentMessageChunkRange(3, 3),
        AgentMessageChunkRange(4, 5),
    )
    assert index.window_first_sequence == 6 and window == [6, 7, 8]
    assert [item.text for item in everything(session)] == ["a", "b", "x" * 5000, *"cdefg"]


def test_retention_deletes_chunks_only_behind_the_summary_and_keeps_the_newest_messages() -> None:
    options = replace(SMALL, retained_message_limit=5, compaction=CompactionPolicy(context_window_tokens=100))
    session = StoredSession(options)
    for number in range(1, 12):
        store(session, f"m{number}")
    assert read_index(session.step()) == AgentMessageIndex(
        tuple(AgentMessageChunkRange(first, first + 1) for first in (1, 3, 5, 7)), 1, 9
    )  # nothing is deleted before the session compacts
    context = session.step()
    CONTEXT_SUMMARY.set(context, ContextSummary(1, 1, 4, "summary", "t"))
    session.commit(context)
    store(session, "m12")
    index = read_index(session.step())
    # [1-2] and [3-4] are behind the summary with at least 5 messages after them; [5-6] is not summarized.
    assert index is not None and (index.first_sequence, index.chunks[0]) == (5, AgentMessageChunkRange(5, 6))
    assert AGENT_MESSAGE_CHUNKS.name + "/" + message_sequence_key(1) not in session.attributes
    page, first = read_last_messages(session.step(), session.state.next_message_sequence, 50)
    assert (sequences(page), first) == (list(range(5, 13)), 5)
    assert sequences(read_messages(session.step(), 0, 12)) == list(range(5, 13))
    without_compaction = StoredSession(SMALL, attributes=dict(session.attributes), state=session.state)
    for number in range(13, 20):
        store(without_compaction, f"m{number}")
    assert read_index(without_compaction.step()).first_sequence == 5  # pyright: ignore[reportOptionalMemberAccess]


def test_a_model_call_loads_only_the_chunks_after_the_summary() -> None:
    session = StoredSession(SMALL)
    for number in range(1, 12):
        store(session, f"m{number}")
    assert chunk_loads(session.step(), 0).whole_map  # every chunk: one whole-map load, not a list
    loads = chunk_loads(session.step(), 4)
    assert not loads.whole_map
    assert [load.physical_name for load in loads.instances] == [
        f"{AGENT_MESSAGE_CHUNKS.name}/{message_sequence_key(first)}" for first in (5, 7)
    ]
    context = session.step(chunks=loads.instances)
    assert sequences(read_messages(context, 4, 11)) == list(range(5, 12))
    with pytest.raises(MessagesNotLoadedError, match="not loaded"):
        read_messages(context, 0, 11)
    with pytest.raises(MessagesNotLoadedError, match="earlier release"):
        read_messages(session.step(window=False), 4, 11)
    assert [load.physical_name for load in chunk_loads(session.step(), 2, through=6).instances] == [
        f"{AGENT_MESSAGE_CHUNKS.name}/{message_sequence_key(first)}" for first in (3, 5)
    ]


def test_a_chunk_that_does_not_hold_its_range_is_an_error() -> None:
    session = StoredSession(SMALL)
    for number in range(1, 6):
        store(session, f"m{number}")
    context = session.step()
    wrong = AGENT_MESSAGE_CHUNKS.get(context, message_sequence_key(1)).messages[:1]
    AGENT_MESSAGE_CHUNKS.set(context, message_sequence_key(1), AgentMessageChunk(wrong))
    session.commit(context)
    with pytest.raises(SessionStateError, match=r"must hold messages 1-2, it holds 1-1"):
        everything(session)


def test_a_turn_counts_its_replies_from_its_reply_sequence_even_after_they_rolled_over() -> None:
    session = StoredSession(SMALL)
    store(session, "question", turn_id="turn-1", users=1)
    for number in range(6):
        store(session, f"reply {number}", turn_id="turn-1")
    assert json.loads(session.attributes[TURN_REPLY_SEQUENCE.name].obj_value.payload) == {
        "sequence": 2,
        "turn_id": "turn-1",
    }
    assert reply_count(session.step(), "turn-1", session.state.next_message_sequence) == 6


def test_a_turn_another_release_started_gets_its_reply_sequence_before_anything_rolls_over() -> None:
    legacy = StoredSession(AgentSessionOptions(message_window_size=1000))
    store(legacy, "q1", "a1", turn_id="turn-1", users=1)
    del legacy.attributes[TURN_REPLY_SEQUENCE.name]  # as a 0.1.0 Worker leaves it: no reply sequence
    store(legacy, "q2a", "q2b", "a2", turn_id="turn-2", users=2)
    del legacy.attributes[TURN_REPLY_SEQUENCE.name]
    session = StoredSession(SMALL, attributes=legacy.attributes, state=legacy.state)
    assert reply_count(session.step(), "turn-2", 6) == 1  # counted back from the newest message
    store(session, "a2b", "a2c", turn_id="turn-2")
    index, _ = layout(session)
    assert index is not None and index.window_first_sequence > 3  # turn-2's first messages moved out
    context = session.step()
    assert TURN_REPLY_SEQUENCE.get(context) == TurnReplySequence("turn-2", 5)
    assert reply_count(context, "turn-2", session.state.next_message_sequence) == 3
