"""Steering and cancelling from a browser: reading the requests, and saying why a session refused one.

The session RPCs answer a refusal with a bare ``False``. The browser gets a 409 whose message names the
likely cause, read from a snapshot taken right after the refusal (so it describes the session as it is
now, which may have moved on since the RPC decided).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dex_agents.values import AgentSnapshot
from dex_agents.web._requests import checked_id, fail, text_field

__all__ = [
    "SteerRequest",
    "cancel_refusal",
    "not_queued",
    "read_cancel_turn_id",
    "read_steer_request",
    "steer_refusal",
]

_WITHOUT_STEERING = "a Worker without steering started it"


@dataclass(frozen=True)
class SteerRequest:
    """A steer: a new message's ``text``, or the ``message_id`` of a queued one (exactly one is set)."""

    text: str | None
    message_id: str | None


def read_steer_request(body: dict[str, Any]) -> SteerRequest:
    """Read ``{"text"}`` or ``{"message_id"}``.

    Raises:
        BadRequestError: 400 for both or neither field, a field that is not a string, or a malformed
            message ID; 422 for blank text.
    """
    has_text = body.get("text") is not None
    has_message_id = body.get("message_id") is not None
    if has_text == has_message_id:
        fail(
            400,
            "pass exactly one of 'text' (a new message) and 'message_id' (a queued message), "
            f"got {'both' if has_text else 'neither'}",
        )
    if has_text:
        return SteerRequest(text_field(body, "text"), None)
    message_id = body["message_id"]
    if not isinstance(message_id, str):
        fail(400, "the field 'message_id' must be a string")
    return SteerRequest(None, checked_id(message_id, "a message ID"))


def read_cancel_turn_id(body: dict[str, Any]) -> str | None:
    """Read the optional ``turn_id`` of a cancel request (``None``: whichever turn runs).

    Raises:
        BadRequestError: 400 for a ``turn_id`` that is not a string or not a valid ID.
    """
    turn_id = body.get("turn_id")
    if turn_id is None:
        return None
    if not isinstance(turn_id, str):
        fail(400, "the field 'turn_id' must be a string or null")
    return checked_id(turn_id, "a turn ID")


def not_queued(message_id: str) -> str:
    """The refusal of a message ID that names no queued message."""
    return f"the message {message_id!r} is not queued (a turn took it, it was deleted, or it never existed)"


def steer_refusal(snapshot: AgentSnapshot, request: SteerRequest) -> str:
    """Why ``steer_user_message`` returned ``False``, as far as ``snapshot`` tells."""
    queued = {item.message_id for item in snapshot.queued_messages}
    if request.message_id is not None and request.message_id not in queued:
        return not_queued(request.message_id)
    state = snapshot.state
    if state is not None and state.active_turn_id is not None and not state.accepts_turn_control:
        return (
            f"the running turn {state.active_turn_id!r} does not accept steering ({_WITHOUT_STEERING}); "
            "send the message instead, and it starts the next turn"
        )
    return "the session refused the steer; load the conversation again"


def cancel_refusal(snapshot: AgentSnapshot, turn_id: str | None) -> str:
    """Why ``cancel_turn`` returned ``False``, as far as ``snapshot`` tells."""
    state = snapshot.state
    active = state.active_turn_id if state is not None else None
    if active is None:
        return "no turn is running"
    if turn_id is not None and turn_id != active:
        return f"the turn {turn_id!r} is not running (the running turn is {active!r})"
    if state is not None and not state.accepts_turn_control:
        return f"the running turn {active!r} cannot be cancelled ({_WITHOUT_STEERING})"
    return "the session refused the cancellation; load the conversation again"
