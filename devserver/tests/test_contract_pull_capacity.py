"""A pull Worker that declines a task for lack of capacity does not use up an attempt.

Spec: the issue's Workers item ("a reject ... reassigns it without using an attempt") and the SDK
README "Reserved RPC capacity" ("A decline lets Dex try another Worker without consuming an
attempt").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import make_client
from contract import flows_failures as failures
from contract.processes import DevServer, Mode, WorkerProcess
from contract.sandbox import Sandbox
from contract.worker_main import SLOTS_ENV
from dex import Client, FlowStatus, WorkerTarget

WAIT = timedelta(seconds=30)
DECLINE_LINE = "decline Step task for reserved RPC capacity: CapacityFlow"


@pytest.fixture
def small_worker(mode: Mode, sandbox_dir: Path, tmp_path: Path) -> Iterator[tuple[DevServer, WorkerProcess]]:
    if mode == "push":
        pytest.skip("push: a listening Worker accepts every call; declines exist only on pull task streams")
    # Its own devserver: another pull Worker for the same Flow types would take the declined task.
    # A long dispatch wait, so the declined Step can only run once the slot is free, never time out.
    server = DevServer(tmp_path, db=tmp_path / "capacity.sqlite3", extra_args=("--dispatch-wait", "20"))
    worker = WorkerProcess(mode, server, sandbox_dir, tmp_path, extra_env={SLOTS_ENV: "2"})
    try:
        server.start()
        worker.start()
        yield server, worker
    finally:
        worker.kill()
        server.kill()


@pytest.fixture
def small_client(small_worker: tuple[DevServer, WorkerProcess], sandbox: Sandbox) -> Iterator[Client]:
    server, _ = small_worker
    with make_client(server, sandbox, WorkerTarget(pull=True)) as opened:
        yield opened


def wait_for_log_line(worker: WorkerProcess, line: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while line not in worker.log.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise AssertionError(f"the Worker never logged {line!r}")
        time.sleep(0.05)


def test_declined_task_keeps_its_attempt(
    mode: Mode,
    small_worker: tuple[DevServer, WorkerProcess],
    small_client: Client,
    sandbox: Sandbox,
    flow_id: str,
) -> None:
    _, worker = small_worker
    small_client.start_flow(failures.CAPACITY, flow_id, None)
    sandbox.wait_for_event(flow_id, "blocker_started")
    # One slot busy and one reserved for RPCs: the Worker must decline the next Step.
    small_client.invoke_rpc(failures.CAPACITY.schedule_quick, flow_id, "quick")
    wait_for_log_line(worker, DECLINE_LINE)
    sandbox.open_gate(flow_id, "free")
    result = small_client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    # The single-attempt Step ran as attempt 1 once a slot was free; its failure route never ran.
    assert result.single_output(str) == "quick@1"
    assert sandbox.events(flow_id, "rescued") == []
    assert [e.attempt for e in sandbox.events(flow_id, "quick_ran")] == [1]
