"""The persisted state of a Flow run and of its active Step executions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from dex.dexpb import dex_pb2 as pb

__all__ = ["START_FROM", "Execution", "FlowRun", "Phase", "is_reserved_name"]

# The SDK documents an empty predecessor at Flow start (the older server used "__start__"); the SDK wins.
START_FROM = ""
_RESERVED_CHARACTERS = ("/", "$", ":")


def is_reserved_name(name: str) -> bool:
    """Tells whether a Flow ID or Step type contains a character the server reserves."""
    return any(character in name for character in _RESERVED_CHARACTERS)


class Phase(StrEnum):
    """Where a Step execution is in its lifecycle."""

    WAIT_FOR = "wait_for"
    WAITING = "waiting"
    EXECUTE = "execute"


@dataclass
class Execution:
    """One Step execution, persisted with its run so a restarted devserver resumes it."""

    exe_id: str
    step_type: str
    movement: pb.StepMovement
    seq: int
    phase: Phase
    attempt: int = 0
    first_attempt_time: int = 0
    method_started: float = 0.0
    in_flight: bool = False
    heartbeat: pb.Value | None = None
    last_failure: pb.StepMethodFailure | None = None
    last_error: pb.RecoveryErrorInfo | None = None
    retry_at: float = 0.0
    condition: pb.WaitingCondition | None = None
    timer_fire_at: list[int] = field(default_factory=list[int])
    timer_status: list[pb.InternalTimerStatus] = field(default_factory=list[pb.InternalTimerStatus])
    locals: list[pb.KV] = field(default_factory=list[pb.KV])
    condition_results: pb.ConditionResults | None = None
    execute_recovery: pb.RecoveryErrorInfo | None = None

    @property
    def from_id(self) -> str:
        """The predecessor execution, RPC marker, or ``""`` at Flow start."""
        return self.movement.from_step_execution_id_internal_only

    def reset_method(self) -> None:
        """Starts the attempt bookkeeping of a new logical method call."""
        self.attempt = 0
        self.first_attempt_time = 0
        self.method_started = 0.0
        self.in_flight = False
        self.heartbeat = None
        self.last_failure = None
        self.last_error = None
        self.retry_at = 0.0


@dataclass
class FlowRun:
    """One run of a Flow: everything needed to resume it after a restart."""

    flow_id: str
    run_id: str
    seq: int
    flow_type: str
    request_id: str
    start_time: float
    worker_target: pb.WorkerTarget
    config: pb.FlowConfig
    status: pb.FlowStatus = pb.FLOW_STATUS_RUNNING
    close_time: float = 0.0
    error_type: pb.FlowErrorType = pb.FLOW_ERROR_TYPE_UNSPECIFIED
    error_message: str = ""
    attributes: dict[str, pb.Value] = field(default_factory=dict[str, pb.Value])
    channels: dict[str, list[pb.ChannelMessage]] = field(default_factory=dict[str, list[pb.ChannelMessage]])
    executions: dict[str, Execution] = field(default_factory=dict[str, Execution])
    counters: dict[str, int] = field(default_factory=dict[str, int])
    graceful: bool = False
    results: list[pb.StepCompletionOutput] = field(default_factory=list[pb.StepCompletionOutput])
    next_event_id: int = 1
    next_exe_seq: int = 1
    timeout_seconds: int = 0
    timeout_policy: pb.FlowTimeoutPolicy = pb.FLOW_TIMEOUT_POLICY_UNSPECIFIED
    timeout_at: float = 0.0
    timeout_handler: pb.FlowTimeoutHandlerOptions | None = None
    delayed_start: pb.StepMovement | None = None
    start_at: float = 0.0

    @property
    def is_running(self) -> bool:
        """Tells whether the run is open."""
        return self.status == pb.FLOW_STATUS_RUNNING
