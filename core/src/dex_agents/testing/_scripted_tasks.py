"""Scripted tools that ask the user before they take effect, or start a remote task the session polls.

The "remote service" of a scripted task lives in the stack's state directory, as a real one lives outside
the Worker: a file per task counts its polls and keeps the resolution of its question, and the invocation
log records every start, poll and cancellation, so a test counts them across Worker kills. Scripted tools
use only the public API a framework user's tool has: `ask_user_input`, `start_tool_task` and
`started_tool_task`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dex_agents import (
    DeferredToolExecution,
    ToolExecutionResult,
    ToolInputRequested,
    ToolInputRequired,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    ToolTaskRunning,
    ask_user_input,
    current_tool_execution,
    start_tool_task,
    started_tool_task,
)
from dex_agents.testing._gates import FileGate
from dex_agents.testing._invocations import Invocation, InvocationKind

if TYPE_CHECKING:
    from dex_agents.testing._script import ScriptedToolCall, ScriptStore

__all__ = [
    "TASK_HANDLE_SAVED_EVENT",
    "ScriptedQuestion",
    "ScriptedTask",
    "answers_suffix",
    "ask_scripted_questions",
    "cancel_scripted_task",
    "hold_first_arrival",
    "poll_scripted_task",
    "question_from_json",
    "start_scripted_task",
    "task_from_json",
]


TASK_HANDLE_SAVED_EVENT = "dex_agents_testing.task_handle_saved"
"""The event a scripted task's tool writes after it saved the task's handle, before its gate."""


@dataclass(frozen=True)
class ScriptedQuestion:
    """A question a scripted tool (or its task) asks the user.

    Attributes:
        question: The question.
        choices: The answers offered.
        allows_free_text: Whether an answer outside ``choices`` is accepted.
    """

    question: str
    choices: tuple[str, ...] = ()
    allows_free_text: bool = True


@dataclass(frozen=True)
class ScriptedTask:
    """The remote task a scripted tool starts instead of returning its result.

    Attributes:
        polls: The poll that returns the result (1: the first); earlier polls report it still running.
        poll_interval_seconds: Seconds between polls.
        question: A question the task asks on its first poll; it finishes only once the question ended,
            and its result says how (``answered: <answer>``, ``declined: <message>``, ...).
        output: The task's result; by default ``"task <task_id> done"``.
        gate: A gate name: the tool waits there after it started the task and saved its handle as the
            attempt's heartbeat checkpoint, before it hands the task over (the first arrival only). Just
            before, it writes a `TASK_HANDLE_SAVED_EVENT` event; the checkpoint travels to the server ahead
            of it, so a test that kills the Worker once the event is readable kills it after the
            checkpoint arrived (a heartbeat only waits for the Worker's output queue).
        poll_gate: A gate name: the first poll that reaches it waits there (the first arrival only).
    """

    polls: int = 1
    poll_interval_seconds: int = 1
    question: ScriptedQuestion | None = None
    output: str | None = None
    gate: str | None = None
    poll_gate: str | None = None


def question_from_json(data: Mapping[str, Any] | None) -> ScriptedQuestion | None:
    """Decode a `ScriptedQuestion` written with ``dataclasses.asdict``."""
    if data is None:
        return None
    return ScriptedQuestion(data["question"], tuple(data["choices"]), data["allows_free_text"])


def task_from_json(data: Mapping[str, Any] | None) -> ScriptedTask | None:
    """Decode a `ScriptedTask` written with ``dataclasses.asdict``."""
    if data is None:
        return None
    return ScriptedTask(
        polls=data["polls"],
        poll_interval_seconds=data["poll_interval_seconds"],
        question=question_from_json(data["question"]),
        output=data["output"],
        gate=data["gate"],
        poll_gate=data["poll_gate"],
    )


async def hold_first_arrival(gate: FileGate) -> None:
    """Wait at ``gate`` unless a call already reached it.

    A gate stops only the first call that reaches it. Dex may hand a task whose Worker died before any
    output to another Worker at the same attempt number; that rerun must not wait at the gate again.
    """
    if gate.is_reached:
        return
    await gate.pass_through()


def _invocation(
    kind: InvocationKind,
    execution: DeferredToolExecution | ToolTaskPoll | ToolTaskCancellation,
    task_id: str = "",
) -> Invocation:
    record = execution.tool_call
    return Invocation(
        kind=kind,
        session_id=execution.flow_id,
        turn_id=record.turn_id,
        attempt=execution.attempt,
        tool_name=record.tool_name,
        tool_call_id=record.tool_call_id,
        idempotency_key=execution.idempotency_key,
        task_id=task_id,
    )


def ask_scripted_questions(
    call: ScriptedToolCall | None, store: ScriptStore, execution: DeferredToolExecution
) -> list[str]:
    """Ask the call's scripted questions in order and return their answers.

    Raises:
        ToolInputRequired: For the first question without an answer; it is logged as ``"tool_question"``.
    """
    answers: list[str] = []
    for question in () if call is None else call.asks:
        try:
            answers.append(
                ask_user_input(
                    question.question, choices=question.choices, allows_free_text=question.allows_free_text
                )
            )
        except ToolInputRequired:
            store.invocations.record(_invocation("tool_question", execution))
            raise
    return answers


async def start_scripted_task(call: ScriptedToolCall, task: ScriptedTask, store: ScriptStore) -> None:
    """Start the call's task (unless an earlier attempt did) and hand it to the session.

    Raises:
        ToolTaskRunning: Always, once the task's handle is saved.
    """
    execution = current_tool_execution()
    assert execution is not None
    task_id = started_tool_task()
    if task_id is None:
        earlier = store.invocations.tool_task_events(execution.flow_id, "task_start", call.tool_call_id)
        task_id = f"task-{call.tool_call_id}-{len(earlier) + 1}"
        _TaskState(store, execution.flow_id, task_id).save(
            {"polls": 0, "resolution": None, "cancelled": False}
        )
        store.invocations.record(_invocation("task_start", execution, task_id=task_id))
    try:
        await start_tool_task(task_id, poll_interval_seconds=task.poll_interval_seconds)
    except ToolTaskRunning:
        if task.gate is not None:
            execution.events.write_event(TASK_HANDLE_SAVED_EVENT, {"task_id": task_id})
            await hold_first_arrival(store.gate(execution.flow_id, task.gate))
        raise


class _TaskState:
    """One scripted task's state file in the state directory."""

    def __init__(self, store: ScriptStore, session_id: str, task_id: str) -> None:
        self._path = Path(store.state_dir) / "tasks" / session_id / f"{task_id}.json"

    def load(self) -> dict[str, Any]:
        if not self._path.exists():
            return {"polls": 0, "resolution": None, "cancelled": False}
        return cast(dict[str, Any], json.loads(self._path.read_text(encoding="utf-8")))

    def save(self, state: Mapping[str, Any]) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_suffix(".tmp")
        temporary.write_text(json.dumps(dict(state)), encoding="utf-8")
        temporary.replace(self._path)


async def poll_scripted_task(poll: ToolTaskPoll, store: ScriptStore) -> ToolTaskPollOutcome:
    """Poll a scripted task once: its question, its result, or that it still runs."""
    record = poll.tool_call
    task_id = record.task_id or ""
    call = store.tool_call(poll.flow_id, record.turn_id, record.tool_call_id)
    task = None if call is None else call.task
    if task is None:
        raise LookupError(f"the script has no task for tool call {record.tool_call_id!r}")
    state_file = _TaskState(store, poll.flow_id, task_id)
    state = state_file.load()
    state["polls"] += 1
    state_file.save(state)
    store.invocations.record(_invocation("task_poll", poll, task_id=task_id))
    if task.poll_gate is not None and poll.attempt == 1:
        await hold_first_arrival(store.gate(poll.flow_id, task.poll_gate))
    question = task.question
    request_name = f"{task_id}/question-1"
    if question is not None and state["resolution"] is None:
        answer = poll.pending_answer
        if answer is None or record.input_continuation != request_name:
            return ToolInputRequested(
                question.question, question.choices, question.allows_free_text, continuation=request_name
            )
        state["resolution"] = asdict(answer)
        state_file.save(state)
    if state["polls"] < task.polls:
        return ToolTaskPending(task.poll_interval_seconds)
    output = task.output or f"task {task_id} done"
    resolution = cast(dict[str, str] | None, state["resolution"])
    if resolution is not None:
        output = f"{output} ({resolution['resolution']}: {resolution['answer']})"
    return ToolExecutionResult(output)


async def cancel_scripted_task(cancellation: ToolTaskCancellation, store: ScriptStore) -> None:
    """Cancel a scripted task: mark it cancelled and log a ``"task_cancel"``."""
    task_id = cancellation.tool_call.task_id or ""
    state_file = _TaskState(store, cancellation.flow_id, task_id)
    state = state_file.load()
    state["cancelled"] = True
    state_file.save(state)
    store.invocations.record(_invocation("task_cancel", cancellation, task_id=task_id))


def answers_suffix(answers: Sequence[str]) -> str:
    """Return what a scripted tool adds to its output for the answers it received."""
    return f" with answers {json.dumps(list(answers), ensure_ascii=False)}" if answers else ""
