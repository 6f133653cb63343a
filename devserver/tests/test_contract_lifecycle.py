"""Start, Step execution IDs, movements, completion, cancellation, stop, and bad input.

Spec: ../shared/dex/sdk-1.23-and-wire-protocol.md §1.3, §1.11, §3.4 and server-semantics.md §2, §5.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from contract import flows_lifecycle as lifecycle
from contract.history import has_execute_completed, history_events, kind, wait_for_history
from contract.processes import DevServer, Mode
from contract.sandbox import Sandbox
from dex import (
    Client,
    DexServiceError,
    FlowAlreadyStartedError,
    FlowErrorType,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    FlowStatus,
    FlowTimeoutPolicy,
    LongPollTimeoutError,
    StartFlowOptions,
    StepExecutionId,
    StopFlowOptions,
    StopType,
    TimerId,
    WaitForStepCompletionOptions,
)

WAIT = timedelta(seconds=30)


def outputs(client: Client, flow_id: str) -> dict[str, str]:
    """Completed outputs by Step execution ID; asserts the Flow COMPLETED."""
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.status, result.error_type, result.error_message)
    return {c.step_execution_id: c.decode(str) for c in result.completions}


def test_start_is_idempotent_by_request_id(mode: Mode, client: Client, flow_id: str) -> None:
    request_id = f"req-{uuid.uuid4()}"
    retry_safe = StartFlowOptions(request_id=request_id, ignore_already_started=True)
    run_id = client.start_flow(lifecycle.PARKED, flow_id, "first", retry_safe)
    assert run_id
    # A retried start with the same request ID returns the existing run instead of a second Flow.
    assert client.start_flow(lifecycle.PARKED, flow_id, "first", retry_safe) == run_id
    # Without the option, or with another request ID, a running Flow ID is a duplicate start.
    with pytest.raises(FlowAlreadyStartedError):
        client.start_flow(lifecycle.PARKED, flow_id, "first", StartFlowOptions(request_id=request_id))
    with pytest.raises(FlowAlreadyStartedError):
        client.start_flow(
            lifecycle.PARKED,
            flow_id,
            "second",
            StartFlowOptions(request_id="other", ignore_already_started=True),
        )
    client.invoke_rpc(lifecycle.PARKED.release, flow_id, "go")
    # Exactly one run consumed exactly one release: the duplicate starts created nothing.
    assert outputs(client, flow_id) == {"Park-1": "first:go"}


def test_request_id_does_not_resurrect_a_closed_run(mode: Mode, client: Client, flow_id: str) -> None:
    retry_safe = StartFlowOptions(request_id=f"req-{uuid.uuid4()}", ignore_already_started=True)
    first_run = client.start_flow(lifecycle.PARKED, flow_id, "first", retry_safe)
    client.invoke_rpc(lifecycle.PARKED.release, flow_id, "one")
    assert outputs(client, flow_id) == {"Park-1": "first:one"}
    # The request ID only matters when the reuse policy rejects the start; with no run open,
    # the same request starts a new run rather than returning the closed one.
    second_run = client.start_flow(lifecycle.PARKED, flow_id, "second", retry_safe)
    assert second_run != first_run
    assert client.describe_flow(flow_id).status is FlowStatus.RUNNING
    client.invoke_rpc(lifecycle.PARKED.release, flow_id, "two")
    assert outputs(client, flow_id) == {"Park-1": "second:two"}


def test_step_execution_ids_and_go_to_many(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(lifecycle.CHAIN, flow_id, 2)
    # Each movement is a new execution <StepType>-<n>, numbered per type; go_to_many keeps argument order.
    assert outputs(client, flow_id) == {"Leaf-1": "a@Leaf-1", "Leaf-2": "b@Leaf-2"}
    hops = sandbox.events(flow_id, "hop")
    assert [(e.step, e.data["n"]) for e in hops] == [("Hop-1", 2), ("Hop-2", 1), ("Hop-3", 0)]
    assert [e.data["origin"] for e in hops[1:]] == ["Hop-1", "Hop-2"]
    leaves = sorted(sandbox.events(flow_id, "leaf"), key=lambda e: e.step)
    assert [(e.step, e.data["value"], e.data["origin"]) for e in leaves] == [
        ("Leaf-1", "a", "Hop-3"),
        ("Leaf-2", "b", "Hop-3"),
    ]


def test_a_thousand_wide_go_to_many(mode: Mode, client: Client, devserver: DevServer, flow_id: str) -> None:
    run_id = client.start_flow(lifecycle.WIDE, flow_id, 1000)
    result = client.wait_for_flow(flow_id, timeout=timedelta(seconds=120))
    assert result.status is FlowStatus.COMPLETED, (result.status, result.error_type, result.error_message)
    # Every one of the thousand parallel Steps ran once, under its own execution ID.
    assert sorted(c.decode(int) for c in result.completions) == list(range(1000))
    assert {c.step_execution_id for c in result.completions} == {f"Twig-{n}" for n in range(1, 1001)}
    events = history_events(devserver.address, flow_id, run_id)
    assert sum(kind(event) == "step_execute_completed" for event in events) == 1001


def test_wait_for_then_execute(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(lifecycle.WAIT_THEN_EXECUTE, flow_id, "tok")
    # execute sees the local its wait_for set and a fresh snapshot with the wait_for's Attribute write.
    assert outputs(client, flow_id) == {"Prepare-1": "TOK/waited"}
    kinds = [(e.kind, e.step) for e in sandbox.events(flow_id) if e.kind in ("wait_for", "execute")]
    assert kinds == [("wait_for", "Prepare-1"), ("execute", "Prepare-1")]


def test_graceful_complete_waits_for_running_steps_and_dead_end(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(lifecycle.GRACEFUL, flow_id, None)
    sandbox.wait_for_event(flow_id, "quick_done")
    sandbox.wait_for_event(flow_id, "dead_end")
    sandbox.wait_for_event(flow_id, "slow_started")
    # A graceful completion and a dead end have both happened, but SlowDone is still running.
    with pytest.raises(LongPollTimeoutError):
        client.wait_for_flow(flow_id, timeout=timedelta(seconds=1))
    assert client.describe_flow(flow_id).status is FlowStatus.RUNNING
    sandbox.open_gate(flow_id, "finish")
    # Both graceful outputs are collected; the dead-ended branch contributes none.
    assert outputs(client, flow_id) == {"QuickDone-1": "first", "SlowDone-1": "second"}


def test_force_complete_cancels_other_steps(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(lifecycle.FORCE, flow_id, None)
    sandbox.wait_for_event(flow_id, "sleeper_started")
    sandbox.wait_for_event(flow_id, "forcer_started")
    sandbox.wait_for_event(flow_id, "quick_done")
    sandbox.open_gate(flow_id, "force")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    # Outputs in collection order: the earlier graceful output, then the forcing one.
    assert [(c.step_execution_id, c.decode(str)) for c in result.completions] == [
        ("QuickDone-1", "early"),
        ("Forcer-1", "forced"),
    ]
    # The still-running execute was cancelled at the Worker, not left to run on.
    sandbox.wait_for_event(flow_id, "sleeper_cancelled")
    assert sandbox.events(flow_id, "sleeper_finished") == []


def test_force_fail(mode: Mode, client: Client, flow_id: str) -> None:
    client.start_flow(lifecycle.FAIL, flow_id, "reason given by the Step")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.STEP_DECISION_FAILED
    assert result.error_message == "reason given by the Step"
    assert result.completions == ()


def test_cancel_sibling_steps(
    mode: Mode, client: Client, devserver: DevServer, sandbox: Sandbox, flow_id: str
) -> None:
    run_id = client.start_flow(lifecycle.SIBLING_CANCEL, flow_id, None)
    waiting = sandbox.wait_for_event(flow_id, "sib_waiting", count=2)
    origins = {e.data["tag"]: e.data["origin"] for e in waiting}
    assert origins == {"A": "BranchA-1", "B": "BranchB-1"}
    sandbox.open_gate(flow_id, "kill")
    # Publish only once the cancelling decision is applied, so a surviving sibling could not race it.
    wait_for_history(devserver.address, flow_id, run_id, has_execute_completed("SibKiller-1"))
    client.invoke_rpc(lifecycle.SIBLING_CANCEL.go, flow_id, 2)
    # Only the Sib that shares SibKiller's parent was cancelled; the cousin from BranchB runs.
    assert list(outputs(client, flow_id).values()) == ["B"]
    assert [e.data["tag"] for e in sandbox.events(flow_id, "sib_executed")] == ["B"]


def test_cancel_steps_by_type(
    mode: Mode, client: Client, devserver: DevServer, sandbox: Sandbox, flow_id: str
) -> None:
    run_id = client.start_flow(lifecycle.TYPE_CANCEL, flow_id, None)
    sandbox.wait_for_event(flow_id, "sib_waiting", count=2)
    sandbox.open_gate(flow_id, "kill")
    wait_for_history(devserver.address, flow_id, run_id, has_execute_completed("TypeKiller-1"))
    client.invoke_rpc(lifecycle.TYPE_CANCEL.go, flow_id, 3)
    # Every existing Sib is cancelled; the Sib created by the same decision is outside the snapshot.
    assert outputs(client, flow_id) == {"Sib-3": "z"}
    assert [e.data["tag"] for e in sandbox.events(flow_id, "sib_executed")] == ["z"]


@pytest.mark.parametrize(
    ("stop_type", "status"),
    [
        (StopType.CANCEL, FlowStatus.CANCELED),
        (StopType.TERMINATE, FlowStatus.TERMINATED),
        (StopType.FAIL, FlowStatus.FAILED),
    ],
    ids=["cancel", "terminate", "fail"],
)
def test_stop_flow(mode: Mode, client: Client, flow_id: str, stop_type: StopType, status: FlowStatus) -> None:
    client.start_flow(lifecycle.PARKED, flow_id, "parked")
    client.stop_flow(flow_id, StopFlowOptions(type=stop_type, reason="stopped by the test"))
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is status
    assert result.completions == ()
    if stop_type is StopType.FAIL:
        assert result.error_type is FlowErrorType.CLIENT_API_FAILED
        assert result.error_message == "stopped by the test"
    # A stopped Flow accepts no more mutations.
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.invoke_rpc(lifecycle.PARKED.release, flow_id, "late")
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.stop_flow(flow_id)


def test_unknown_flow_is_not_found(mode: Mode, client: Client) -> None:
    missing = f"missing-{uuid.uuid4().hex}"
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.invoke_rpc(lifecycle.PARKED.release, missing, "x")
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.stop_flow(missing)
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.skip_timer(missing, StepExecutionId("Park", 1), TimerId.by_condition_index(0))
    with pytest.raises(FlowNotFoundError):
        client.wait_for_flow(missing, timeout=timedelta(seconds=1))
    with pytest.raises(FlowNotFoundError):
        client.describe_flow(missing)


@pytest.mark.parametrize("reserved", ["/", "$", ":"])
def test_reserved_characters_in_flow_id_are_rejected(
    mode: Mode, client: Client, flow_id: str, reserved: str
) -> None:
    bad_id = f"{flow_id}{reserved}x"
    with pytest.raises(DexServiceError) as raised:
        client.start_flow(lifecycle.PARKED, bad_id, "never")
    assert not isinstance(raised.value, FlowAlreadyStartedError)
    assert raised.value.code.name == "INVALID_ARGUMENT", raised.value
    # The rejected start changed nothing.
    with pytest.raises(FlowNotFoundError):
        client.describe_flow(bad_id)


def test_force_complete_if_channels_empty(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(lifecycle.CHANNELS_EMPTY, flow_id, "empty")
    sandbox.open_gate(flow_id, "arm")
    assert outputs(client, flow_id) == {"Check-1": "empty"}


def test_force_complete_if_channels_empty_falls_back(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(lifecycle.CHANNELS_EMPTY, flow_id, "pending")
    client.invoke_rpc(lifecycle.CHANNELS_EMPTY.push, flow_id, "queued")
    sandbox.open_gate(flow_id, "arm")
    # The channel was not empty: no completion, the fallback movement ran instead.
    assert outputs(client, flow_id) == {"Fallback-1": "fallback:queued"}


def test_restart_after_completion_starts_a_new_run(mode: Mode, client: Client, flow_id: str) -> None:
    first_run = client.start_flow(lifecycle.CHAIN, flow_id, 0)
    assert outputs(client, flow_id) == {"Leaf-1": "a@Leaf-1", "Leaf-2": "b@Leaf-2"}
    # The default reuse policy allows a new run once none is running; its counters start again at 1.
    second_run = client.start_flow(lifecycle.CHAIN, flow_id, 0)
    assert second_run != first_run
    assert outputs(client, flow_id) == {"Leaf-1": "a@Leaf-1", "Leaf-2": "b@Leaf-2"}
    info = client.describe_flow(flow_id)
    assert (info.run_id, info.flow_type, info.status) == (second_run, "ChainFlow", FlowStatus.COMPLETED)
    assert info.started_at.year >= 2024


def test_wait_for_step_completion(mode: Mode, client: Client, flow_id: str) -> None:
    client.start_flow(lifecycle.PARKED, flow_id, "parked")
    options = WaitForStepCompletionOptions(request_timeout=timedelta(seconds=20))
    client.invoke_rpc(lifecycle.PARKED.release, flow_id, "go")
    client.wait_for_step_completion(flow_id, StepExecutionId("Park", 1), options)
    assert outputs(client, flow_id) == {"Park-1": "parked:go"}


@pytest.mark.parametrize(
    ("policy", "status"),
    [(FlowTimeoutPolicy.FAIL, FlowStatus.FAILED), (FlowTimeoutPolicy.CANCEL, FlowStatus.CANCELED)],
    ids=["fail", "cancel"],
)
def test_flow_timeout(
    mode: Mode, client: Client, flow_id: str, policy: FlowTimeoutPolicy, status: FlowStatus
) -> None:
    options = StartFlowOptions(timeout=timedelta(seconds=1), timeout_policy=policy)
    client.start_flow(lifecycle.PARKED, flow_id, "parked", options)
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is status
    if policy is FlowTimeoutPolicy.FAIL:
        assert result.error_type is FlowErrorType.FLOW_TIMEOUT


def test_stop_flow_cancels_running_steps(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(lifecycle.FORCE, flow_id, None)
    sandbox.wait_for_event(flow_id, "sleeper_started")
    client.stop_flow(flow_id, StopFlowOptions(type=StopType.CANCEL))
    assert client.wait_for_flow(flow_id, timeout=WAIT).status is FlowStatus.CANCELED
    # The active Worker call is cancelled, not left running for a Flow that is gone.
    sandbox.wait_for_event(flow_id, "sleeper_cancelled")
    assert sandbox.events(flow_id, "sleeper_finished") == []


def test_flow_timeout_handler(mode: Mode, client: Client, flow_id: str) -> None:
    client.start_flow(
        lifecycle.HANDLED_TIMEOUT, flow_id, "parked", StartFlowOptions(timeout=timedelta(seconds=1))
    )
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    # The handler's decision closed the Flow; the parked Step never ran.
    assert result.single_output(str) == "handled timeout"


def test_many_flows_concurrently(mode: Mode, client: Client, flow_id: str) -> None:
    flow_ids = [f"{flow_id}-{index}" for index in range(20)]
    for each in flow_ids:
        client.start_flow(lifecycle.CHAIN, each, 2)
    for each in flow_ids:
        assert outputs(client, each) == {"Leaf-1": "a@Leaf-1", "Leaf-2": "b@Leaf-2"}
