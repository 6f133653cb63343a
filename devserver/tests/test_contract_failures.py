"""Retries, failure routes, heartbeat timeouts, and a Step type the Worker does not know.

Spec: ../shared/dex/sdk-1.23-and-wire-protocol.md §1.4, §1.10 (heartbeat checkpoints), §3.4
(retries and failure routing), the SDK README "Pull mode" (unknown names, dispatch wait), and
server-semantics.md §6.
"""

from __future__ import annotations

from datetime import timedelta

from contract import flows_failures as failures
from contract.processes import Mode
from contract.sandbox import Sandbox
from dex import Client, FlowErrorType, FlowStatus

WAIT = timedelta(seconds=40)


def test_retries_until_success(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(failures.FLAKY, flow_id, "flaky")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "flaky@3"
    attempts = sandbox.events(flow_id, "attempt")
    assert [(e.step, e.attempt) for e in attempts] == [("Flaky-1", 1), ("Flaky-1", 2), ("Flaky-1", 3)]
    # Every retry reports when the first attempt started.
    assert len({str(e.data["first_attempt_at"]) for e in attempts}) == 1


def test_retry_backoff_grows(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(failures.BACKOFF, flow_id, "backoff")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    first, second, third = (float(str(e.data["at"])) for e in sandbox.events(flow_id, "attempt"))
    # initial_interval 1 s, coefficient 2: about 1 s, then about 2 s. Only lower bounds: a loaded
    # machine can add delay, never remove it, and a constant 1 s policy could not reach 1.7 s.
    assert second - first >= 0.8, second - first
    assert third - second >= 1.7, third - second


def test_failure_route_gets_input_and_recovery_error(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(failures.DOOMED, flow_id, "payload-7")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "rescued payload-7"
    assert [e.attempt for e in sandbox.events(flow_id, "attempt")] == [1, 2]
    (rescued,) = sandbox.events(flow_id, "rescued")
    # The route target receives the failing Step's own input and the last attempt's error.
    assert rescued.step == "Rescue-1"
    assert rescued.data["input"] == "payload-7"
    assert rescued.data["origin"] == "Doomed-1"
    assert rescued.data["error_type"] == "builtins.RuntimeError"
    assert "doomed: payload-7" in str(rescued.data["detail"])


def test_exhausted_retries_without_route_fail_the_flow(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(failures.HOPELESS, flow_id, "x")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.FAILED
    assert result.error_type is FlowErrorType.WORKER_API_FAILED
    assert "hopeless: x" in (result.error_message or "")
    assert [e.attempt for e in sandbox.events(flow_id, "attempt")] == [1, 2]


def test_heartbeat_timeout_counts_only_heartbeats_and_stream_frames(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    # Beating checkpoints once and goes silent; Chatty never heartbeats but writes a Stream frame
    # every second. Both outlive the 10 s heartbeat timeout (the server's minimum).
    client.start_flow(failures.HEARTBEAT, flow_id, None)
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    outputs = {c.step_execution_id: c.decode(str) for c in result.completions}
    # Only the silent attempt timed out; its retry received the last checkpoint.
    assert outputs == {"Beating-1": "beats@2", "Chatty-1": "chatty@1"}
    (resumed,) = sandbox.events(flow_id, "resumed")
    assert resumed.attempt == 2
    assert resumed.data == {"has_checkpoint": True, "checkpoint": {"progress": 1}}
    assert [e.attempt for e in sandbox.events(flow_id, "attempt")] == [1]
    # The timed-out attempt was cancelled at the Worker rather than left running.
    sandbox.wait_for_event(flow_id, "cancelled")


def test_unknown_step_type_follows_failure_route(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    # The Client's GhostFlow has a Ghost start Step; the Worker's GhostFlow does not.
    client.start_flow(failures.GHOST, flow_id, "boo")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "rescued boo"
    assert sandbox.events(flow_id, "ghost_ran") == []
    (rescued,) = sandbox.events(flow_id, "rescued")
    assert rescued.data["origin"] == "Ghost-1"
    assert rescued.data["input"] == "boo"
    if mode == "pull":
        # The pull Worker rejects the unknown name; no capable Worker takes it within the dispatch wait.
        assert rescued.data["error_type"] == "NO_WORKER_AVAILABLE"
    else:
        # The push Worker fails the call itself; the error names the unknown Step.
        assert "Ghost" in str(rescued.data["detail"])


def test_retry_after_overrides_the_next_delay(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(failures.PATIENT, flow_id, "patient")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "patient@2"
    first, second = sandbox.events(flow_id, "attempt")
    # The policy says one second; the handler asked for two, and that wins for this retry.
    gap = float(str(second.data["at"])) - float(str(first.data["at"]))
    assert gap >= 1.8, gap


def test_method_timeout_ends_the_attempt(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(failures.METHOD_TIMEOUT, flow_id, "slow")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "slow@2"
    sandbox.wait_for_event(flow_id, "cancelled")


def test_wait_for_failure_proceed(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(failures.PROCEED, flow_id, "onward")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    (proceeded,) = sandbox.events(flow_id, "proceeded")
    assert proceeded.data["wait_failed"] is True
    assert "wait_for refused onward" in str(proceeded.data["detail"])
