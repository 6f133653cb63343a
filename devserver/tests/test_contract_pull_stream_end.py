"""A task sent to a pull stream that the Worker then closes cleanly, before any output, costs no attempt.

Spec: ../shared/dex/sdk-1.23-and-wire-protocol.md §3.4 "Stream lifecycle" [VERIFIED by breaking it]: the SDK
retires surplus streams and drains on stop by half-closing, and silently drops a task that reaches a stream
it is closing; the server must reassign such a task without counting an attempt. That holds whether or not
the Worker keeps other streams open (a draining Worker closes all of them). The opposite case, a Worker
killed before any output, is in `test_contract_worker_crash.py` (the attempt counts as used).

The SDK gives no way to time a half-close against a dispatch, so a hand-written pull client does it.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any, cast

import grpc
import pytest
from contract.fake_worker import start_request
from contract.processes import DevServer, Mode
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

HAND_WRITTEN_FLOW = "HandWrittenFlow"
ONE_SHOT = "OneShotStep"
_CLOSE = object()
STREAM_DEADLINE_SECONDS = 60


class RawPullStream:
    """One `PollWorkerTask` stream, registered for the hand-written Flow type only."""

    def __init__(self, channel: grpc.Channel, app_worker_id: str) -> None:
        self._outgoing: queue.Queue[object] = queue.Queue()
        self._outgoing.put(
            pb.PollWorkerTaskRequest(
                register=pb.PollWorkerTaskRegister(
                    queue=HAND_WRITTEN_FLOW,
                    app_worker_id=app_worker_id,
                    flow_types=[HAND_WRITTEN_FLOW],
                    sdk_name="python",
                    sdk_version="1.23.0",
                )
            )
        )
        stub: Any = dex_pb2_grpc.WorkerTaskServiceStub(channel)  # type: ignore[no-untyped-call]
        # A deadline on the whole call, so a missing frame fails the test with a report, not a hang.
        self._responses: Iterator[pb.PollWorkerTaskResponse] = stub.PollWorkerTask(
            self._requests(), timeout=STREAM_DEADLINE_SECONDS
        )
        registered = next(self._responses)
        assert registered.WhichOneof("frame") == "registered", registered

    def _requests(self) -> Iterator[pb.PollWorkerTaskRequest]:
        while (item := self._outgoing.get()) is not _CLOSE:
            yield cast(pb.PollWorkerTaskRequest, item)

    def next_task(self) -> pb.PollWorkerTask:
        """The next task, skipping pings."""
        for response in self._responses:
            if response.WhichOneof("frame") == "task":
                return response.task
        raise AssertionError("the devserver ended the stream before sending a task")

    def complete(self, task: pb.PollWorkerTask, output: str) -> None:
        """Answers an execute task by completing the Flow with ``output``."""
        decision = pb.StepDecision(
            close_decision=pb.CloseDecision(
                close_decision_type=pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE,
                close_input=pb.Value(string_value=output),
            )
        )
        frame = pb.PollWorkerTaskFrame(
            task_id=task.task_id,
            execute=pb.InvokeExecuteMethodOutput(
                result=pb.InvokeExecuteMethodResponse(step_decision=decision)
            ),
        )
        self._outgoing.put(pb.PollWorkerTaskRequest(task_frame=frame))

    def half_close(self) -> None:
        """Ends the client's side of the stream, as the SDK does when it retires a stream or drains."""
        self._outgoing.put(_CLOSE)

    def wait_until_ended(self) -> None:
        """Waits for the devserver to end the call, which it must do after a half-close."""
        for _ in self._responses:
            pass


@pytest.fixture
def channel(mode: Mode, devserver: DevServer) -> Iterator[grpc.Channel]:
    if mode == "push":
        pytest.skip("push: no task streams; a push call that ends without output is a failed attempt")
    with grpc.insecure_channel(devserver.address) as opened:
        yield opened


def pull_start_request(flow_id: str) -> pb.StartFlowRequest:
    request = start_request(flow_id, ONE_SHOT, "")
    request.flow_start_options.flow_config_override.worker_target.CopyFrom(pb.WorkerTarget(is_pull_mode=True))
    return request


def test_task_on_a_stream_closed_before_any_output_is_reassigned_without_an_attempt(
    channel: grpc.Channel, flow_id: str
) -> None:
    flows: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
    draining = RawPullStream(channel, "draining-worker")
    flows.StartFlow(pull_start_request(flow_id), timeout=10)
    dropped = draining.next_task()
    assert dropped.execute.step_type == ONE_SHOT
    assert dropped.execute.context.attempt == 1
    # Another Worker registers before the drop, so it is waiting when the task comes back: the 2 s
    # dispatch wait runs from the first dispatch, and the devserver lets a half-close settle first.
    replacement = RawPullStream(channel, "replacement-worker")
    # The draining Worker's only stream closes with the task unanswered, as a draining SDK Worker drops it.
    draining.half_close()
    draining.wait_until_ended()

    retried = replacement.next_task()
    assert retried.execute.step_type == ONE_SHOT
    assert retried.execute.context.step_execution_id == dropped.execute.context.step_execution_id
    # The Step allows one attempt; it reaches the next Worker as that same attempt, not as a failure.
    assert retried.execute.context.attempt == 1
    replacement.complete(retried, "done once")

    wait = pb.WaitForFlowRequest(flow_id=flow_id, needs_results=True, wait_time_seconds=30)
    result = cast(pb.FlowResult, flows.WaitForFlow(wait, timeout=40))
    assert result.flow_status == pb.FLOW_STATUS_COMPLETED, result
    (output,) = result.results
    assert output.completed_step_output.string_value == "done once"
    replacement.half_close()
    replacement.wait_until_ended()
