"""Reading a Flow's active Step executions through FlowService ``GetFlowState``, and skipping a Timer.

SDK 1.23.0 has no Client method for ``GetFlowState``, so this calls the generated FlowService stub directly,
as :mod:`dex_agents.testing._history` does for history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast

import grpc  # pyright: ignore[reportMissingTypeStubs]
from dex import AsyncClient, StepExecutionId, TimerId
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

from dex_agents.testing._history import decode_value

__all__ = ["ActiveStepExecution", "read_active_step_executions", "skip_waiting_timer"]


@dataclass(frozen=True)
class ActiveStepExecution:
    """A Step execution that waits or runs.

    Attributes:
        step_type: The Step type, such as ``"AwaitTimer"``.
        step_execution_id: ``"<StepType>-<n>"``.
        step_input: The decoded Step input.
        is_waiting: Whether it waits for its conditions (else its method runs or is queued).
        timer_condition_ids: The condition IDs of its pending Timers.
    """

    step_type: str
    step_execution_id: str
    step_input: object
    is_waiting: bool
    timer_condition_ids: tuple[str, ...]

    @property
    def number(self) -> int:
        """The execution number ``n`` of ``"<StepType>-<n>"``."""
        return int(self.step_execution_id.rsplit("-", 1)[1])


class _FlowService(Protocol):
    async def GetFlowState(self, request: pb.GetFlowStateRequest) -> pb.GetFlowStateResponse: ...


async def read_active_step_executions(server_address: str, flow_id: str) -> list[ActiveStepExecution]:
    """Return the active Step executions of a Flow's current run.

    Args:
        server_address: The server's ``host:port``.
        flow_id: The Flow (session) ID.

    Returns:
        The executions, in the server's order.
    """
    async with grpc.aio.insecure_channel(server_address) as channel:
        stub = cast(_FlowService, dex_pb2_grpc.FlowServiceStub(channel))
        response = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id=flow_id))
    return [
        ActiveStepExecution(
            step_type=state.step_type,
            step_execution_id=state.step_execution_id,
            step_input=decode_value(state.movement.step_input)
            if state.movement.HasField("step_input")
            else None,
            is_waiting=state.phase == pb.ACTIVE_STEP_PHASE_WAITING,
            timer_condition_ids=tuple(
                timer.condition_id
                for timer in state.timers
                if timer.status == pb.INTERNAL_TIMER_STATUS_PENDING and timer.condition_id
            ),
        )
        for state in response.active_step_executions
    ]


async def skip_waiting_timer(
    client: AsyncClient,
    server_address: str,
    flow_id: str,
    step_type: str,
    condition_id: str,
    step_input: object = None,
) -> ActiveStepExecution | None:
    """Skip the pending Timer ``condition_id`` of a waiting ``step_type`` execution, if there is one.

    Args:
        client: The Client that calls ``SkipTimer``.
        server_address: The server's ``host:port``.
        flow_id: The Flow (session) ID.
        step_type: The waiting Step's type.
        condition_id: The Timer's condition ID.
        step_input: Only an execution with this input, unless `None`.

    Returns:
        The execution whose Timer was skipped, or `None` when none waits on such a Timer.
    """
    for execution in await read_active_step_executions(server_address, flow_id):
        if (
            execution.step_type == step_type
            and execution.is_waiting
            and condition_id in execution.timer_condition_ids
            and (step_input is None or execution.step_input == step_input)
        ):
            await client.skip_timer(
                flow_id, StepExecutionId(step_type, execution.number), TimerId.by_condition_id(condition_id)
            )
            return execution
    return None
