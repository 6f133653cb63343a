"""The state of a Flow run and of its active Step executions, with the changes not yet committed.

A run's collections (executions, Attributes, Channel queues, results) change only through the methods
here, so every change lands in the run's `RunChanges` and a commit writes exactly the rows that changed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from ._runtime import Runtime

__all__ = ["START_FROM", "Execution", "FlowRun", "Phase", "RunChanges", "detached", "is_reserved_name"]

# The SDK documents an empty predecessor at Flow start (the older server used "__start__"); the SDK wins.
START_FROM = ""
_RESERVED_CHARACTERS = ("/", "$", ":")


_MessageT = TypeVar("_MessageT", bound=Message)


def detached(message: _MessageT) -> _MessageT:
    """Returns a copy of a message that shares no memory with the message it came from.

    A field of a parsed protobuf message keeps the whole parsed message's memory alive (upb allocates a
    message and all its fields in one arena), so state that outlives a Worker's result, such as an
    Attribute's blob reference from a result that carried megabytes of other writes, keeps a copy instead.
    """
    copy = type(message)()
    copy.CopyFrom(message)
    return copy


def is_reserved_name(name: str) -> bool:
    """Tells whether a Flow ID or Step type contains a character the server reserves."""
    return any(character in name for character in _RESERVED_CHARACTERS)


class Phase(StrEnum):
    """Where a Step execution is in its lifecycle."""

    WAIT_FOR = "wait_for"
    WAITING = "waiting"
    EXECUTE = "execute"


@dataclass
class RunChanges:
    """What changed in a run since its last commit.

    Attributes:
        events: New history events as ``(event ID, event)``.
        attributes: Attribute keys written or deleted.
        executions: Execution IDs created, changed or removed.
        messages_added: Queued Channel messages by message ID, as ``(sequence number, message)``.
        messages_removed: Message IDs consumed or deleted that were committed before.
        results: Completion outputs collected, as ``(position, output)``.
    """

    events: list[tuple[int, pb.FlowHistoryEvent]] = field(
        default_factory=list[tuple[int, pb.FlowHistoryEvent]]
    )
    attributes: set[str] = field(default_factory=set[str])
    executions: set[str] = field(default_factory=set[str])
    messages_added: dict[str, tuple[int, pb.ChannelMessage]] = field(
        default_factory=dict[str, tuple[int, pb.ChannelMessage]]
    )
    messages_removed: set[str] = field(default_factory=set[str])
    results: list[tuple[int, pb.StepCompletionOutput]] = field(
        default_factory=list[tuple[int, pb.StepCompletionOutput]]
    )

    def is_empty(self) -> bool:
        """Tells whether nothing changed."""
        return not (
            self.events
            or self.attributes
            or self.executions
            or self.messages_added
            or self.messages_removed
            or self.results
        )

    def take(self) -> RunChanges:
        """Returns the changes so far and starts over empty (this object stays the run's tracker)."""
        taken = RunChanges(
            self.events,
            self.attributes,
            self.executions,
            self.messages_added,
            self.messages_removed,
            self.results,
        )
        self.events, self.attributes, self.executions = [], set(), set()
        self.messages_added, self.messages_removed, self.results = {}, set(), []
        return taken


@dataclass(eq=False)
class Execution:
    """One Step execution; assigning any field marks it changed in its run (see `FlowRun.add_execution`)."""

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
    # Not persisted: where to record changes, and whether the current attempt reached a Worker.
    changes: RunChanges | None = field(default=None, repr=False)
    dispatched: bool = field(default=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        changes: RunChanges | None = self.__dict__.get("changes")
        if changes is not None and name not in ("changes", "dispatched"):
            changes.executions.add(self.exe_id)

    @property
    def from_id(self) -> str:
        """The predecessor execution, RPC marker, or ``""`` at Flow start."""
        return self.movement.from_step_execution_id_internal_only

    def set_timer_status(self, index: int, status: pb.InternalTimerStatus) -> None:
        """Changes one Timer's status (as a new list, so the change is recorded)."""
        statuses = list(self.timer_status)
        statuses[index] = status
        self.timer_status = statuses

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


@dataclass(eq=False)
class FlowRun:
    """One run of a Flow: everything needed to resume it after a restart, and its in-memory runtime."""

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
    channels: dict[str, deque[pb.ChannelMessage]] = field(
        default_factory=dict[str, "deque[pb.ChannelMessage]"]
    )
    executions: dict[str, Execution] = field(default_factory=dict[str, Execution])
    counters: dict[str, int] = field(default_factory=dict[str, int])
    graceful: bool = False
    results: list[pb.StepCompletionOutput] = field(default_factory=list[pb.StepCompletionOutput])
    next_event_id: int = 1
    next_exe_seq: int = 1
    next_message_seq: int = 1
    timeout_seconds: int = 0
    timeout_policy: pb.FlowTimeoutPolicy = pb.FLOW_TIMEOUT_POLICY_UNSPECIFIED
    timeout_at: float = 0.0
    timeout_handler: pb.FlowTimeoutHandlerOptions | None = None
    delayed_start: pb.StepMovement | None = None
    start_at: float = 0.0
    changes: RunChanges = field(default_factory=RunChanges, repr=False)
    rt: Runtime = field(default_factory=Runtime, repr=False)

    @property
    def is_running(self) -> bool:
        """Tells whether the run is open."""
        return self.status == pb.FLOW_STATUS_RUNNING

    # ----- executions

    def add_execution(self, exe: Execution) -> None:
        """Adds an execution (in creation order) and records it for the next commit."""
        self.executions[exe.exe_id] = exe
        exe.changes = self.changes
        self.changes.executions.add(exe.exe_id)
        if exe.phase == Phase.WAITING:
            self.rt.waiting[exe.exe_id] = exe

    def remove_execution(self, exe_id: str) -> Execution | None:
        """Removes an execution; its row is deleted at the next commit."""
        exe = self.executions.pop(exe_id, None)
        if exe is not None:
            self.changes.executions.add(exe_id)
            exe.changes = None
            self.rt.waiting.pop(exe_id, None)
        return exe

    def set_phase(self, exe: Execution, phase: Phase) -> None:
        """Moves an execution to a phase, keeping the index of waiting executions."""
        exe.phase = phase
        if phase == Phase.WAITING:
            self.rt.waiting[exe.exe_id] = exe
        else:
            self.rt.waiting.pop(exe.exe_id, None)

    # ----- attributes

    def set_attribute(self, key: str, value: pb.Value | None) -> None:
        """Writes an Attribute (None deletes it), as a copy of its own."""
        if value is None:
            self.attributes.pop(key, None)
        else:
            self.attributes[key] = detached(value)
        self.changes.attributes.add(key)

    # ----- channels

    def push_message(self, message: pb.ChannelMessage) -> None:
        """Queues a message at the end of its Channel."""
        self.channels.setdefault(message.channel_name, deque()).append(message)
        self.changes.messages_added[message.message_id] = (self.next_message_seq, message)
        self.next_message_seq += 1

    def take_messages(self, channel: str, count: int) -> list[pb.ChannelMessage]:
        """Removes and returns the oldest `count` messages of a Channel."""
        queue = self.channels.get(channel)
        taken: list[pb.ChannelMessage] = []
        while queue and len(taken) < count:
            message = queue.popleft()
            self._forget_message(message.message_id)
            taken.append(message)
        if queue is not None and not queue:
            del self.channels[channel]
        return taken

    def remove_message(self, channel: str, message_id: str) -> bool:
        """Removes one queued message by ID; returns whether it was queued."""
        queue = self.channels.get(channel)
        if not queue:
            return False
        for message in queue:
            if message.message_id == message_id:
                queue.remove(message)
                self._forget_message(message_id)
                if not queue:
                    del self.channels[channel]
                return True
        return False

    def _forget_message(self, message_id: str) -> None:
        if self.changes.messages_added.pop(message_id, None) is None:
            self.changes.messages_removed.add(message_id)

    # ----- results

    def add_result(self, output: pb.StepCompletionOutput) -> None:
        """Collects a completion output for the Flow's result."""
        self.changes.results.append((len(self.results), output))
        self.results.append(output)
