"""SIGKILL of the devserver and restart on the same SQLite file.

Spec: the issue's "Persistence" item (SYNC commits every transition before acknowledging it; ASYNC
commits later, so a method whose result was lost is invoked again; after a restart every running
Flow resumes, timers keep their deadlines, queued messages stay queued, and an in-flight attempt
counts as used) and ../shared/dex/sdk-1.23-and-wire-protocol.md §1.4 (Durability).

In push mode these tests also cover ``--default-worker-target``: the Client sends no target.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import make_client
from contract import flows_durability as durability
from contract import flows_failures as failures
from contract import flows_lifecycle as lifecycle
from contract.history import (
    has_execute_completed,
    history_events,
    kind,
    pending_timer_deadline,
    step_context,
)
from contract.processes import DevServer, Mode, WorkerProcess, free_port
from contract.sandbox import Sandbox
from dex import Client, FlowStatus, StepExecutionId, WaitForStepCompletionOptions, WorkerTarget

WAIT = timedelta(seconds=40)


class Cluster:
    """A devserver on its own file, a Worker, and a Client, for one test."""

    def __init__(
        self, mode: Mode, root: Path, sandbox: Sandbox, *, in_memory: bool = False, dispatch_wait: int = 2
    ) -> None:
        # The devserver is told the Worker's address before the Worker starts, so the port is reserved here.
        push_port = free_port()
        extra = ["--dispatch-wait", str(dispatch_wait), "--stop-grace", "60"]
        if mode == "push":
            extra += ["--default-worker-target", f"127.0.0.1:{push_port}"]
        self.server = DevServer(root, db=None if in_memory else root / "crash.sqlite3", extra_args=extra)
        self.worker = WorkerProcess(mode, self.server, sandbox.root, root, port=push_port)
        self.sandbox = sandbox
        self.mode = mode
        self.client: Client | None = None

    def start(self, *, with_worker: bool = True) -> Client:
        self.server.start()
        if with_worker:
            self.worker.start()
        target = WorkerTarget(pull=True) if self.mode == "pull" else None
        self.client = make_client(self.server, self.sandbox, target)
        return self.client

    def crash_and_restart(self) -> None:
        """SIGKILL the devserver's process group and start it again on the same port and file."""
        self.server.kill()
        self.server.start()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.worker.kill()
        self.server.kill()


@pytest.fixture
def cluster(mode: Mode, tmp_path: Path, sandbox: Sandbox) -> Iterator[Cluster]:
    created = Cluster(mode, tmp_path, sandbox)
    try:
        yield created
    finally:
        created.close()


def test_acknowledged_effects_survive_devserver_sigkill(
    mode: Mode, cluster: Cluster, sandbox: Sandbox, flow_id: str
) -> None:
    client = cluster.start()
    run_id = client.start_flow(durability.CRASH, flow_id, None)
    cluster.crash_and_restart()
    client.invoke_rpc(durability.CRASH.put, flow_id, "a")
    client.invoke_rpc(durability.CRASH.put, flow_id, "b")
    # The second message satisfies Collect's wait: this crash lands around its dispatch.
    cluster.crash_and_restart()
    firing_at = pending_timer_deadline(cluster.server.address, flow_id, "Snooze-1")
    client.invoke_rpc(durability.CRASH.put, flow_id, "c")
    # Killed while Snooze waits on its Timer: the Timer keeps its deadline and fires after restart.
    cluster.crash_and_restart()
    assert pending_timer_deadline(cluster.server.address, flow_id, "Snooze-1") == firing_at
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    # Both queued messages were consumed in order, and the last acknowledged Attribute write is there.
    assert result.single_output(str) == "a,b|c"
    assert {str(e.data["values"]) for e in sandbox.events(flow_id, "collected")} == {str(["a", "b"])}
    (snoozed,) = sandbox.events(flow_id, "snoozed")
    assert snoozed.data["fired"] is True
    # The message published just before the last crash is still queued (read by a query RPC).
    assert client.invoke_rpc(durability.CRASH.pending, flow_id) == ["c"]
    events = history_events(cluster.server.address, flow_id, run_id)
    assert has_execute_completed("Collect-1")(events)
    assert has_execute_completed("Snooze-1")(events)
    assert kind(events[-1]) == "flow_closed"


@pytest.mark.parametrize("level", ["SYNC", "ASYNC"])
def test_sync_and_async_durability_across_devserver_sigkill(
    mode: Mode, cluster: Cluster, sandbox: Sandbox, flow_id: str, level: str
) -> None:
    client = cluster.start()
    client.start_flow(durability.DURABILITY, flow_id, level)
    sandbox.wait_for_event(flow_id, "parked")
    # Effect has returned and the next Step is running: kill before anything else happens.
    cluster.crash_and_restart()
    if level == "SYNC":
        # Effect's result was committed before it was acted on: never invoked again. The attempt of
        # Parked that was in flight counts as used, so the resumed Flow runs attempt 2.
        (resumed,) = sandbox.wait_for_event(flow_id, "parked", where=lambda e: e.attempt > 1)
        assert resumed.attempt == 2
    else:
        # Effect's result lived only in memory: the restarted devserver invokes Effect again.
        sandbox.wait_for_event(flow_id, "effect", count=2)
    sandbox.open_gate(flow_id, "release")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == level
    assert len(sandbox.events(flow_id, "effect")) == (1 if level == "SYNC" else 2)


def test_an_async_wait_for_step_completion_answer_survives_a_sigkill_right_after(
    mode: Mode, cluster: Cluster, sandbox: Sandbox, flow_id: str
) -> None:
    client = cluster.start()
    run_id = client.start_flow(durability.DURABILITY, flow_id, "ASYNC")
    # Effect's result is ASYNC: before it is committed, the answer would be taken back by a crash.
    client.wait_for_step_completion(
        flow_id, StepExecutionId("Effect", 1), WaitForStepCompletionOptions(request_timeout=WAIT)
    )
    told = history_events(cluster.server.address, flow_id, run_id)
    cluster.crash_and_restart()
    sandbox.open_gate(flow_id, "release")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    # What the client was told stayed true: Effect completed once and was not invoked again.
    assert len(sandbox.events(flow_id, "effect")) == 1
    events = history_events(cluster.server.address, flow_id, run_id)
    # Every event reported before the crash is still there under its ID; no ID was given to another event.
    assert events[: len(told)] == told
    assert [e.event_id for e in events] == list(range(1, len(events) + 1))
    completed = [e for e in events if kind(e) == "step_execute_completed"]
    assert [context.step_execution_id for e in completed if (context := step_context(e))].count(
        "Effect-1"
    ) == 1


def test_a_clean_stop_gives_back_an_attempt_that_no_worker_received(
    mode: Mode, tmp_path: Path, sandbox: Sandbox, flow_id: str
) -> None:
    cluster = Cluster(mode, tmp_path, sandbox, dispatch_wait=60)
    try:
        client = cluster.start(with_worker=False)
        # Orphan allows one attempt; it waits for a Worker when the devserver is stopped with SIGTERM.
        client.start_flow(failures.NO_WORKER, flow_id, "patient")
        cluster.server.terminate()
        assert cluster.server.wait_stopped() == 0
        cluster.server.start()
        cluster.worker.start()
        result = client.wait_for_flow(flow_id, timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
        assert result.single_output(str) == "orphan ran"
        (ran,) = sandbox.events(flow_id, "orphan_ran")
        assert ran.attempt == 1
    finally:
        cluster.close()


def test_a_clean_stop_lets_a_running_attempt_finish_instead_of_using_it_up(
    mode: Mode, cluster: Cluster, sandbox: Sandbox, flow_id: str
) -> None:
    client = cluster.start()
    client.start_flow(durability.DURABILITY, flow_id, "SYNC")
    sandbox.wait_for_event(flow_id, "parked")
    cluster.server.terminate()
    # The devserver waits (up to its stop grace) for the attempt that reached the Worker.
    sandbox.open_gate(flow_id, "release")
    assert cluster.server.wait_stopped() == 0
    cluster.server.start()
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "SYNC"
    # Parked ran once, as attempt 1: its result was applied before the devserver exited.
    assert [event.attempt for event in sandbox.events(flow_id, "parked")] == [1]


def test_memory_mode_serves_flows(mode: Mode, tmp_path: Path, sandbox: Sandbox, flow_id: str) -> None:
    cluster = Cluster(mode, tmp_path, sandbox, in_memory=True)
    try:
        client = cluster.start()
        client.start_flow(lifecycle.CHAIN, flow_id, 1)
        result = client.wait_for_flow(flow_id, timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
        assert sorted(c.decode(str) for c in result.completions) == ["a@Leaf-1", "b@Leaf-2"]
    finally:
        cluster.close()
