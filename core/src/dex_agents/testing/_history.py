"""Reading a Flow's Step history through FlowService ``GetHistoryEvents``.

SDK 1.23.0 has no Client method for history, so this calls the generated FlowService stub directly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import grpc  # pyright: ignore[reportMissingTypeStubs]
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

__all__ = [
    "EXECUTE_COMPLETED_EVENT",
    "EXECUTE_FAILED_EVENT",
    "WAIT_FOR_COMPLETED_EVENT",
    "WAIT_FOR_FAILED_EVENT",
    "HistoryMovement",
    "StepHistoryEntry",
    "decode_value",
    "executed_step_types",
    "read_step_history",
]

EXECUTE_COMPLETED_EVENT = "StepExecuteCompleted"
"""``StepHistoryEntry.event_type`` of a Step execution whose ``execute`` completed."""
EXECUTE_FAILED_EVENT = "StepExecuteFailed"
"""``StepHistoryEntry.event_type`` of a Step execution whose ``execute`` failed on its final attempt."""
WAIT_FOR_COMPLETED_EVENT = "StepWaitForCompleted"
"""``StepHistoryEntry.event_type`` of a completed ``wait_for``."""
WAIT_FOR_FAILED_EVENT = "StepWaitForFailed"
"""``StepHistoryEntry.event_type`` of a ``wait_for`` that failed on its final attempt."""

_EVENT_TYPES = {
    "step_execute_completed": EXECUTE_COMPLETED_EVENT,
    "step_execute_failed": EXECUTE_FAILED_EVENT,
    "step_wait_for_completed": WAIT_FOR_COMPLETED_EVENT,
    "step_wait_for_failed": WAIT_FOR_FAILED_EVENT,
}
_PAGE_SIZE = 500


@dataclass(frozen=True)
class HistoryMovement:
    """One movement of a Step decision, with the options it carries.

    Attributes:
        step_type: The next Step's type.
        step_input: The decoded input (``str``, JSON value, number, or ``None``).
        skip_wait_for: Whether the next Step skips ``wait_for``.
        wait_for_durability: ``"SYNC"``, ``"ASYNC"`` or ``"UNSPECIFIED"``.
        execute_durability: ``"SYNC"``, ``"ASYNC"`` or ``"UNSPECIFIED"``.
        execute_maximum_attempts: The execute retry policy's attempts (0: server default).
        execute_timeout_seconds: The execute method timeout (0: server default).
        heartbeat_timeout_seconds: The heartbeat timeout (0: server default).
        failure_route: The Step type of the execute failure route, or ``""``.
        execute_load_attribute_map_instances: Physical keys of the AttributeMap instances execute loads.
        wait_for_load_attribute_map_instances: Physical keys of the instances ``wait_for`` loads.
    """

    step_type: str
    step_input: object
    skip_wait_for: bool
    wait_for_durability: str
    execute_durability: str
    execute_maximum_attempts: int
    execute_timeout_seconds: int
    heartbeat_timeout_seconds: int
    failure_route: str
    execute_load_attribute_map_instances: tuple[str, ...]
    wait_for_load_attribute_map_instances: tuple[str, ...]


@dataclass(frozen=True)
class StepHistoryEntry:
    """One Step method event of a Flow's history.

    Attributes:
        event_type: :data:`EXECUTE_COMPLETED_EVENT`, :data:`EXECUTE_FAILED_EVENT`,
            :data:`WAIT_FOR_COMPLETED_EVENT` or :data:`WAIT_FOR_FAILED_EVENT`.
        step_type: The Step type, such as ``"RunModel"``.
        step_execution_id: ``"<StepType>-<n>"``, shared by every attempt of one execution.
        final_attempt: The attempt that completed or finally failed (1-based).
        event_id: The history event ID (increasing, not contiguous).
        from_step_execution_id: The execution that scheduled this one.
        durability: The method's durability: ``"SYNC"``, ``"ASYNC"`` or ``"UNSPECIFIED"``.
        maximum_attempts: The method's retry policy attempts (0: server default).
        timeout_seconds: The method timeout.
        heartbeat_timeout_seconds: The heartbeat timeout.
        step_input: The decoded Step input.
        loaded_attribute_keys: Physical keys of every Attribute and AttributeMap instance the method
            received, such as ``"AGENT_TOOL_CALLS/call-1"``.
        next_steps: The movements of a completed execute's decision.
        error_type: A failed method's error type (``NO_WORKER_AVAILABLE``, an exception type, ...).
        error_detail: A failed method's error detail.
    """

    event_type: str
    step_type: str
    step_execution_id: str
    final_attempt: int
    event_id: int = 0
    from_step_execution_id: str = ""
    durability: str = "UNSPECIFIED"
    maximum_attempts: int = 0
    timeout_seconds: int = 0
    heartbeat_timeout_seconds: int = 0
    step_input: object = None
    loaded_attribute_keys: tuple[str, ...] = ()
    next_steps: tuple[HistoryMovement, ...] = ()
    error_type: str = ""
    error_detail: str = ""

    @property
    def attempt(self) -> int:
        """Alias of :attr:`final_attempt`."""
        return self.final_attempt

    def loaded_instances(self, attribute_map_name: str) -> tuple[str, ...]:
        """Return the instance keys of one AttributeMap that this method received.

        Args:
            attribute_map_name: The map's wire name, such as ``"AGENT_TOOL_CALLS"``.

        Returns:
            The (URL-quoted) instance keys, in the order the server listed them.
        """
        prefix = f"{attribute_map_name}/"
        return tuple(key[len(prefix) :] for key in self.loaded_attribute_keys if key.startswith(prefix))


class _FlowService(Protocol):
    async def GetFlowSummary(self, request: pb.GetFlowSummaryRequest) -> pb.GetFlowSummaryResponse: ...
    async def GetHistoryEvents(self, request: pb.GetHistoryEventsRequest) -> pb.GetHistoryEventsResponse: ...


async def read_step_history(server_address: str, flow_id: str, run_id: str = "") -> list[StepHistoryEntry]:
    """Read every Step method event of a Flow run, oldest first.

    Args:
        server_address: The server's ``host:port``.
        flow_id: The Flow (session) ID.
        run_id: The run to read; empty reads the current run.

    Returns:
        One entry per completed or finally failed ``wait_for`` and ``execute``; RPC and Flow events are
        left out.
    """
    async with grpc.aio.insecure_channel(server_address) as channel:
        stub = cast(_FlowService, dex_pb2_grpc.FlowServiceStub(channel))
        if not run_id:
            summary = await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id=flow_id))
            run_id = summary.flow_execution_id.run_id
        entries: list[StepHistoryEntry] = []
        page_token = b""
        while True:
            response = await stub.GetHistoryEvents(
                pb.GetHistoryEventsRequest(
                    flow_id=flow_id, run_id=run_id, estimate_page_size=_PAGE_SIZE, next_page_token=page_token
                )
            )
            entries.extend(entry for event in response.events if (entry := _entry(event)) is not None)
            page_token = response.next_page_token
            if not page_token or not response.events:
                return entries


def _entry(event: pb.FlowHistoryEvent) -> StepHistoryEntry | None:
    kind = event.WhichOneof("payload")
    if kind not in _EVENT_TYPES:
        return None
    payload: Any = getattr(event, kind)
    context: pb.StepMethodEventContext = payload.context
    method_input: pb.StepMethodEventInput = payload.input
    next_steps: tuple[HistoryMovement, ...] = ()
    error_type = ""
    error_detail = ""
    if kind == "step_execute_completed":
        decision: pb.StepDecision = payload.output.step_decision
        next_steps = tuple(_movement(movement) for movement in decision.next_steps)
    elif kind in ("step_execute_failed", "step_wait_for_failed"):
        failure: pb.StepMethodFailure = payload.output.failure
        error_type = failure.details.original_worker_error_type or _dispatch_reason(
            failure.details.dispatch_task_error_reason
        )
        error_detail = (
            failure.details.original_worker_error_detail or failure.details.detail or failure.backend_error
        )
    options = context.method_options
    return StepHistoryEntry(
        event_type=_EVENT_TYPES[kind],
        step_type=context.step_type,
        step_execution_id=context.step_execution_id,
        final_attempt=context.final_attempt,
        event_id=event.event_id,
        from_step_execution_id=context.from_step_execution_id,
        durability=_durability(context.durability),
        maximum_attempts=options.retry_policy.maximum_attempts,
        timeout_seconds=options.timeout_seconds,
        heartbeat_timeout_seconds=options.heartbeat_timeout_seconds,
        step_input=decode_value(method_input.step_input) if method_input.HasField("step_input") else None,
        loaded_attribute_keys=tuple(kv.key for kv in method_input.attributes),
        next_steps=next_steps,
        error_type=error_type,
        error_detail=error_detail,
    )


def _movement(movement: pb.StepMovement) -> HistoryMovement:
    options = movement.step_options
    return HistoryMovement(
        step_type=movement.step_type,
        step_input=decode_value(movement.step_input) if movement.HasField("step_input") else None,
        skip_wait_for=options.skip_wait_for,
        wait_for_durability=_durability(options.wait_for_durability_override),
        execute_durability=_durability(options.execute_durability_override),
        execute_maximum_attempts=options.execute_retry_policy.maximum_attempts,
        execute_timeout_seconds=options.execute_timeout_seconds,
        heartbeat_timeout_seconds=options.heartbeat_timeout_seconds,
        failure_route=options.execute_failure_proceed_step_type,
        execute_load_attribute_map_instances=tuple(options.execute_load_attribute_map_instances),
        wait_for_load_attribute_map_instances=tuple(options.wait_for_load_attribute_map_instances),
    )


def _dispatch_reason(value: int) -> str:
    if value == 0:
        return ""
    return pb.DispatchTaskErrorReason.Name(value).removeprefix("DISPATCH_TASK_ERROR_REASON_")  # pyright: ignore[reportArgumentType]


def _durability(value: int) -> str:
    return pb.StepDurability.Name(value).removeprefix("STEP_DURABILITY_")  # pyright: ignore[reportArgumentType]


def decode_value(value: pb.Value) -> object:
    """Decode a wire ``Value`` the way the SDK's codecs would, without knowing its declared type.

    Args:
        value: The wire value.

    Returns:
        ``str``, a parsed JSON value, ``int``, ``float``, ``bool``, raw ``bytes``, ``None``, or
        ``"<blob:ID>"`` for a value the server offloaded to its blob store.
    """
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "obj_value":
        if value.obj_value.encoding == "json":
            decoded: object = json.loads(value.obj_value.payload)
            return decoded
        return bytes(value.obj_value.payload)
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind in ("internal_blob_id_for_string_value", "internal_blob_id_for_obj_value"):
        return f"<blob:{getattr(value, kind)}>"
    return None


def executed_step_types(history: Sequence[StepHistoryEntry]) -> list[str]:
    """Return the Step types whose ``execute`` completed, in history order.

    Args:
        history: Entries from :func:`read_step_history`.

    Returns:
        The Step types, such as ``["StartAgentSession", "RunModel", "CallTool", ...]``.
    """
    return [entry.step_type for entry in history if entry.event_type == EXECUTE_COMPLETED_EVENT]
