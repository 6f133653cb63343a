"""No Worker at all, and a Worker SIGKILLed in the middle of an execute.

Spec: the SDK README "Pull mode" (dispatch wait, ``NO_WORKER_AVAILABLE``), the issue's Workers
section (a stream that ends after output for a task used an attempt), and
../shared/dex/sdk-1.23-and-wire-protocol.md §3.4 (retries and failure routing).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import make_client, worker_target
from contract import flows_failures as failures
from contract.history import kind, wait_for_history
from contract.processes import DevServer, Mode, WorkerProcess, free_port
from contract.sandbox import Sandbox
from dex import Client, FlowStatus

WAIT = timedelta(seconds=40)


@pytest.fixture(scope="module")
def devserver(sandbox_dir: Path) -> Iterator[DevServer]:
    """This module's own devserver: a second pull Worker on the shared one would compete for tasks."""
    server = DevServer(
        sandbox_dir, db=sandbox_dir / "worker-crash.sqlite3", extra_args=("--dispatch-wait", "1")
    )
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def crash_worker(mode: Mode, devserver: DevServer, sandbox_dir: Path) -> Iterator[WorkerProcess]:
    """A Worker the test starts (and kills) itself; the finalizer kills whatever is left.

    Its port is reserved up front: the Client's Worker target needs the address before the first start
    (one test starts its Flow while no Worker exists at all).
    """
    process = WorkerProcess(mode, devserver, sandbox_dir, sandbox_dir, port=free_port())
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture
def crash_client(
    mode: Mode, devserver: DevServer, sandbox: Sandbox, crash_worker: WorkerProcess
) -> Iterator[Client]:
    with make_client(devserver, sandbox, worker_target(mode, crash_worker)) as opened:
        yield opened


def test_dispatch_wait_without_worker_follows_failure_route(
    mode: Mode,
    devserver: DevServer,
    crash_worker: WorkerProcess,
    crash_client: Client,
    sandbox: Sandbox,
    flow_id: str,
) -> None:
    run_id = crash_client.start_flow(failures.NO_WORKER, flow_id, "lonely")
    # With no Worker anywhere, the single attempt fails once the dispatch wait (1 s) is over.
    wait_for_history(
        devserver.address,
        flow_id,
        run_id,
        lambda events: any(kind(e) == "step_execute_failed" for e in events),
    )
    crash_worker.start()
    result = crash_client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "rescued lonely"
    assert sandbox.events(flow_id, "orphan_ran") == []
    (rescued,) = sandbox.events(flow_id, "rescued")
    assert rescued.data["origin"] == "Orphan-1"
    assert rescued.data["input"] == "lonely"
    assert rescued.data["error_type"]
    if mode == "pull":
        assert rescued.data["error_type"] == "NO_WORKER_AVAILABLE"
        assert "worker" in str(rescued.data["detail"]).lower()


def test_worker_sigkill_mid_execute_is_retried(
    mode: Mode, crash_worker: WorkerProcess, crash_client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    crash_worker.start()
    crash_client.start_flow(failures.KILL_RETRY, flow_id, "survivor")
    (first,) = sandbox.wait_for_event(flow_id, "lingering")
    assert first.attempt == 1
    crash_worker.kill()
    crash_worker.start()
    (retry,) = sandbox.wait_for_event(flow_id, "lingering", where=lambda e: e.attempt > 1)
    assert retry.pid != first.pid
    sandbox.open_gate(flow_id, f"release-{retry.attempt}")
    result = crash_client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == f"survivor@{retry.attempt}"
    # One execution per attempt number: the killed attempt was not silently re-sent as attempt 1.
    attempts = [e.attempt for e in sandbox.events(flow_id, "lingering")]
    assert attempts.count(1) == 1
    assert attempts == sorted(set(attempts))


def test_worker_sigkill_single_attempt_takes_failure_route(
    mode: Mode, crash_worker: WorkerProcess, crash_client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    crash_worker.start()
    crash_client.start_flow(failures.KILL_ROUTE, flow_id, "fragile")
    sandbox.wait_for_event(flow_id, "one_shot")
    crash_worker.kill()
    crash_worker.start()
    result = crash_client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "rescued fragile"
    (rescued,) = sandbox.events(flow_id, "rescued")
    assert rescued.data["origin"] == "OneShot-1"
    # The killed attempt was the only one: the Step never ran again.
    assert len(sandbox.events(flow_id, "one_shot")) == 1


def test_worker_sigkill_before_any_output_still_uses_the_attempt(
    mode: Mode, crash_worker: WorkerProcess, crash_client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    crash_worker.start()
    crash_client.start_flow(failures.SILENT_KILL, flow_id, "silent")
    sandbox.wait_for_event(flow_id, "silent_shot")
    # The handler had started but sent nothing yet; a dead Worker is not a declined task.
    crash_worker.kill()
    crash_worker.start()
    result = crash_client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    assert result.single_output(str) == "rescued silent"
    assert len(sandbox.events(flow_id, "silent_shot")) == 1
