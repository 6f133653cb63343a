"""A hand-written push WorkerService that answers with results the real SDK would never produce.

The SDK validates every decision and waiting condition before it sends them, so the only way to
check that the server rejects an invalid one (failing the attempt, as the real server does) is a
Worker that speaks the wire protocol directly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
from dex.dexpb import dex_pb2 as pb

INVALID_DECISION = "InvalidDecision"  # execute returns a StepDecision with neither movements nor close
INVALID_WAIT = "InvalidWait"  # wait_for returns a Channel condition with at_most < at_least
RECOVER = "Recover"  # force-completes with what it was told about the failure
SUBFLOW_WAIT = "SubFlowWait"  # wait_for returns a SubFlow condition, which the devserver does not implement
FORGED_BLOB = "ForgedBlob"  # execute completes the Flow with a blob reference the server never issued


class FakeWorker:
    """Serves ``dex.WorkerService`` in the test process and keeps every request it received."""

    def __init__(self) -> None:
        self.requests: list[pb.InvokeExecuteMethodRequest | pb.InvokeWaitForMethodRequest] = []
        self._lock = threading.Lock()
        handlers = {
            "InvokeWaitForMethod": grpc.unary_stream_rpc_method_handler(
                self._wait_for,
                request_deserializer=pb.InvokeWaitForMethodRequest.FromString,
                response_serializer=pb.InvokeWaitForMethodOutput.SerializeToString,
            ),
            "InvokeExecuteMethod": grpc.unary_stream_rpc_method_handler(
                self._execute,
                request_deserializer=pb.InvokeExecuteMethodRequest.FromString,
                response_serializer=pb.InvokeExecuteMethodOutput.SerializeToString,
            ),
        }
        server: Any = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("dex.WorkerService", handlers),)
        )
        # Port 0: the kernel picks a free port and gRPC binds it at once, so no other process can take it.
        self.port: int = server.add_insecure_port("127.0.0.1:0")
        self._server = server

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop(grace=None)

    def received(self, step_type: str) -> list[pb.InvokeExecuteMethodRequest | pb.InvokeWaitForMethodRequest]:
        with self._lock:
            return [r for r in self.requests if r.step_type == step_type]

    def _wait_for(
        self, request: pb.InvokeWaitForMethodRequest, context: object
    ) -> Iterator[pb.InvokeWaitForMethodOutput]:
        with self._lock:
            self.requests.append(request)
        if request.step_type == SUBFLOW_WAIT:
            waiting = pb.WaitingCondition(
                waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
                sub_flow_conditions=[pb.SubFlowCondition(sub_flow_type="Child", start_step_type="Start")],
            )
        else:
            waiting = pb.WaitingCondition(
                waiting_condition_type=pb.WAITING_CONDITION_TYPE_ALL_COMPLETED,
                channel_conditions=[pb.ChannelCondition(channel_name="inbox", at_least=3, at_most=1)],
            )
        yield pb.InvokeWaitForMethodOutput(result=pb.InvokeWaitForMethodResponse(waiting_condition=waiting))

    def _execute(
        self, request: pb.InvokeExecuteMethodRequest, context: object
    ) -> Iterator[pb.InvokeExecuteMethodOutput]:
        with self._lock:
            self.requests.append(request)
        if request.step_type == INVALID_DECISION:
            decision = pb.StepDecision()
        elif request.step_type == FORGED_BLOB:
            forged = pb.Value(internal_blob_id_for_string_value="s-" + "0" * 64)
            decision = pb.StepDecision(
                close_decision=pb.CloseDecision(
                    close_decision_type=pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE, close_input=forged
                )
            )
        else:
            summary = (
                f"{request.step_type}|{request.context.recovery_error.detail}"
                f"|wait_for_failed={request.condition_results.wait_for_failed}"
            )
            decision = pb.StepDecision(
                close_decision=pb.CloseDecision(
                    close_decision_type=pb.CLOSE_DECISION_TYPE_FORCE_COMPLETE,
                    close_input=pb.Value(string_value=summary),
                )
            )
        yield pb.InvokeExecuteMethodOutput(result=pb.InvokeExecuteMethodResponse(step_decision=decision))


def start_request(flow_id: str, start_step_type: str, worker_address: str) -> pb.StartFlowRequest:
    """A StartFlow for a Flow type only the fake Worker knows: one attempt, failures go to Recover."""
    single = pb.RetryPolicy(initial_interval_seconds=1, maximum_attempts=1)
    options = pb.StepOptions(
        skip_wait_for=start_step_type not in (INVALID_WAIT, SUBFLOW_WAIT),
        execute_retry_policy=single,
        wait_for_retry_policy=single,
        wait_for_failure_policy=pb.WAIT_FOR_METHOD_FAILURE_POLICY_PROCEED_ON_FAILURE,
        execute_failure_policy=pb.EXECUTE_METHOD_FAILURE_POLICY_PROCEED_TO_CONFIGURED_STEP,
        execute_failure_proceed_step_type=RECOVER,
        execute_failure_proceed_step_options=pb.StepOptions(skip_wait_for=True),
    )
    return pb.StartFlowRequest(
        flow_id=flow_id,
        flow_type="HandWrittenFlow",
        request_id=f"start-{flow_id}",
        start_step_type=start_step_type,
        step_input=pb.Value(string_value="input"),
        step_options=options,
        flow_start_options=pb.FlowStartOptions(
            flow_config_override=pb.FlowConfig(worker_target=pb.WorkerTarget(address=worker_address))
        ),
    )
