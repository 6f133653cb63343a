"""Starting and ending a turn, and what a turn that ends without a final answer keeps of its items.

Every Step that starts a turn (`StartAgentSession`, `AwaitUserMessage`, `ApplyTurnControl`) and every Step
that ends one (`RunModel`, `RecordTurnFailure`, `ApplyTurnControl`) goes through these functions, so a turn's
start and end write the same state whichever Step does it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import cast

from dex import AsyncContext, StepDecision, StepMovement, go_to_many

from dex_agents._release import installed_version
from dex_agents.events import AgentEventType, AgentEventWriter
from dex_agents.limits import MAX_TURN_FAILURE_NOTE_BYTES, bounded_text
from dex_agents.persistence import (
    AGENT_PLAN,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
)
from dex_agents.runner import AgentFrameworkRunner, AgentTurnContext
from dex_agents.session._deps import SessionDeps
from dex_agents.session._errors import SessionStateError, describe_exception
from dex_agents.session._message_reads import MessagesNotLoadedError, read_index, read_messages
from dex_agents.session._moves import Moves
from dex_agents.session._session_options import AgentSessionOptions
from dex_agents.session._settings import copy_settings_into_turn, read_turn_session_settings
from dex_agents.session._state import (
    InvalidRunnerOutput,
    format_time,
    now,
    read_context_summary,
    read_run_state,
    read_state,
    read_usage,
    to_agent_message,
    usage_payload,
)
from dex_agents.session._storage import append_messages, register_stored_tool_outputs
from dex_agents.values import (
    AgentMessage,
    AgentPlan,
    AgentSessionStatus,
    AgentState,
    AgentToolCall,
    AgentUsage,
    CompactContextInput,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
)

__all__ = [
    "UNSTORABLE_USER_MESSAGE",
    "back_to_the_model",
    "begin_turn",
    "end_turn",
    "has_unfinished_turn_builder",
    "record_usage",
    "storable_note",
    "store_unfinished_turn_messages",
    "turn_context",
    "user_message",
    "user_message_problem",
]

#: How `last_turn_error` starts when a user message could not be stored, so no turn started.
UNSTORABLE_USER_MESSAGE = "the user message could not be stored"

_logger = logging.getLogger("dex_agents")

_UNFINISHED_TURN_BUILDER = "build_unfinished_turn_messages"

#: The smallest note budget `storable_note` tries before it gives up on the note.
_SMALLEST_NOTE_BUDGET_BYTES = 1024


def user_message_problem(runner: AgentFrameworkRunner, text: str) -> str | None:
    """Return why the runner's user message for ``text`` cannot be stored, or `None` when it can.

    The RPCs that accept a user message ask before they queue it: the size the session checks is the
    message's stored size, and the runner's ``framework_item`` repeats the text, escaped by its own JSON.
    """
    try:
        to_agent_message(user_message(runner, text), 1, "turn-1", format_time(now()))
    except InvalidRunnerOutput as error:
        return str(error)
    return None


def user_message(runner: AgentFrameworkRunner, text: str) -> FrameworkMessage:
    """Return the runner's user message for ``text``.

    Raises:
        SessionStateError: If the runner returns something other than a user `FrameworkMessage`.
    """
    message = runner.build_user_message(text)
    if not isinstance(message, FrameworkMessage):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise SessionStateError(
            f"build_user_message must return a FrameworkMessage, got {type(message).__name__}"
        )
    if message.role != MessageRole.USER:
        raise SessionStateError(
            f"build_user_message must return a message with role user, got {message.role!r}"
        )
    return message


def storable_note(
    runner: AgentFrameworkRunner, render: Callable[[int], str], sequence: int, turn_id: str
) -> FrameworkMessage:
    """Return the runner's user message for a note, shortened until it can be stored.

    ``render(max_bytes)`` writes the note's text, at most `MAX_TURN_FAILURE_NOTE_BYTES` at first. The stored
    message also holds the text in the runner's ``framework_item``, escaped by the framework's JSON, so only
    the stored size tells whether it fits; each try gives the note a quarter of the room of the one before.

    Raises:
        InvalidRunnerOutput: If even a note of `_SMALLEST_NOTE_BUDGET_BYTES` cannot be stored.
    """
    budget = MAX_TURN_FAILURE_NOTE_BYTES
    while True:
        note = user_message(runner, render(budget))
        try:
            to_agent_message(note, sequence, turn_id, format_time(now()))
        except InvalidRunnerOutput:
            if budget <= _SMALLEST_NOTE_BUDGET_BYTES:
                raise
            budget //= 4
            continue
        return note


def begin_turn(
    context: AsyncContext,
    deps: SessionDeps,
    moves: Moves,
    state: AgentState,
    texts: Sequence[str],
    *,
    interaction_mode: InteractionMode = InteractionMode.CHAT,
) -> StepDecision:
    """Store ``texts`` as the user messages of a new turn in ``interaction_mode`` and move to `RunModel`.

    The same commit records where the turn's replies start and copies the session settings into the turn.
    The turn accepts steering and cancellation: this Worker's Steps wait for them. The user's messages
    start an activation, whose root the turn's spans join.
    """
    turn_id = f"turn-{state.turn_count + 1}"
    deps.tracing.begin_activation(context, turn_id)
    messages = [user_message(deps.runner, text) for text in texts]
    sequence = state.next_message_sequence
    try:
        started, _ = append_messages(
            context, deps.options, state, turn_id, messages, user_message_count=len(messages)
        )
    except InvalidRunnerOutput as error:
        # The message left its Channel with this Step, and retrying cannot make it fit: the session says
        # why in last_turn_error and waits for the next message (the RPCs refuse such a message first).
        reason = bounded_text(f"{UNSTORABLE_USER_MESSAGE}: {error}, so no turn started")
        _logger.warning("session %s: %s", context.flow_id, reason)
        AGENT_STATE.set(context, replace(state, last_turn_error=reason))
        return go_to_many(moves.to_await_user_message())
    copy_settings_into_turn(context, turn_id)
    AGENT_STATE.set(
        context,
        replace(
            started,
            status=AgentSessionStatus.RUNNING_MODEL,
            active_turn_id=turn_id,
            interaction_mode=interaction_mode,
            accepts_turn_control=True,
            active_turn_release=installed_version(),
        ),
    )
    deps.event_writer(context, turn_id).write_event(AgentEventType.TURN_STARTED, {"sequence": sequence})
    return go_to_many(moves.to_run_model(context))


def back_to_the_model(
    context: AsyncContext, moves: Moves, state: AgentState
) -> StepMovement[CompactContextInput | None]:
    """Store ``state`` as running the model and return the move to `RunModel`, whose input sees it."""
    AGENT_STATE.set(context, replace(state, status=AgentSessionStatus.RUNNING_MODEL))
    return moves.to_run_model(context)


def end_turn(
    context: AsyncContext,
    options: AgentSessionOptions,
    state: AgentState,
    records: Sequence[AgentToolCall],
    last_turn_error: str | None,
) -> AgentState:
    """Clear the turn's records, run state and interrupts, and store the idle state.

    Its tool outputs stored apart stay, for the client to read; with retention they are listed in the index
    to be deleted with the turn's messages.
    """
    register_stored_tool_outputs(context, options, state, records)
    for record in records:
        AGENT_TOOL_CALLS.delete(context, record.tool_call_id)
    FRAMEWORK_RUN_STATE.delete(context)
    PENDING_INTERRUPTS.set(context, [])
    ended = replace(
        state,
        status=AgentSessionStatus.WAITING_FOR_USER_MESSAGE,
        turn_count=state.turn_count + 1,
        active_turn_id=None,
        last_turn_error=None if last_turn_error is None else bounded_text(last_turn_error),
        accepts_turn_control=False,
        active_turn_release=None,
    )
    AGENT_STATE.set(context, ended)
    return ended


def turn_context(
    context: AsyncContext,
    deps: SessionDeps,
    turn_id: str,
    records: Sequence[AgentToolCall],
    writer: AgentEventWriter,
) -> AgentTurnContext:
    """Return the committed state of a turn for a runner call.

    A runner that compacts gets the summary and the messages after it; any other runner gets every stored
    message. Needs the window and those chunks loaded (`SessionTransitions.to_run_model`).
    """
    summary = read_context_summary(context) if deps.compacts else None
    return AgentTurnContext(
        flow_id=context.flow_id,
        turn_id=turn_id,
        attempt=context.attempt,
        messages=_model_input_messages(context, turn_id, 0 if summary is None else summary.last_sequence),
        framework_run_state=read_run_state(context),
        tool_calls={record.tool_call_id: record for record in records},
        events=writer,
        tool_policies=deps.options.tool_policies,
        default_tool_effect=deps.options.default_tool_effect,
        heartbeat_function=context.heartbeat,
        session_settings=read_turn_session_settings(context, turn_id),
        context_summary=summary,
        interaction_mode=_interaction_mode(context),
        enabled_built_in_tools=tuple(deps.options.built_in_tools),
        plan=cast(AgentPlan | None, AGENT_PLAN.get(context)),
    )


def _interaction_mode(context: AsyncContext) -> InteractionMode:
    state = read_state(context)
    return InteractionMode.CHAT if state is None else state.interaction_mode


def _model_input_messages(context: AsyncContext, turn_id: str, after: int) -> tuple[AgentMessage, ...]:
    state = read_state(context)
    if state is None:
        return ()
    index = read_index(context)
    if after == 0 and index is not None and index.first_sequence > 1:
        _logger.warning(
            "turn %s of session %s: retention deleted messages before %d and the runner does not compact, "
            "so its model input starts there without a summary",
            turn_id,
            context.flow_id,
            index.first_sequence,
        )
    try:
        return tuple(read_messages(context, after, state.next_message_sequence - 1))
    except MessagesNotLoadedError as error:
        # Only a Step that a Worker of an earlier release scheduled lacks the loads; it must still end the
        # turn, and the runner's builders get the records and the run state, which are loaded.
        _logger.warning(
            "turn %s of session %s: %s; the runner sees no messages", turn_id, context.flow_id, error
        )
        return ()


def has_unfinished_turn_builder(runner: AgentFrameworkRunner) -> bool:
    """Whether the runner implements `UnfinishedTurnMessageBuilder`."""
    return callable(getattr(runner, _UNFINISHED_TURN_BUILDER, None))


async def _build_unfinished_turn_messages(
    context: AsyncContext, deps: SessionDeps, turn_id: str, records: Sequence[AgentToolCall]
) -> list[object] | None:
    builder = getattr(deps.runner, _UNFINISHED_TURN_BUILDER, None)
    if not callable(builder):
        return None
    writer = deps.event_writer(context, turn_id)
    try:
        result = builder(turn_context(context, deps, turn_id, records, writer))
        if inspect.isawaitable(result):
            result = await result
    except asyncio.CancelledError:
        raise
    except Exception as error:
        # A runner defect must never block the Step that ends the turn.
        _logger.warning(
            "build_unfinished_turn_messages raised for turn %s, so none of its unstored items are kept: %s",
            turn_id,
            describe_exception(error),
        )
        return None
    finally:
        writer.close()
    if not isinstance(result, Sequence) or isinstance(result, str | bytes):
        _logger.warning(
            "build_unfinished_turn_messages must return a sequence of FrameworkMessage, got %s; "
            "none of turn %s's unstored items are kept",
            type(cast(object, result)).__name__,
            turn_id,
        )
        return None
    return list(cast(Sequence[object], result))


async def store_unfinished_turn_messages(
    context: AsyncContext, deps: SessionDeps, state: AgentState, records: Sequence[AgentToolCall]
) -> tuple[AgentState, bool]:
    """Append what the runner's `build_unfinished_turn_messages` returns for the active turn.

    Needs the whole `AgentMessages` map loaded.

    Returns:
        The advanced state, and whether the runner's items were stored: `False` when it does not implement
        the builder, the builder raised, or it returned something that cannot be stored (logged; nothing is
        appended then).
    """
    turn_id = state.active_turn_id
    if turn_id is None:
        return state, False
    messages = await _build_unfinished_turn_messages(context, deps, turn_id, records)
    if messages is None:
        return state, False
    try:
        advanced, _ = append_messages(context, deps.options, state, turn_id, messages)
    except InvalidRunnerOutput as error:
        _logger.warning(
            "build_unfinished_turn_messages returned an item of turn %s that cannot be stored, so none "
            "are kept: %s",
            turn_id,
            error,
        )
        return state, False
    return advanced, True


def record_usage(context: AsyncContext, deps: SessionDeps, turn_id: str | None, usage: AgentUsage) -> None:
    """Add one model call's usage to the session's and write `usage_recorded`."""
    total = read_usage(context).plus(usage)
    AGENT_USAGE.set(context, total)
    deps.event_writer(context, turn_id).write_event(
        AgentEventType.USAGE_RECORDED, usage_payload(usage, total)
    )
