"""The RPCs that steer the active turn, delete a queued message, and cancel the active turn.

`AgentSessionFlow` declares them (the SDK finds RPCs on the Flow class) and delegates here. RPCs cannot
write events, so the Steps that apply their effects write them: `ApplyTurnControl` (`turn_steered`,
`turn_cancelled`), `ResumeTurn` and `FinishTurnCancellation` (`interrupt_resolved`).
"""

from __future__ import annotations

from dex import ChannelMessage, Context, RPCResult

from dex_agents.limits import MAX_USER_MESSAGE_BYTES, unencodable_index, utf8_size
from dex_agents.persistence import (
    QUEUED_USER_MESSAGES,
    STEERED_USER_MESSAGES,
    TURN_CANCELLATION_REQUEST,
    TURN_CONTROL_REQUESTS,
)
from dex_agents.runner import AgentFrameworkRunner
from dex_agents.session._control import is_turn_cancelled
from dex_agents.session._moves import Moves
from dex_agents.session._state import format_time, now, read_state
from dex_agents.session._turn_lifecycle import user_message_problem
from dex_agents.values import (
    AgentUserMessage,
    CancelTurnRequest,
    DeleteQueuedMessageRequest,
    SteerUserMessageRequest,
    TurnCancellationRequest,
    TurnControlKind,
    TurnControlRequest,
)

__all__ = ["cancel_turn", "delete_queued_message", "steer_user_message"]


def _is_usable_text(text: object) -> bool:
    return (
        isinstance(text, str)
        and bool(text.strip())
        and utf8_size(text) <= MAX_USER_MESSAGE_BYTES
        and unencodable_index(text) is None
    )


def _find_queued(context: Context, message_id: object) -> ChannelMessage[AgentUserMessage] | None:
    if not isinstance(message_id, str) or not message_id.strip():
        return None
    return next(
        (
            message
            for message in QUEUED_USER_MESSAGES.pending_messages(context)
            if message.message_id == message_id
        ),
        None,
    )


def steer_user_message(
    context: Context, request: SteerUserMessageRequest, runner: AgentFrameworkRunner
) -> RPCResult[bool]:
    """Steer the active turn with a new message or a queued one; see `AgentSessionFlow.steer_user_message`."""
    message_id, text = request.message_id, request.text
    if (message_id is None) == (text is None):
        return RPCResult(False)
    if text is not None and (not _is_usable_text(text) or user_message_problem(runner, text) is not None):
        return RPCResult(False)
    queued = None if message_id is None else _find_queued(context, message_id)
    if message_id is not None and queued is None:
        return RPCResult(False)
    state = read_state(context)
    if state is None or state.active_turn_id is None:
        # An idle wait that an earlier Worker began listens only to QueuedUserMessages, so a steer without
        # a turn to steer is an ordinary queued message; a queued one stays where it is.
        if text is not None:
            QUEUED_USER_MESSAGES.publish(context, AgentUserMessage(text=text))
        return RPCResult(True)
    if not state.accepts_turn_control:
        # A Worker without steering started or advanced this turn: its waits never wake for a steer.
        return RPCResult(False)
    if queued is not None:
        # In one transaction: when the message is consumed before this commits, nothing commits.
        QUEUED_USER_MESSAGES.delete(context, queued.message_id)
        STEERED_USER_MESSAGES.publish(context, queued.value)
    else:
        assert text is not None
        STEERED_USER_MESSAGES.publish(context, AgentUserMessage(text=text))
    TURN_CONTROL_REQUESTS.publish(context, TurnControlRequest(TurnControlKind.STEER))
    return RPCResult(True)


def delete_queued_message(context: Context, request: DeleteQueuedMessageRequest) -> RPCResult[bool]:
    """Delete a queued message; see `AgentSessionFlow.delete_queued_message`."""
    queued = _find_queued(context, request.message_id)
    if queued is None:
        return RPCResult(False)
    QUEUED_USER_MESSAGES.delete(context, queued.message_id)
    return RPCResult(True)


def cancel_turn(context: Context, request: CancelTurnRequest, moves: Moves) -> RPCResult[bool]:
    """Cancel the active turn; see `AgentSessionFlow.cancel_turn`."""
    state = read_state(context)
    if state is None or state.active_turn_id is None:
        return RPCResult(False)
    turn_id = state.active_turn_id
    if request.turn_id is not None and request.turn_id != turn_id:
        return RPCResult(False)
    if not state.accepts_turn_control:
        return RPCResult(False)
    if is_turn_cancelled(context, turn_id):
        return RPCResult(True)
    TURN_CANCELLATION_REQUEST.set(
        context, TurnCancellationRequest(turn_id=turn_id, requested_at=format_time(now()))
    )
    return RPCResult(True, next_steps=(moves.to_finish_turn_cancellation(turn_id),)).with_canceling_steps(
        *moves.cancelled_with_the_turn
    )
