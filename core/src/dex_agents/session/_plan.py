"""Plan mode: the turn's mode, writing the plan, and approving it with `execute_plan`.

A turn is `planning` when plan mode is enabled and one of its user messages has ``plan_mode`` or a draft
plan exists; in such a turn `RunModel` rejects every call but ``write_todos``, whose plan is a draft. The
user approves a draft (or an active plan) with `execute_plan`: it records the approval in
`PendingPlanExecution` and publishes it on `PlanExecutions`, and `AwaitUserMessage` starts an `executing`
turn for it. Both lock `PendingPlanExecution`, so of two approvals of one revision only the first is
accepted. `RunModel` and `AwaitUserMessage` are the only writers of `AgentPlan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from dex import AsyncContext, Context, RPCResult, StepDecision, go_to_many
from dex.condition import Condition

from dex_agents._plans import build_plan_approval_message, replaced_plan
from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.persistence import (
    AGENT_PLAN,
    PENDING_PLAN_EXECUTION,
    PLAN_EXECUTIONS,
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    plan_revision_key,
)
from dex_agents.session._deps import SessionDeps
from dex_agents.session._moves import Moves
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._state import format_time, now, read_interrupts, read_state
from dex_agents.session._turn_lifecycle import begin_turn
from dex_agents.values import (
    AgentPlan,
    AgentPlanTask,
    AgentSessionStatus,
    AgentState,
    ExecutePlanRequest,
    InteractionMode,
    PlanExecutionRequest,
    PlanStatus,
)

__all__ = [
    "decide_interaction_mode",
    "drop_stale_approval",
    "execute_plan",
    "is_plan_execution_wake",
    "plan_execution_condition",
    "read_plan",
    "start_plan_execution",
    "write_plan",
]

_APPROVABLE = frozenset({PlanStatus.DRAFT, PlanStatus.ACTIVE})


def read_plan(context: Context) -> AgentPlan | None:
    """Return the session's plan, or `None` before ``write_todos`` first wrote one."""
    return cast(AgentPlan | None, AGENT_PLAN.get(context))


def decide_interaction_mode(
    context: Context, options: AgentSessionOptions, plan_mode_flags: Sequence[bool]
) -> InteractionMode:
    """Return the mode of a turn that starts with user messages whose ``plan_mode`` flags are given."""
    if not options.plan_mode_enabled:
        return InteractionMode.CHAT
    plan = read_plan(context)
    if any(plan_mode_flags) or (plan is not None and plan.status is PlanStatus.DRAFT):
        return InteractionMode.PLANNING
    return InteractionMode.CHAT


def write_plan(
    context: AsyncContext,
    writer: AgentEventWriter,
    tasks: Sequence[AgentPlanTask],
    *,
    planning: bool,
) -> AgentPlan:
    """Replace the plan with the next revision holding ``tasks`` and write `plan_updated`."""
    plan = replaced_plan(read_plan(context), tasks, planning=planning, updated_at=format_time(now()))
    AGENT_PLAN.set(context, plan)
    _write_plan_updated(writer, plan)
    return plan


def _write_plan_updated(writer: AgentEventWriter, plan: AgentPlan) -> None:
    writer.write_event(
        AgentEventType.PLAN_UPDATED,
        {"revision": plan.revision, "status": plan.status.value, "task_count": len(plan.tasks)},
    )


def plan_execution_condition(context: AsyncContext) -> Condition | None:
    """Return `AwaitUserMessage`'s condition for an approval of the current plan, while it can be approved."""
    plan = read_plan(context)
    if plan is None or plan.status not in _APPROVABLE:
        return None
    return PLAN_EXECUTIONS.for_one(plan_revision_key(plan.revision))


def is_plan_execution_wake(context: AsyncContext) -> bool:
    """Whether `AwaitUserMessage` woke for an approval; it woke for nothing else when no message came."""
    plan = read_plan(context)
    return plan is not None and bool(PLAN_EXECUTIONS.results(context, plan_revision_key(plan.revision)))


def drop_stale_approval(context: AsyncContext) -> None:
    """Delete a pending approval of a revision that is no longer the plan's, or no longer approvable.

    A queued message can start a turn before an accepted approval is consumed; when that turn rewrites the
    plan, the approval can never start its turn, and it would refuse every later `execute_plan`.
    """
    pending = cast(PlanExecutionRequest | None, PENDING_PLAN_EXECUTION.get(context))
    if pending is None:
        return
    plan = read_plan(context)
    if plan is None or plan.revision != pending.revision or plan.status not in _APPROVABLE:
        PENDING_PLAN_EXECUTION.delete(context)


def start_plan_execution(
    context: AsyncContext, deps: SessionDeps, moves: Moves, state: AgentState
) -> StepDecision:
    """Consume an approval in `AwaitUserMessage`: start the executing turn, or wait again when it is stale."""
    PENDING_PLAN_EXECUTION.delete(context)
    plan = read_plan(context)
    approved = [request.revision for request in _consumed_approvals(context, plan)]
    if plan is None or plan.status not in _APPROVABLE or plan.revision not in approved:
        return go_to_many(moves.to_await_user_message())
    decision = begin_turn(
        context,
        deps,
        moves,
        state,
        [build_plan_approval_message(plan.revision)],
        interaction_mode=InteractionMode.EXECUTING,
    )
    started = read_state(context)
    writer = deps.event_writer(context, None if started is None else started.active_turn_id)
    if plan.status is not PlanStatus.ACTIVE:
        plan = replace(plan, status=PlanStatus.ACTIVE, updated_at=format_time(now()))
        AGENT_PLAN.set(context, plan)
        _write_plan_updated(writer, plan)
    writer.write_event(AgentEventType.PLAN_EXECUTION_STARTED, {"revision": plan.revision})
    return decision


def _consumed_approvals(context: AsyncContext, plan: AgentPlan | None) -> Sequence[PlanExecutionRequest]:
    if plan is None:
        return ()
    return PLAN_EXECUTIONS.results(context, plan_revision_key(plan.revision))


def execute_plan(context: Context, request: ExecutePlanRequest) -> RPCResult[bool]:
    """Approve a plan revision; see `AgentSessionFlow.execute_plan`. Holds the `PendingPlanExecution` lock."""
    revision = request.revision
    if isinstance(revision, bool) or not isinstance(revision, int):  # pyright: ignore[reportUnnecessaryIsInstance]
        return RPCResult(False)
    state = read_state(context)
    if (
        state is None
        or state.active_turn_id is not None
        or state.status is not AgentSessionStatus.WAITING_FOR_USER_MESSAGE
    ):
        return RPCResult(False)
    plan = read_plan(context)
    if plan is None or plan.revision != revision or plan.status not in _APPROVABLE:
        return RPCResult(False)
    if cast(PlanExecutionRequest | None, PENDING_PLAN_EXECUTION.get(context)) is not None:
        return RPCResult(False)
    waiting = (
        QUEUED_USER_MESSAGES.pending_messages(context)
        or STEERED_USER_MESSAGES.pending_messages(context)
        or read_interrupts(context)
    )
    if waiting:
        return RPCResult(False)
    approval = PlanExecutionRequest(revision=revision)
    PENDING_PLAN_EXECUTION.set(context, approval)
    PLAN_EXECUTIONS.publish(context, plan_revision_key(revision), approval)
    return RPCResult(True)
