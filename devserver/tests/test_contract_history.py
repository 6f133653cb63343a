"""History through FlowService ``GetHistoryEvents`` and the ``dex-devserver history`` command.

Spec: server-semantics.md §14.1 (payload kinds, StepMethodEventContext, CLI JSON shape) and the
issue's "History" item.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from typing import Any, cast

from contract import flows_failures as failures
from contract import flows_history as history_flows
from contract.history import history_events, kind, step_context
from contract.processes import DevServer, Mode
from contract.sandbox import Sandbox
from dex import Client, FlowConfig, FlowStatus, StartFlowOptions, StepDurability
from dex.dexpb import dex_pb2 as pb

WAIT = timedelta(seconds=30)


def camel(snake: str) -> str:
    return "".join(part.capitalize() for part in snake.split("_"))


def index_of(events: list[pb.FlowHistoryEvent], payload: str, step_execution_id: str) -> int:
    for position, event in enumerate(events):
        context = step_context(event)
        if kind(event) == payload and context is not None and context.step_execution_id == step_execution_id:
            return position
    raise AssertionError(f"no {payload} for {step_execution_id}: {[kind(e) for e in events]}")


def test_history_events(
    mode: Mode, client: Client, devserver: DevServer, sandbox: Sandbox, flow_id: str
) -> None:
    run_id = client.start_flow(history_flows.HISTORY, flow_id, "h")
    sandbox.wait_for_event(flow_id, "recover_waiting")
    assert client.invoke_rpc(history_flows.HISTORY.poke, flow_id, "p1") == "poked p1"
    client.invoke_rpc(history_flows.HISTORY.finish, flow_id)
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)

    events = history_events(devserver.address, flow_id, run_id)
    kinds = [kind(e) for e in events]
    ids = [e.event_id for e in events]
    assert ids == sorted(set(ids)), "event IDs increase strictly"
    assert all(e.HasField("event_time") for e in events)

    assert kinds[0] == "flow_started_or_continued"
    started = events[0].flow_started_or_continued
    assert (started.flow_type, started.initial_start.start_step_type) == ("HistoryFlow", "Shaky")

    waited = index_of(events, "step_wait_for_completed", "Shaky-1")
    shaky = index_of(events, "step_execute_completed", "Shaky-1")
    assert waited < shaky
    shaky_context = events[shaky].step_execute_completed.context
    # The execute needed two attempts; the event carries the Step's identity, durability and options.
    assert shaky_context.final_attempt == 2
    assert shaky_context.step_type == "Shaky"
    assert shaky_context.durability == pb.STEP_DURABILITY_SYNC
    assert shaky_context.method_options.retry_policy.maximum_attempts == 3
    assert shaky_context.method_options.retry_policy.initial_interval_seconds == 1
    shaky_output = events[shaky].step_execute_completed.output
    assert [m.step_type for m in shaky_output.step_decision.next_steps] == ["Fragile"]
    assert [(kv.key, kv.value.string_value) for kv in shaky_output.record_events] == [
        ("shaky-note", "recorded by Shaky-1")
    ]

    fragile = index_of(events, "step_execute_failed", "Fragile-1")
    failed = events[fragile].step_execute_failed
    assert failed.context.final_attempt == 1
    assert "fragile always fails" in str(failed.output.failure)

    recover = index_of(events, "step_execute_completed", "Recover-1")
    assert events[recover].step_execute_completed.context.from_step_execution_id == "Fragile-1"
    assert shaky < fragile < recover

    rpcs = {e.rpc_execution_completed.rpc_name: e for e in events if kind(e) == "rpc_execution_completed"}
    poke = rpcs["poke"].rpc_execution_completed
    assert (poke.input.string_value, poke.output.string_value) == ("p1", "poked p1")
    assert [w.key for w in poke.upsert_attributes] == ["poked"]
    assert "finish" in rpcs

    assert kinds[-1] == "flow_closed"
    closed = events[-1].flow_closed
    assert closed.flow_status == pb.FLOW_STATUS_COMPLETED
    assert [
        (r.completed_step_execution_id, r.completed_step_output.string_value) for r in closed.results
    ] == [("Recover-1", "history h")]

    # The command-line view shows the same events in the `dexcli flow history` JSON shape.
    printed = subprocess.run(
        [sys.executable, "-m", "dex_devserver", "history", flow_id, "--server", devserver.address],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert printed.returncode == 0, printed.stderr
    document = cast(dict[str, Any], json.loads(printed.stdout))
    assert (document["flowId"], document["runId"]) == (flow_id, run_id)
    listed = cast(list[dict[str, Any]], document["events"])
    assert [int(e["eventId"]) for e in listed] == ids
    assert [e["type"] for e in listed] == [camel(k) for k in kinds]
    assert all(e["eventTime"] and isinstance(e["payload"], dict) for e in listed)


def test_history_shows_resolved_durability(
    mode: Mode, client: Client, devserver: DevServer, flow_id: str
) -> None:
    # The Flow asks for ASYNC; a method with a failure route still defaults to SYNC (server-semantics §6.5).
    options = StartFlowOptions(config_override=FlowConfig(step_durability=StepDurability.ASYNC))
    run_id = client.start_flow(failures.DOOMED, flow_id, "durability", options)
    assert client.wait_for_flow(flow_id, timeout=WAIT).status is FlowStatus.COMPLETED
    events = history_events(devserver.address, flow_id, run_id)
    failed = events[index_of(events, "step_execute_failed", "Doomed-1")].step_execute_failed.context
    rescued = events[index_of(events, "step_execute_completed", "Rescue-1")].step_execute_completed.context
    assert failed.durability == pb.STEP_DURABILITY_SYNC
    assert rescued.durability == pb.STEP_DURABILITY_ASYNC
