"""Message storage rules on the SDK's own Step context (see ``storage_sim``): window, chunks, index, reads."""

import json
from dataclasses import replace

import pytest

from dex_agents import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGE_INDEX,
    AGENT_MESSAGES,
    AGENT_TOOL_OUTPUTS,
    CONTEXT_SUMMARY,
    MESSAGE_ROLLOVER_MAX_BYTES_PER_COMMIT,
    MESSAGE_ROLLOVER_MAX_CHUNKS_PER_COMMIT,
    TURN_REPLY_SEQUENCE,
    AgentMessage,
    AgentMessageChunk,
    AgentMessageIndex,
    AgentSessionOptions,
    AgentToolCall,
    CompactionPolicy,
    ContextSummary,
    MessageRole,
    StoredToolOutput,
    ToolCallStatus,
    ToolEffect,
    TurnReplySequence,
    message_sequence_key,
    tool_output_key,
)
from dex_agents.session._errors import SessionStateError
from dex_agents.session._message_reads import (
    MessagesNotLoadedError,
    chunk_loads,
    read_index,
    read_messages,
    read_page,
    reply_count,
)
from dex_agents.session._storage import (
    CHUNK_ENCODING_OVERHEAD_BYTES,
    append_messages,
    plan_rollover,
    register_stored_tool_outputs,
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


def spans(index: AgentMessageIndex | None) -> list[tuple[int, int]]:
    """The chunk ranges of an index, without their sizes."""
    assert index is not None
    return [(span.first_sequence, span.last_sequence) for span in index.chunks]


def last(session: StoredSession, limit: int, before: int | None = None, **loads: object) -> list[int]:
    """The sequences of the newest ``limit`` messages before ``before``, read as a page reads them."""
    page = read_page(
        session.step(**loads),  # pyright: ignore[reportArgumentType]
        session.state.next_message_sequence,
        limit=limit,
        byte_budget=10**9,
        size_of=lambda _: 1,
        before_sequence=before,
    )
    return sequences(page.messages)


def layout(session: StoredSession) -> tuple[AgentMessageIndex | None, list[int]]:
    context = session.step()
    return read_index(context), [int(key) for key in AGENT_MESSAGES.get_all_instance_keys(context)]


def test_a_window_past_its_size_rolls_its_oldest_messages_into_chunks_and_reads_back_identically() -> None:
    session = StoredSession(SMALL)
    for number in range(1, 12):
        store(session, f"message {number}")
    index, window = layout(session)
    assert index is not None
    assert spans(index) == [(first, first + 1) for first in (1, 3, 5, 7)]
    assert (index.first_sequence, index.window_first_sequence) == (1, 9)
    assert window == [9, 10, 11]
    assert [item.text for item in everything(session)] == [f"message {n}" for n in range(1, 12)]
    assert last(session, 5) == [7, 8, 9, 10, 11]
    assert last(session, 3, before=6) == [3, 4, 5]
    # Each range records its chunk's stored size, which is what loading the chunk costs.
    for span in index.chunks:
        stored = session.attributes[
            f"{AGENT_MESSAGE_CHUNKS.name}/{message_sequence_key(span.first_sequence)}"
        ]
        assert span.stored_bytes == len(stored.obj_value.payload)


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
    assert spans(index) == [(3, 3)]
    assert window == [1, 2]
    stored_alone = AGENT_MESSAGE_CHUNKS.get(session.step(), message_sequence_key(3))
    assert [item.text for item in stored_alone.messages] == ["x" * 5000]
    for text in "cdefg":
        store(session, text)
    index, window = layout(session)
    assert spans(index) == [(1, 2), (3, 3), (4, 5)]
    assert index is not None and index.window_first_sequence == 6 and window == [6, 7, 8]
    assert [item.text for item in everything(session)] == ["a", "b", "x" * 5000, *"cdefg"]


def test_retention_deletes_chunks_only_behind_the_summary_and_keeps_the_newest_messages() -> None:
    options = replace(SMALL, retained_message_limit=5, compaction=CompactionPolicy(context_window_tokens=100))
    session = StoredSession(options)
    for number in range(1, 12):
        store(session, f"m{number}")
    index = read_index(session.step())
    # Nothing is deleted before the session compacts.
    assert index is not None and spans(index) == [(first, first + 1) for first in (1, 3, 5, 7)]
    assert (index.first_sequence, index.window_first_sequence) == (1, 9)
    context = session.step()
    CONTEXT_SUMMARY.set(context, ContextSummary(1, 1, 4, "summary", "t"))
    session.commit(context)
    store(session, "m12")
    index = read_index(session.step())
    # [1-2] and [3-4] are behind the summary with at least 5 messages after them; [5-6] is not summarized.
    assert index is not None and (index.first_sequence, spans(index)[0]) == (5, (5, 6))
    assert AGENT_MESSAGE_CHUNKS.name + "/" + message_sequence_key(1) not in session.attributes
    assert last(session, 50) == list(range(5, 13))
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


def test_a_window_past_its_byte_bound_rolls_over_whatever_its_count() -> None:
    options = AgentSessionOptions(message_window_size=64, message_window_max_bytes=3000)
    session = StoredSession(options)
    for number in range(1, 9):
        store(session, f"{number}" * 900)  # about 1 KiB stored each
    index, window = layout(session)
    # Far fewer than 64 messages, but the window keeps only what fits 3,000 bytes.
    assert index is not None and len(index.chunks) >= 3
    window_bytes = sum(
        len(session.attributes[f"{AGENT_MESSAGES.name}/{message_sequence_key(n)}"].obj_value.payload)
        for n in window
    )
    assert window_bytes <= 3000
    assert [item.text for item in everything(session)] == [f"{number}" * 900 for number in range(1, 9)]
    # A message larger than the whole bound rolls over at once, leaving the window empty.
    store(session, "y" * 4000)
    index, window = layout(session)
    assert window == [] and index is not None and index.window_first_sequence == 10
    assert everything(session)[-1].text == "y" * 4000


def test_the_byte_bound_of_a_plan_counts_what_stays_in_the_window() -> None:
    options = AgentSessionOptions(message_window_size=10, message_window_max_bytes=1000, message_chunk_size=1)
    plan = plan_rollover([1, 2, 3, 4], [400, 400, 400, 400], options)
    # 1,600 bytes; moving two leaves 800, within the bound.
    assert plan.chunks == ((0,), (1,))


def page_of(session: StoredSession, budget: int, before: int | None = None, **loads: object) -> object:
    return read_page(
        session.step(**loads),  # pyright: ignore[reportArgumentType]
        session.state.next_message_sequence,
        limit=200,
        byte_budget=budget,
        size_of=lambda item: len(item.text or ""),
        before_sequence=before,
    )


def test_a_page_ends_at_its_byte_budget_and_always_moves_on() -> None:
    session = StoredSession(SMALL)
    for number in range(1, 10):
        store(session, "x" * (100 * number))
    page = read_page(
        session.step(),
        session.state.next_message_sequence,
        limit=200,
        byte_budget=1800,
        size_of=lambda item: len(item.text or ""),
    )
    # 900 + 800 fit 1,800; 700 more would not.
    assert sequences(page.messages) == [8, 9] and page.next_before_sequence == 8
    assert page.missing_chunks == ()
    tiny = read_page(
        session.step(),
        session.state.next_message_sequence,
        limit=200,
        byte_budget=10,
        size_of=lambda item: len(item.text or ""),
    )
    assert sequences(tiny.messages) == [9]  # larger than the budget, but a page takes one
    none = read_page(
        session.step(),
        session.state.next_message_sequence,
        limit=200,
        byte_budget=10,
        size_of=lambda item: len(item.text or ""),
        at_least_one=False,
    )
    assert none.messages == () and none.next_before_sequence is None


def test_a_page_names_the_chunks_it_was_not_given_and_reads_them_once_given() -> None:
    session = StoredSession(SMALL)
    for number in range(1, 12):
        store(session, f"m{number}")
    partial = read_page(
        session.step(chunks=()),
        session.state.next_message_sequence,
        limit=6,
        byte_budget=10**6,
        size_of=lambda _: 1,
    )
    # The window holds 9-11; 7-8 and 5-6 are in chunks the call did not load.
    assert sequences(partial.messages) == [9, 10, 11]
    assert partial.missing_chunks == (7, 5)
    whole = read_page(
        session.step(
            chunks=[AGENT_MESSAGE_CHUNKS.load(message_sequence_key(n)) for n in partial.missing_chunks]
        ),
        session.state.next_message_sequence,
        limit=6,
        byte_budget=10**6,
        size_of=lambda _: 1,
    )
    assert sequences(whole.messages) == [6, 7, 8, 9, 10, 11] and whole.missing_chunks == ()
    # Before the window, nothing is readable without a chunk: the page holds nothing and names it.
    older = read_page(
        session.step(chunks=()),
        session.state.next_message_sequence,
        limit=2,
        byte_budget=10**6,
        size_of=lambda _: 1,
        before_sequence=5,
    )
    assert older.messages == () and older.missing_chunks == (3,) and older.next_before_sequence is None


def _record(tool_call_id: str, stored: int | None) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id,
        "turn-1",
        "lookup_order",
        "{}",
        ToolEffect.READ,
        False,
        ToolCallStatus.SUCCEEDED,
        output="view",
        stored_output_bytes=stored,
    )


def test_retention_deletes_the_tool_outputs_stored_apart_with_their_turn() -> None:
    options = replace(SMALL, retained_message_limit=5, compaction=CompactionPolicy(context_window_tokens=100))
    session = StoredSession(options)
    for number in range(1, 5):
        store(session, f"m{number}")
    context = session.step()
    AGENT_TOOL_OUTPUTS.set(context, tool_output_key("turn-1", "big"), "whole output")
    register_stored_tool_outputs(
        context, options, session.state, [_record("big", 5000), _record("small", None)]
    )
    session.commit(context)
    index = read_index(session.step())
    assert index is not None and index.tool_outputs == (StoredToolOutput("turn-1", "big", 4),)
    for number in range(5, 12):
        store(session, f"m{number}")
    context = session.step()
    CONTEXT_SUMMARY.set(context, ContextSummary(1, 1, 6, "summary", "t"))
    session.commit(context)
    store(session, "m12")
    index = read_index(session.step())
    assert index is not None and index.first_sequence > 4 and index.tool_outputs == ()
    assert f"{AGENT_TOOL_OUTPUTS.name}/{tool_output_key('turn-1', 'big')}" not in session.attributes
    # Without retention nothing is listed, as nothing is deleted.
    plain = StoredSession(SMALL)
    context = plain.step()
    register_stored_tool_outputs(context, SMALL, plain.state, [_record("big", 5000)])
    assert plain.commit(context) == []
