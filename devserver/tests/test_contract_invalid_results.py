"""Invalid results from a Worker fail the attempt, as on the real server.

Spec: the issue's "Bad input" item and server-semantics.md §4.3 (waiting-condition validation: a
failure counts as a failed attempt) and §5.1 (decision validation; "empty step decision is not
supported"). The SDK never sends such results, so a hand-written push Worker does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import grpc
import pytest
from contract.fake_worker import (
    FORGED_BLOB,
    INVALID_DECISION,
    INVALID_WAIT,
    RECOVER,
    SUBFLOW_WAIT,
    FakeWorker,
    start_request,
)
from contract.processes import DevServer, Mode
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc


@pytest.fixture
def fake_worker(mode: Mode) -> Iterator[FakeWorker]:
    if mode == "pull":
        pytest.skip(
            "pull: the hand-written Worker implements the push WorkerService only; a hand-written pull "
            "Worker would need its own PollWorkerTask client"
        )
    worker = FakeWorker()
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()


def run_to_close(devserver: DevServer, request: pb.StartFlowRequest) -> pb.FlowResult:
    with grpc.insecure_channel(devserver.address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        stub.StartFlow(request, timeout=10)
        wait = pb.WaitForFlowRequest(flow_id=request.flow_id, needs_results=True, wait_time_seconds=30)
        return cast(pb.FlowResult, stub.WaitForFlow(wait, timeout=40))


def test_invalid_decision_fails_the_attempt(
    mode: Mode, devserver: DevServer, fake_worker: FakeWorker, flow_id: str
) -> None:
    result = run_to_close(devserver, start_request(flow_id, INVALID_DECISION, fake_worker.address))
    assert result.flow_status == pb.FLOW_STATUS_COMPLETED, result
    # The single attempt failed on validation and the failure route ran, told why.
    assert len(fake_worker.received(INVALID_DECISION)) == 1
    (recover,) = fake_worker.received(RECOVER)
    assert recover.context.from_step_execution_id == f"{INVALID_DECISION}-1"
    assert "decision" in recover.context.recovery_error.detail.lower(), recover.context.recovery_error
    (output,) = result.results
    assert output.completed_step_output.string_value.startswith(f"{RECOVER}|")


def test_invalid_waiting_condition_fails_the_wait_for_attempt(
    mode: Mode, devserver: DevServer, fake_worker: FakeWorker, flow_id: str
) -> None:
    result = run_to_close(devserver, start_request(flow_id, INVALID_WAIT, fake_worker.address))
    assert result.flow_status == pb.FLOW_STATUS_COMPLETED, result
    # wait_for's only attempt was rejected; with PROCEED, execute runs and is told the wait failed.
    (execute,) = [
        r for r in fake_worker.received(INVALID_WAIT) if isinstance(r, pb.InvokeExecuteMethodRequest)
    ]
    assert execute.condition_results.wait_for_failed
    (output,) = result.results
    assert output.completed_step_output.string_value.endswith("wait_for_failed=True")


def test_a_blob_reference_from_a_worker_fails_the_attempt(
    mode: Mode, devserver: DevServer, fake_worker: FakeWorker, flow_id: str
) -> None:
    result = run_to_close(devserver, start_request(flow_id, FORGED_BLOB, fake_worker.address))
    assert result.flow_status == pb.FLOW_STATUS_COMPLETED, result
    (recover,) = fake_worker.received(RECOVER)
    detail = recover.context.recovery_error.detail
    assert "the Flow output is a blob reference" in detail, detail


def test_a_subflow_condition_fails_its_wait_for_at_once_with_a_clear_error(
    mode: Mode, devserver: DevServer, fake_worker: FakeWorker, flow_id: str
) -> None:
    request = start_request(flow_id, SUBFLOW_WAIT, fake_worker.address)
    # The default policy would retry for hours; the devserver fails the WaitFor on its first attempt.
    request.step_options.ClearField("wait_for_retry_policy")
    request.step_options.wait_for_failure_policy = pb.WAIT_FOR_METHOD_FAILURE_POLICY_FAIL_FLOW_ON_FAILURE
    result = run_to_close(devserver, request)
    assert result.flow_status == pb.FLOW_STATUS_FAILED, result
    assert "SubFlow conditions (SubFlow.run) are not implemented by dex-devserver" in result.error_message
    assert len(fake_worker.received(SUBFLOW_WAIT)) == 1
