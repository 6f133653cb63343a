"""Writing a tool call's record: making it final, and moving it to a question.

Every Step that ends a call goes through `finish_call`, so each final record publishes its
`ToolCallResults` message and writes `tool_call_finished` in the same commit, whichever Step ends it.
"""

from __future__ import annotations

from dataclasses import replace

from dex import AsyncContext, StepDecision, dead_end

from dex_agents._tools._builtins import ASK_USER
from dex_agents._tools._outcomes import ToolInputRequested
from dex_agents.limits import MAX_STORED_VALUE_BYTES, bounded_text
from dex_agents.persistence import AGENT_TOOL_CALLS
from dex_agents.session._deps import SessionDeps
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._state import finish_tool_call, stored_size
from dex_agents.values import AgentToolCall, CancellationReason, ToolCallStatus, ToolEffect

__all__ = [
    "finish_by_effect",
    "finish_call",
    "idempotency_key",
    "is_ask_user_call",
    "oversized_record_error",
    "question_interrupt_id",
    "store_final_call",
    "store_input_request",
]


def idempotency_key(flow_id: str, record: AgentToolCall) -> str:
    """Return `<flow_id>/<turn_id>/<tool_call_id>`, the same on every attempt of the call."""
    return f"{flow_id}/{record.turn_id}/{record.tool_call_id}"


def finish_call(
    context: AsyncContext,
    deps: SessionDeps,
    record: AgentToolCall,
    status: ToolCallStatus,
    *,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
    cancellation_reason: CancellationReason | None = None,
) -> StepDecision:
    """Make ``record`` final with ``status`` (see `store_final_call`) and end the Step."""
    store_final_call(
        context,
        deps,
        record,
        status,
        output=output,
        error=error,
        rejection_message=rejection_message,
        cancellation_reason=cancellation_reason,
    )
    return dead_end()


def store_final_call(
    context: AsyncContext,
    deps: SessionDeps,
    record: AgentToolCall,
    status: ToolCallStatus,
    *,
    output: str | None = None,
    error: str | None = None,
    rejection_message: str | None = None,
    cancellation_reason: CancellationReason | None = None,
) -> None:
    """Make ``record`` final with ``status``, publish its result, and write `tool_call_finished`."""
    final = replace(
        record,
        status=status,
        output=output,
        error=None if error is None else bounded_text(error),
        rejection_message=None if rejection_message is None else bounded_text(rejection_message),
        cancellation_reason=cancellation_reason
        if cancellation_reason is not None
        else record.cancellation_reason,
        input_question=None,
        input_choices=(),
        input_allows_free_text=True,
        task_answer_pending=False,
    )
    finish_tool_call(context, final)
    deps.event_writer(context, record.turn_id).write_tool_call_finished(
        record.tool_call_id, record.tool_name, status.value
    )


def finish_by_effect(
    context: AsyncContext, deps: SessionDeps, record: AgentToolCall, error: str
) -> StepDecision:
    """End a call whose tool may have taken effect: `failed` for a read, `outcome_unknown` otherwise."""
    status = ToolCallStatus.FAILED if record.effect is ToolEffect.READ else ToolCallStatus.OUTCOME_UNKNOWN
    return finish_call(context, deps, record, status, error=error)


def oversized_record_error(record: AgentToolCall, what: str) -> str | None:
    """Return why ``record`` is too large to store, or `None` when it fits.

    Args:
        record: The record as it would be stored.
        what: What makes it large, for the error (``"the tool's output"``).
    """
    size = stored_size(record)
    if size <= MAX_STORED_VALUE_BYTES:
        return None
    return (
        f"{what} makes its record {size} bytes, more than the {MAX_STORED_VALUE_BYTES}-byte limit of one "
        "stored value; return less, or store it elsewhere and return a reference"
    )


def is_ask_user_call(options: AgentSessionOptions, record: AgentToolCall) -> bool:
    """Whether ``record`` is a call of the enabled ``ask_user`` built-in (a disabled name is a plain tool)."""
    return record.tool_name == ASK_USER and ASK_USER in options.built_in_tools


def question_interrupt_id(options: AgentSessionOptions, record: AgentToolCall) -> str:
    """Return the interrupt ID of the question ``record`` waits on.

    ``ask_user`` uses the tool call ID, like an approval; a tool's n-th question, counting every question
    the call asked, uses ``<tool_call_id>-input-<n>``.
    """
    if is_ask_user_call(options, record):
        return record.tool_call_id
    return f"{record.tool_call_id}-input-{len(record.input_answers) + 1}"


def store_input_request(
    context: AsyncContext, record: AgentToolCall, request: ToolInputRequested
) -> AgentToolCall | str:
    """Store ``record`` as `awaiting_answer` for ``request``; `AwaitQuestionAnswer` raises the question.

    Returns:
        The stored record, or why it could not be stored (a continuation too large for one value).
    """
    waiting = replace(
        record,
        status=ToolCallStatus.AWAITING_ANSWER,
        input_question=request.question,
        input_choices=tuple(request.choices),
        input_allows_free_text=request.allows_free_text,
        input_continuation=request.continuation,
        task_answer_pending=False,
    )
    problem = oversized_record_error(waiting, "the question's continuation")
    if problem is not None:
        return problem
    AGENT_TOOL_CALLS.set(context, waiting.tool_call_id, waiting)
    return waiting
