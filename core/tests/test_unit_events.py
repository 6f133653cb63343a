"""The event writer: stamping, payload encoding, thread hand-off and dropping after close."""

import asyncio
import json
import threading

import pytest

from dex_agents import AgentEvent, AgentEventType, AgentEventWriter


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
