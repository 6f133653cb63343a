"""Read a Flow's history and state through FlowService (the SDK has no methods for either)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

_MAX_PAGES = 200


def history_events(address: str, flow_id: str, run_id: str) -> list[pb.FlowHistoryEvent]:
    """Every event of one run, following ``next_page_token`` to the end."""
    with grpc.insecure_channel(address) as channel:
        # The generated stub is untyped; the request and response messages are typed.
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        events: list[pb.FlowHistoryEvent] = []
        token = b""
        for _ in range(_MAX_PAGES):
            response = cast(
                pb.GetHistoryEventsResponse,
                stub.GetHistoryEvents(
                    pb.GetHistoryEventsRequest(flow_id=flow_id, run_id=run_id, next_page_token=token),
                    timeout=10,
                ),
            )
            events.extend(response.events)
            if not response.next_page_token:
                return events
            token = response.next_page_token
        raise AssertionError(f"history of {flow_id} did not end after {_MAX_PAGES} pages")


def kind(event: pb.FlowHistoryEvent) -> str:
    """The payload arm, e.g. ``step_execute_completed``."""
    return event.WhichOneof("payload") or ""


def step_context(event: pb.FlowHistoryEvent) -> pb.StepMethodEventContext | None:
    match kind(event):
        case "step_wait_for_completed":
            return event.step_wait_for_completed.context
        case "step_wait_for_failed":
            return event.step_wait_for_failed.context
        case "step_execute_completed":
            return event.step_execute_completed.context
        case "step_execute_failed":
            return event.step_execute_failed.context
        case _:
            return None


def wait_for_history(
    address: str,
    flow_id: str,
    run_id: str,
    predicate: Callable[[list[pb.FlowHistoryEvent]], bool],
    timeout: float = 20.0,
) -> list[pb.FlowHistoryEvent]:
    deadline = time.monotonic() + timeout
    while True:
        events = history_events(address, flow_id, run_id)
        if predicate(events):
            return events
        if time.monotonic() > deadline:
            summary = [(kind(e), getattr(step_context(e), "step_execution_id", "")) for e in events]
            raise AssertionError(f"history of {flow_id} never matched within {timeout}s: {summary}")
        time.sleep(0.05)


def has_execute_completed(step_execution_id: str) -> Callable[[list[pb.FlowHistoryEvent]], bool]:
    def check(events: list[pb.FlowHistoryEvent]) -> bool:
        return any(
            kind(e) == "step_execute_completed"
            and e.step_execute_completed.context.step_execution_id == step_execution_id
            for e in events
        )

    return check


def flow_state(address: str, flow_id: str) -> pb.GetFlowStateResponse:
    """FlowService ``GetFlowState`` of the current run (no SDK method calls it)."""
    with grpc.insecure_channel(address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        return cast(
            pb.GetFlowStateResponse, stub.GetFlowState(pb.GetFlowStateRequest(flow_id=flow_id), timeout=10)
        )


def pending_timer_deadline(address: str, flow_id: str, step_execution_id: str, timeout: float = 20.0) -> int:
    """Poll until the execution has a registered Timer and return its firing time (unix seconds).

    A FIRED Timer counts too: on a slow machine it may fire before a restarted server is asked.
    """
    deadline = time.monotonic() + timeout
    while True:
        for active in flow_state(address, flow_id).active_step_executions:
            if active.step_execution_id != step_execution_id:
                continue
            for timer in active.timers:
                if timer.status in (pb.INTERNAL_TIMER_STATUS_PENDING, pb.INTERNAL_TIMER_STATUS_FIRED):
                    return timer.firing_unix_timestamp_seconds
        if time.monotonic() > deadline:
            raise AssertionError(f"{step_execution_id} of {flow_id} has no pending Timer after {timeout}s")
        time.sleep(0.05)
