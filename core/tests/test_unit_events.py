"""The event writer: stamping, payload encoding, thread hand-off, joining deltas and dropping after close."""

import asyncio
import json
import threading
from datetime import timedelta

import pytest

from dex_agents import AgentEvent, AgentEventType, AgentEventWriter
from dex_agents.events import DEFAULT_DELTA_COALESCING, DeltaCoalescing
from dex_agents.testing import wait_until


async def test_events_are_stamped_and_payloads_are_compact_sorted_json() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(written.append, "turn-2", 3, "RunModel-4")
    writer.write_text_delta("Hel")
    writer.write_text_delta("")
    writer.write_reasoning_delta("think")
    writer.write_tool_call_started("call-1", "search")
    writer.write_tool_call_finished("call-1", "search", "succeeded")
    writer.write_event("openai_agents.handoff", {"to": "billing", "a": [1, 2]})
    assert [event.type for event in written] == [
        "text_delta",
        "reasoning_delta",
        "tool_call_started",
        "tool_call_finished",
        "openai_agents.handoff",
    ]
    assert all(
        (event.turn_id, event.attempt, event.step_execution_id) == ("turn-2", 3, "RunModel-4")
        for event in written
    )
    assert written[0].payload == '{"text":"Hel"}'
    assert written[3].payload == '{"status":"succeeded","tool_call_id":"call-1","tool_name":"search"}'
    assert written[4].payload == '{"a":[1,2],"to":"billing"}'
    assert (writer.turn_id, writer.attempt, writer.step_execution_id) == ("turn-2", 3, "RunModel-4")


async def test_writes_after_close_are_dropped() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(written.append, "turn-1", 1)
    writer.write_text_delta("kept")
    writer.close()
    writer.write_text_delta("dropped")
    assert [json.loads(event.payload)["text"] for event in written] == ["kept"]
    assert writer.is_closed


async def test_writes_from_other_threads_reach_the_loop_in_call_order() -> None:
    written: list[AgentEvent] = []
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def record(event: AgentEvent) -> None:
        threads.append(threading.get_ident())
        written.append(event)

    writer = AgentEventWriter(record, "turn-1", 1)

    def produce() -> None:
        for index in range(50):
            writer.write_text_delta(str(index))

    await asyncio.to_thread(produce)
    for _ in range(5):
        await asyncio.sleep(0)
    assert [json.loads(event.payload)["text"] for event in written] == [str(index) for index in range(50)]
    assert set(threads) == {loop_thread}


async def test_a_thread_write_that_lands_after_close_is_dropped() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(written.append, "turn-1", 1)
    # Joining the thread blocks the loop, so the hand-off is still queued when the call returns.
    thread = threading.Thread(target=writer.write_text_delta, args=("late",))
    thread.start()
    thread.join()
    writer.close()
    await asyncio.sleep(0)
    assert written == []


def test_bad_payloads_are_refused() -> None:
    writer = AgentEventWriter(lambda event: None, "turn-1", 1)
    with pytest.raises(ValueError):
        writer.write_event("x", {"value": float("nan")})
    with pytest.raises(ValueError):
        writer.write_event("", {})
    with pytest.raises(TypeError):
        writer.write_event("x", {"value": object()})


def test_event_types_are_the_wire_names() -> None:
    assert {event_type.value for event_type in AgentEventType} == {
        "turn_started",
        "turn_completed",
        "turn_failed",
        "turn_steered",
        "turn_cancelled",
        "text_delta",
        "reasoning_delta",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_deferred",
        "interrupt_raised",
        "interrupt_resolved",
        "timer_started",
        "plan_updated",
        "plan_execution_started",
        "tool_task_started",
        "usage_recorded",
        "compaction_started",
        "compaction_finished",
    }


def _texts(events: list[AgentEvent]) -> list[tuple[str, str]]:
    return [(event.type, json.loads(event.payload).get("text", "")) for event in events]


_HOLD = DeltaCoalescing(max_delay=timedelta(hours=1), max_bytes=1024)


async def test_the_first_delta_goes_out_at_once_and_the_next_ones_are_joined_in_order() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(written.append, "turn-1", 2, "RunModel-3", coalescing=_HOLD)
    for chunk in ("Let ", "me ", "check."):
        writer.write_text_delta(chunk)
    assert _texts(written) == [("text_delta", "Let ")]  # live text starts without delay
    writer.write_reasoning_delta("The user ")  # another kind writes what waits first
    writer.write_reasoning_delta("wants A-1.")
    writer.write_text_delta("Found ")
    writer.write_text_delta("it.")
    assert _texts(written) == [
        ("text_delta", "Let "),
        ("text_delta", "me check."),
        ("reasoning_delta", "The user wants A-1."),
    ]
    writer.write_tool_call_started("call-1", "lookup_order")  # any other event writes what waits first
    writer.write_text_delta("Done.")
    writer.close()  # the end of the runner call writes the rest
    assert _texts(written) == [
        ("text_delta", "Let "),
        ("text_delta", "me check."),
        ("reasoning_delta", "The user wants A-1."),
        ("text_delta", "Found it."),
        ("tool_call_started", ""),
        ("text_delta", "Done."),
    ]
    # Joined deltas carry the writer's stamps, as each delta did, so a UI groups them the same way.
    assert {(event.turn_id, event.attempt, event.step_execution_id) for event in written} == {
        ("turn-1", 2, "RunModel-3")
    }


async def test_joined_deltas_are_written_once_they_reach_max_bytes() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(
        written.append, "turn-1", 1, coalescing=DeltaCoalescing(max_delay=timedelta(hours=1), max_bytes=8)
    )
    writer.write_text_delta("abc")
    writer.write_text_delta("def")
    writer.write_text_delta("gh")
    assert _texts(written) == [("text_delta", "abc")]
    writer.write_text_delta("ijk")  # 8 bytes of UTF-8 waiting: written without waiting
    writer.write_text_delta("é")  # 2 bytes wait again
    assert _texts(written) == [("text_delta", "abc"), ("text_delta", "defghijk")]
    writer.close()
    assert _texts(written) == [("text_delta", "abc"), ("text_delta", "defghijk"), ("text_delta", "é")]


async def test_waiting_deltas_are_written_after_max_delay_without_another_event() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(
        written.append,
        "turn-1",
        1,
        coalescing=DeltaCoalescing(max_delay=timedelta(milliseconds=20), max_bytes=1024),
    )
    writer.write_text_delta("Working ")
    writer.write_text_delta("on ")
    writer.write_text_delta("it")
    assert _texts(written) == [("text_delta", "Working ")]
    # The runner is still busy (a model at a gate, say): the text must reach the Stream by itself.
    await wait_until("the joined deltas", lambda: len(written) == 2, timeout=10)
    assert _texts(written) == [("text_delta", "Working "), ("text_delta", "on it")]
    writer.close()
    assert len(written) == 2


async def test_coalesced_writes_from_threads_keep_call_order_and_late_ones_are_dropped() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(written.append, "turn-1", 1, coalescing=_HOLD)

    def produce() -> None:
        for index in range(20):
            writer.write_text_delta(f"{index} ")
        writer.write_event("adapter.note", {"at": "middle"})
        for index in range(20, 30):
            writer.write_text_delta(f"{index} ")

    await asyncio.to_thread(produce)
    for _ in range(5):
        await asyncio.sleep(0)
    writer.close()
    writer.write_text_delta("late")
    assert _texts(written) == [
        ("text_delta", "0 "),
        ("text_delta", "".join(f"{index} " for index in range(1, 20))),
        ("adapter.note", ""),
        ("text_delta", "".join(f"{index} " for index in range(20, 30))),
    ]


def test_without_a_running_loop_every_delta_is_written_at_once() -> None:
    written: list[AgentEvent] = []
    writer = AgentEventWriter(written.append, "turn-1", 1, coalescing=_HOLD)
    writer.write_text_delta("a")
    writer.write_text_delta("b")
    assert _texts(written) == [("text_delta", "a"), ("text_delta", "b")]


def test_coalescing_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        DeltaCoalescing(max_delay=timedelta(0))
    with pytest.raises(ValueError, match="positive"):
        DeltaCoalescing(max_bytes=0)
    assert DeltaCoalescing(timedelta(milliseconds=50), 4096) == DEFAULT_DELTA_COALESCING
