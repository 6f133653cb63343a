"""What a tool's own code calls to ask the user a question or to hand remote work to the session.

These work in any framework, because they need nothing from it: the session makes the running call
available to tool code (`current_tool_execution`), and these functions record what the tool asks for on
that call. Each raises an exception so the tool stops at once; a framework that catches the exception and
turns it into an error result does no harm, because the session reads the recorded request after the
runner returns and ignores the result.

Asking before taking effect::

    async def refund_order(order_id: str) -> str:
        warehouse = ask_user_input("Which warehouse takes the return?", choices=["Berlin", "Lyon"])
        return await payments.refund(order_id, warehouse)  # runs once, with the answer

Starting remote work::

    async def render_video(script: str) -> str:
        execution = current_tool_execution()
        job_id = started_tool_task() or await renderer.start(script, key=execution.idempotency_key)
        await start_tool_task(job_id, poll_interval_seconds=30)  # the runner's poller takes over
"""

from __future__ import annotations

from typing import NoReturn

from dex_agents._tools._context import ToolCallRequests, current_tool_call_requests
from dex_agents._tools._outcomes import ToolInputRequested, ToolTaskStarted
from dex_agents.runner import DeferredToolExecution

__all__ = [
    "ToolCallSuspended",
    "ToolInputRequired",
    "ToolTaskRunning",
    "ask_user_input",
    "start_tool_task",
    "started_tool_task",
]

# Checkpoints this module writes start with it, so it reads back only its own.
_TASK_CHECKPOINT_PREFIX = "dex-agents/tool-task:"


class ToolCallSuspended(Exception):
    """The tool stopped to wait for the session: for the user's answer, or for its remote task.

    Let it propagate out of the tool. The session has already recorded the request, so a framework that
    catches it loses nothing.
    """


class ToolInputRequired(ToolCallSuspended):
    """Raised by `ask_user_input` when the question has no answer yet.

    Attributes:
        request: The question, as the session raises it.
    """

    def __init__(self, request: ToolInputRequested) -> None:
        """Create the exception for ``request``."""
        super().__init__(f"the tool waits for the user's answer to: {request.question}")
        self.request = request


class ToolTaskRunning(ToolCallSuspended):
    """Raised by `start_tool_task` once the task is handed to the session.

    Attributes:
        task: The started task.
    """

    def __init__(self, task: ToolTaskStarted) -> None:
        """Create the exception for ``task``."""
        super().__init__(f"the tool started task {task.task_id!r}; the session polls it")
        self.task = task


def _current(function: str) -> tuple[DeferredToolExecution, ToolCallRequests]:
    current = current_tool_call_requests()
    if current is None:
        raise RuntimeError(
            f"{function}() must be called from a tool that the session runs (inside "
            "execute_deferred_tool_call); it found no current tool call"
        )
    return current


def ask_user_input(
    question: str,
    *,
    choices: tuple[str, ...] | list[str] = (),
    allows_free_text: bool = True,
    continuation: str | None = None,
) -> str:
    """Return the user's answer to ``question``, asking for it first when the call has none yet.

    Ask before the tool takes any effect. The first time, the call stops (this raises `ToolInputRequired`)
    and the session asks the user; once they answer, the session runs the tool again from the start, and
    this returns the answer. A tool may ask several questions; it must ask them in the same order on every
    run, because the n-th question gets the n-th answer. A declined or expired question ends the call as
    rejected, so the tool never runs without its answer.

    Args:
        question: What the user is asked; not blank.
        choices: The answers offered.
        allows_free_text: Whether an answer outside ``choices`` is accepted; `False` needs choices.
        continuation: Opaque text the next run reads as ``current_tool_execution().tool_call
            .input_continuation``.

    Returns:
        The user's answer.

    Raises:
        ToolInputRequired: When the question has no answer yet; let it propagate.
        ValueError: If the question is not valid.
        RuntimeError: Outside a tool call the session runs.
    """
    request = ToolInputRequested(question, tuple(choices), allows_free_text, continuation)
    execution, requests = _current("ask_user_input")
    position = requests.questions_asked
    requests.questions_asked += 1
    answers = execution.input_answers
    if position < len(answers):
        return answers[position].answer
    if requests.outcome is None:
        requests.outcome = request
    raise ToolInputRequired(request)


async def start_tool_task(task_id: str, *, poll_interval_seconds: float) -> NoReturn:
    """Hand a started remote task to the session, which polls it with the runner's ``poll_tool_task``.

    Call it right after the remote work exists. It saves ``task_id`` as the attempt's heartbeat checkpoint
    first, so a retried attempt finds it with `started_tool_task` instead of starting the work again, then
    stops the call (this raises `ToolTaskRunning`).

    Args:
        task_id: The task's handle; not blank.
        poll_interval_seconds: Seconds until the first poll.

    Raises:
        ToolTaskRunning: Always; let it propagate.
        ValueError: If ``task_id`` is blank.
        RuntimeError: Outside a tool call the session runs, or when the runner does not poll tasks
            (`DeferredToolExecution.supports_tool_tasks`); run the work to its end inside the call then.
    """
    if not isinstance(task_id, str) or not task_id.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ValueError("a task ID must be non-blank text")
    execution, requests = _current("start_tool_task")
    if not execution.supports_tool_tasks:
        raise RuntimeError(
            "this runner does not poll tool tasks (it has no poll_tool_task), so the tool must run its work "
            "to the end inside the call; check current_tool_execution().supports_tool_tasks first"
        )
    await execution.save_heartbeat_checkpoint(_TASK_CHECKPOINT_PREFIX + task_id)
    task = ToolTaskStarted(task_id, poll_interval_seconds)
    if requests.outcome is None:
        requests.outcome = task
    raise ToolTaskRunning(task)


def started_tool_task() -> str | None:
    """Return the task an earlier attempt of this tool call handed over with `start_tool_task`.

    Returns:
        The task ID from the attempt's heartbeat checkpoint, or `None` when there is none (the first
        attempt, a checkpoint Dex dropped, or one that other code wrote).

    Raises:
        RuntimeError: Outside a tool call the session runs.
    """
    execution, _ = _current("started_tool_task")
    checkpoint = execution.heartbeat_checkpoint
    if checkpoint is None or not checkpoint.startswith(_TASK_CHECKPOINT_PREFIX):
        return None
    return checkpoint[len(_TASK_CHECKPOINT_PREFIX) :] or None
