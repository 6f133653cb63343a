"""Plans: what ``write_todos`` writes, the note a runner shows the model, and the texts of plan mode.

A session's plan (`AgentPlan`) is a list of tasks with a revision. ``write_todos`` replaces it; in a
planning turn the new plan is a draft that the user approves with ``execute_plan``, which starts an
executing turn. Everything here is pure, so runners and the session share one rendering.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from dex_agents.values import AgentPlan, AgentPlanTask, InteractionMode, PlanStatus, PlanTaskStatus

__all__ = [
    "NO_PLAN_NOTE",
    "PLANNING_TURN_NOTE",
    "PLANNING_TURN_REJECTION_MESSAGE",
    "WRITE_TODOS_CALLED_TWICE_ERROR",
    "build_plan_approval_message",
    "build_plan_note",
    "replaced_plan",
    "write_todos_result",
]

#: The rejection message of any call but ``write_todos`` in a planning turn.
PLANNING_TURN_REJECTION_MESSAGE = "The tool call was not run: a planning turn can only call write_todos."
#: The error of every ``write_todos`` call of a response that has more than one.
WRITE_TODOS_CALLED_TWICE_ERROR = "write_todos was called more than once in one response"
#: The last line of the plan note in a planning turn.
PLANNING_TURN_NOTE = (
    "This turn only plans: write or revise the plan with write_todos, and do not do or claim any of its "
    "tasks. The user reviews the plan before it runs."
)
#: The plan note's first line in a planning turn without a plan.
NO_PLAN_NOTE = "[Dex] There is no plan yet."


def build_plan_note(plan: AgentPlan | None, interaction_mode: InteractionMode) -> str | None:
    """Return the note that shows the model the plan, as user text before the turn's messages.

    Args:
        plan: The committed plan (`AgentTurnContext.plan`), or `None`.
        interaction_mode: The turn's mode (`AgentTurnContext.interaction_mode`).

    Returns:
        The plan's revision, status and tasks, plus `PLANNING_TURN_NOTE` in a planning turn, where a
        missing or cleared plan reads `NO_PLAN_NOTE`; `None` outside a planning turn without a plan.
    """
    planning = InteractionMode(interaction_mode) is InteractionMode.PLANNING
    if plan is None or plan.status is PlanStatus.CLEARED:
        return f"{NO_PLAN_NOTE}\n{PLANNING_TURN_NOTE}" if planning else None
    lines = [f"[Dex] The current plan, revision {plan.revision}, is {plan.status.value}:"]
    lines.extend(f"- [{task.status.value}] {task.content}" for task in plan.tasks)
    if planning:
        lines.append(PLANNING_TURN_NOTE)
    return "\n".join(lines)


def build_plan_approval_message(revision: int) -> str:
    """Return the user message that starts the executing turn of an approved plan revision."""
    return (
        f"[Dex] The user approved plan revision {revision}. Execute it and keep the task statuses current "
        "with write_todos."
    )


def replaced_plan(
    previous: AgentPlan | None, tasks: Sequence[AgentPlanTask], *, planning: bool, updated_at: str
) -> AgentPlan:
    """Return the plan ``write_todos`` writes: the next revision with ``tasks``.

    No tasks clears the plan, a planning turn writes a draft, a plan whose tasks are all completed is
    completed, and any other plan is active.
    """
    revision = 1 if previous is None else previous.revision + 1
    if not tasks:
        status = PlanStatus.CLEARED
    elif planning:
        status = PlanStatus.DRAFT
    elif all(task.status is PlanTaskStatus.COMPLETED for task in tasks):
        status = PlanStatus.COMPLETED
    else:
        status = PlanStatus.ACTIVE
    return AgentPlan(revision=revision, status=status, tasks=tuple(tasks), updated_at=updated_at)


def write_todos_result(plan: AgentPlan) -> str:
    """Return the model-visible result of a successful ``write_todos`` call that wrote ``plan``."""
    if plan.status is PlanStatus.CLEARED:
        payload: dict[str, object] = {"status": "cleared", "revision": plan.revision}
    else:
        payload = {"status": "updated", "revision": plan.revision, "task_count": len(plan.tasks)}
    return json.dumps(payload, separators=(",", ":"))
