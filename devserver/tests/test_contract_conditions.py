"""Channel, ChannelMap and Timer conditions, any_of/all_of, FIFO consumption, SkipTimer.

Spec: ../shared/dex/sdk-1.23-and-wire-protocol.md §1.6, §1.7 and server-semantics.md §4.3-§4.5, §10.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from contract import flows_conditions as conditions
from contract.flows_conditions import Batch
from contract.history import history_events, kind
from contract.processes import DevServer, Mode
from contract.sandbox import Event, Sandbox
from dex import Client, DexServiceError, FlowStatus, StepExecutionId, TimerId

WAIT = timedelta(seconds=30)


def start_consumer(client: Client, sandbox: Sandbox, flow_id: str, spec: str, *, armed: bool = True) -> None:
    client.start_flow(conditions.CONDITIONS, flow_id, spec)
    if armed:
        sandbox.open_gate(flow_id, "arm")
        sandbox.wait_for_event(flow_id, "waiting")


def push(client: Client, flow_id: str, *values: str, instance: str = "") -> None:
    client.invoke_rpc(conditions.CONDITIONS.push, flow_id, Batch(list(values), instance))


def consumed(client: Client, sandbox: Sandbox, flow_id: str) -> Event:
    (event,) = sandbox.wait_for_event(flow_id, "consumed")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    return event


# (spec, publishes in separate RPCs, values consumed, messages left in the inbox)
CHANNEL_CASES = [
    ("for_one", [["m1", "m2"]], ["m1"], 1),
    ("for_n", [["m1"], ["m2", "m3"]], ["m1", "m2"], 1),
    ("at_least", [["m1"], ["m2", "m3"]], ["m1", "m2", "m3"], 0),
    ("for_range", [["m1"], ["m2", "m3", "m4"]], ["m1", "m2", "m3"], 1),
]


@pytest.mark.parametrize(
    ("spec", "batches", "values", "left"), CHANNEL_CASES, ids=[c[0] for c in CHANNEL_CASES]
)
def test_channel_condition(
    mode: Mode,
    client: Client,
    sandbox: Sandbox,
    flow_id: str,
    spec: str,
    batches: list[list[str]],
    values: list[str],
    left: int,
) -> None:
    start_consumer(client, sandbox, flow_id, spec)
    # The first batch alone is below at_least for the multi-message conditions; a premature
    # satisfaction would show up as fewer consumed values.
    for batch in batches:
        push(client, flow_id, *batch)
    event = consumed(client, sandbox, flow_id)
    assert event.data["values"] == values
    assert event.data["inbox_left"] == left


def test_at_most_takes_what_is_queued_without_waiting(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    start_consumer(client, sandbox, flow_id, "at_most", armed=False)
    push(client, flow_id, "m1", "m2", "m3")
    sandbox.open_gate(flow_id, "arm")
    event = consumed(client, sandbox, flow_id)
    assert event.data["values"] == ["m1", "m2"]
    assert event.data["inbox_left"] == 1


def test_channel_map_instance_condition(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    start_consumer(client, sandbox, flow_id, "map_for_one")
    push(client, flow_id, "x1", instance="x")
    push(client, flow_id, "y1", "y2", instance="y")
    event = consumed(client, sandbox, flow_id)
    # Only instance "y" is consumed, oldest first; instance "x" is untouched.
    assert event.data["values"] == ["y1"]
    assert (event.data["x_left"], event.data["y_left"]) == (1, 1)


def test_fifo_consumption_across_executions(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(conditions.FIFO, flow_id, 1)
    for value in ("a", "b"):
        client.invoke_rpc(conditions.FIFO.push, flow_id, Batch([value]))
    client.invoke_rpc(conditions.FIFO.push, flow_id, Batch(["c", "d", "stop"]))
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert [(e.step, e.data["value"]) for e in sandbox.events(flow_id, "got")] == [
        ("Drain-1", "a"),
        ("Drain-2", "b"),
        ("Drain-3", "c"),
        ("Drain-4", "d"),
        ("Drain-5", "stop"),
    ]


def skip_when_pending(client: Client, flow_id: str, step: StepExecutionId, timer: TimerId) -> None:
    """The Timer exists only once the server registered the wait; retry until then, with a deadline."""
    deadline = time.monotonic() + 20
    while True:
        try:
            client.skip_timer(flow_id, step, timer)
            return
        except DexServiceError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_timer_skip(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    start_consumer(client, sandbox, flow_id, "timer_skip")
    skip_when_pending(client, flow_id, StepExecutionId("Consume", 1), TimerId.by_condition_id("long"))
    event = consumed(client, sandbox, flow_id)
    # A skipped Timer counts as fired; an hour-long Timer could not have fired by itself.
    assert event.data["fired"] is True
    # Once skipped (and the Step moved on) the Timer is no longer pending.
    with pytest.raises(DexServiceError):
        client.skip_timer(flow_id, StepExecutionId("Consume", 1), TimerId.by_condition_id("long"))


def test_any_of_takes_the_ready_channel(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    start_consumer(client, sandbox, flow_id, "any_of")
    push(client, flow_id, "m1", "m2")
    event = consumed(client, sandbox, flow_id)
    assert event.data["fired"] is False
    assert event.data["values"] == ["m1"]
    assert event.data["inbox_left"] == 1


def test_any_of_prefers_timers_and_consumes_nothing(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    start_consumer(client, sandbox, flow_id, "timer_first", armed=False)
    push(client, flow_id, "m1")
    sandbox.open_gate(flow_id, "arm")
    event = consumed(client, sandbox, flow_id)
    # Both are ready at once: Timers come first in candidate order and the loser consumes nothing.
    assert event.data["fired"] is True
    assert event.data["values"] == []
    assert event.data["inbox_left"] == 1


def test_all_of_needs_timer_and_channel(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    start_consumer(client, sandbox, flow_id, "all_of")
    push(client, flow_id, "m1")
    event = consumed(client, sandbox, flow_id)
    # The message alone did not satisfy all_of: execute ran only with the fired Timer too.
    assert event.data["fired"] is True
    assert event.data["values"] == ["m1"]
    assert event.data["inbox_left"] == 0


def test_any_combination_takes_the_first_complete_combination(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    start_consumer(client, sandbox, flow_id, "any_combination")
    # The first combination (inbox + boxes/y) is incomplete without a "y" message; the second is complete.
    push(client, flow_id, "m1", "m2")
    event = consumed(client, sandbox, flow_id)
    assert event.data["values"] == ["m1", "m2"]
    assert event.data["inbox_left"] == 0


def test_wait_for_can_satisfy_its_own_condition(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    start_consumer(client, sandbox, flow_id, "self_publish")
    event = consumed(client, sandbox, flow_id)
    assert event.data["values"] == ["from wait_for"]
    assert event.data["inbox_left"] == 0


def test_two_pass_allocation_on_one_channel(
    mode: Mode, client: Client, devserver: DevServer, sandbox: Sandbox, flow_id: str
) -> None:
    run_id = client.start_flow(conditions.CONDITIONS, flow_id, "two_pass")
    sandbox.open_gate(flow_id, "arm")
    sandbox.wait_for_event(flow_id, "waiting")
    push(client, flow_id, "m1", "m2", "m3")
    event = consumed(client, sandbox, flow_id)
    assert event.data["values"] == ["m1", "m2", "m3"]
    # Pass 1 reserves one message for each condition, pass 2 gives the rest to the earlier one
    # (up to its at_most); consumption is FIFO in condition order. The SDK merges a channel's
    # results, so the split is read from the execute's input in history.
    events = history_events(devserver.address, flow_id, run_id)
    (execute,) = [e.step_execute_completed for e in events if kind(e) == "step_execute_completed"]
    split = [
        (r.condition_id, [v.string_value for v in r.values])
        for r in execute.input.condition_results.channel_results
    ]
    assert split == [("a", ["m1", "m2"]), ("b", ["m3"])]
