"""The SDK's synchronous ``Worker`` (generator handlers, blocking handlers) in push and pull mode.

Spec: the issue ("the unchanged AsyncClient/Client and AsyncWorker/Worker must work against it")
and ../shared/dex/sdk-1.23-and-wire-protocol.md §1.2 (handler forms), §1.10 (cancellation).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import make_client, worker_target
from contract import flows_sync as sync_flows
from contract.processes import DevServer, Mode, WorkerProcess
from contract.sandbox import Sandbox
from dex import Client, FlowStatus, StopFlowOptions

POLL = timedelta(seconds=15)
WAIT = timedelta(seconds=30)


@pytest.fixture(scope="module")
def sync_worker(mode: Mode, devserver: DevServer, sandbox_dir: Path) -> Iterator[WorkerProcess]:
    """A sync ``Worker`` child beside the shared AsyncWorker; it alone registers the sync Flows."""
    process = WorkerProcess(mode, devserver, sandbox_dir, sandbox_dir, role="sync")
    process.start()
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture(scope="module")
def client(
    mode: Mode, devserver: DevServer, sync_worker: WorkerProcess, sandbox: Sandbox
) -> Iterator[Client]:
    """Overrides the shared Client: in push mode the sync Flows must target the sync Worker."""
    with make_client(devserver, sandbox, worker_target(mode, sync_worker)) as opened:
        yield opened


def test_sync_generator_handlers(mode: Mode, client: Client, flow_id: str) -> None:
    client.start_flow(sync_flows.SYNC, flow_id, "sync")
    waiting = client.read_stream(flow_id, sync_flows.sync_progress, "", timeout=POLL)
    assert (waiting.value, waiting.source) == ("waiting", "#SyncWait-1")
    client.invoke_rpc(sync_flows.SYNC.send, flow_id, "hello")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED, (result.error_type, result.error_message)
    # Attempt 2 consumed the message and read attempt 1's checkpoint.
    assert result.single_output(str) == "sync:hello:1"
    page = client.list_stream_messages(flow_id, sync_flows.sync_progress, 10)
    assert [m.value for m in page.messages] == ["attempt 2", "attempt 1", "waiting"]


def test_sync_handler_sees_cancellation(mode: Mode, client: Client, sandbox: Sandbox, flow_id: str) -> None:
    client.start_flow(sync_flows.SYNC, flow_id, "sync")
    client.invoke_rpc(sync_flows.SYNC.block, flow_id)
    sandbox.wait_for_event(flow_id, "blocking")
    client.invoke_rpc(sync_flows.SYNC.interrupt, flow_id)
    # A sync handler cannot be interrupted; it learns of the cancel through is_cancellation_requested().
    sandbox.wait_for_event(flow_id, "sync_cancelled")
    client.stop_flow(flow_id, StopFlowOptions())
