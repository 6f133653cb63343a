"""Reading and writing session state from a Step or RPC Context."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from typing import cast

from dex import AsyncContext, Context

from dex_agents.limits import MAX_STORED_VALUE_BYTES, utf8_size
from dex_agents.persistence import (
    AGENT_MESSAGES,
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    TOOL_CALL_RESULTS,
    message_sequence_key,
)
from dex_agents.values import (
    AgentInterrupt,
    AgentMessage,
    AgentState,
    AgentToolCall,
    AgentUsage,
    FrameworkMessage,
    MessageRole,
    ToolCallCompleted,
)

__all__ = [
    "HEARTBEAT_INTERVAL",
    "InvalidRunnerOutput",
    "append_messages",
    "finish_tool_call",
    "format_time",
    "heartbeating",
    "iter_final",
    "now",
    "parse_time",
    "read_interrupts",
    "read_last_messages",
    "read_messages",
    "read_run_state",
    "read_state",
    "read_tool_call",
    "read_turn_records",
    "read_usage",
    "stored_size",
    "to_agent_message",
    "usage_payload",
]

#: How often the session heartbeats while a runner call is in progress.
HEARTBEAT_INTERVAL = timedelta(seconds=20)


class InvalidRunnerOutput(Exception):
    """A runner returned something the session cannot store; the turn fails without a retry."""


def now() -> datetime:
    """Return the Worker clock's current UTC time."""
    return datetime.now(UTC)


def format_time(moment: datetime) -> str:
    """Return ``moment`` as RFC 3339 in UTC with milliseconds and ``Z``."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_time(text: str) -> datetime:
    """Parse an RFC 3339 time in the ``Z`` or ``+00:00`` form."""
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def read_state(context: Context) -> AgentState | None:
    """Return the session state, or `None` before `StartAgentSession` commits."""
    return cast(AgentState | None, AGENT_STATE.get(context))


def read_usage(context: Context) -> AgentUsage:
    """Return the session's usage total."""
    return cast(AgentUsage | None, AGENT_USAGE.get(context)) or AgentUsage()


def read_interrupts(context: Context) -> list[AgentInterrupt]:
    """Return the pending interrupts."""
    return list(cast(list[AgentInterrupt] | None, PENDING_INTERRUPTS.get(context)) or [])


def read_run_state(context: Context) -> str | None:
    """Return the framework run state, or `None` when the turn has not requested tools."""
    value = cast(str | None, FRAMEWORK_RUN_STATE.get(context))
    return value or None


def read_messages(context: Context) -> list[AgentMessage]:
    """Return every stored message in sequence order. Needs the whole `AgentMessages` map loaded."""
    # Keys are zero-padded sequences, so their sorted order is sequence order.
    return [AGENT_MESSAGES.get(context, key) for key in AGENT_MESSAGES.get_all_instance_keys(context)]


def read_last_messages(
    context: Context, limit: int, before_sequence: int | None = None
) -> list[AgentMessage]:
    """Return the last ``limit`` messages of `read_messages` with a sequence below ``before_sequence``.

    The result equals ``[m for m in read_messages(context) if m.sequence < before_sequence][-limit:]``,
    but only the messages it returns (and, with ``before_sequence``, the newer ones it skips) are decoded,
    so a snapshot of a long session does not decode its whole history. Needs the whole map loaded.
    """
    found: list[AgentMessage] = []
    if limit <= 0:
        return found
    for key in reversed(AGENT_MESSAGES.get_all_instance_keys(context)):
        message = AGENT_MESSAGES.get(context, key)
        if before_sequence is not None and message.sequence >= before_sequence:
            continue
        found.append(message)
        if len(found) == limit:
            break
    found.reverse()
    return found


def read_tool_call(context: Context, tool_call_id: str) -> AgentToolCall | None:
    """Return one tool call record, or `None` when it does not exist. Needs its instance loaded."""
    return cast(AgentToolCall | None, AGENT_TOOL_CALLS.get(context, tool_call_id))


def read_turn_records(context: Context, turn_id: str | None) -> list[AgentToolCall]:
    """Return the records of one turn in deferral order. Needs the whole `AgentToolCalls` map loaded."""
    if turn_id is None:
        return []
    records = [AGENT_TOOL_CALLS.get(context, key) for key in AGENT_TOOL_CALLS.get_all_instance_keys(context)]
    return sorted((record for record in records if record.turn_id == turn_id), key=lambda r: r.deferral_order)


def stored_size(value: AgentMessage | AgentToolCall) -> int:
    """Return the stored size of a value: its JSON encoding, as the SDK writes it, in UTF-8 bytes."""
    return utf8_size(json.dumps(asdict(value), separators=(",", ":"), sort_keys=True))


def to_agent_message(message: object, sequence: int, turn_id: str, created_at: str) -> AgentMessage:
    """Check a runner's message and return it as a stored message.

    Raises:
        InvalidRunnerOutput: If the message is not a `FrameworkMessage` with a known role, string
            ``framework_item``, and a size that can be stored.
    """
    if not isinstance(message, FrameworkMessage):
        raise InvalidRunnerOutput(f"expected a FrameworkMessage, got {type(message).__name__}")
    try:
        role = MessageRole(message.role)
    except ValueError:
        raise InvalidRunnerOutput(f"a message has the unknown role {message.role!r}") from None
    if not isinstance(message.framework_item, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise InvalidRunnerOutput(
            f"a {role.value} message's framework_item must be text, "
            f"got {type(message.framework_item).__name__}"
        )
    stored = AgentMessage(
        sequence=sequence,
        turn_id=turn_id,
        role=role,
        text=message.text,
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        tool_arguments=message.tool_arguments,
        tool_output=message.tool_output,
        framework_item=message.framework_item,
        created_at=created_at,
    )
    size = stored_size(stored)
    if size > MAX_STORED_VALUE_BYTES:
        raise InvalidRunnerOutput(
            f"a {role.value} message is {size} bytes, more than the {MAX_STORED_VALUE_BYTES}-byte limit "
            "of one stored value"
        )
    return stored


def append_messages(
    context: Context, state: AgentState, turn_id: str, messages: Sequence[object]
) -> tuple[AgentState, list[AgentMessage]]:
    """Store runner messages after the last stored one and return the advanced state.

    Raises:
        InvalidRunnerOutput: If any message cannot be stored; nothing is written then.
    """
    created_at = format_time(now())
    stored = [
        to_agent_message(message, state.next_message_sequence + offset, turn_id, created_at)
        for offset, message in enumerate(messages)
    ]
    for message in stored:
        AGENT_MESSAGES.set(context, message_sequence_key(message.sequence), message)
    return replace(state, next_message_sequence=state.next_message_sequence + len(stored)), stored


def finish_tool_call(context: Context, record: AgentToolCall) -> None:
    """Store a final record and publish its result in the same commit, as every final record must."""
    AGENT_TOOL_CALLS.set(context, record.tool_call_id, record)
    TOOL_CALL_RESULTS.publish(context, ToolCallCompleted(record.tool_call_id))


def usage_payload(recorded: AgentUsage, session: AgentUsage) -> dict[str, object]:
    """Return the payload of a `usage_recorded` event."""
    return {"recorded": asdict(recorded), "session": asdict(session)}


@asynccontextmanager
async def heartbeating(
    context: AsyncContext,
    interval: timedelta = HEARTBEAT_INTERVAL,
    heartbeat: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[None]:
    """Heartbeat in the background while the block runs, so a long runner call is not timed out.

    Args:
        context: The Step's context.
        interval: The time between heartbeats.
        heartbeat: Sends one heartbeat; by default ``context.heartbeat()``, which clears any checkpoint, so
            a Step that keeps a checkpoint passes a function that repeats it.
    """
    send = heartbeat if heartbeat is not None else context.heartbeat

    async def beat() -> None:
        try:
            while True:
                await asyncio.sleep(interval.total_seconds())
                await send()
        except Exception:
            # The invocation closed; the Step's own result or error reports what happened.
            return

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        # Not awaited: awaiting here could swallow a cancellation of the Step itself. A cancelled task
        # finishes on the loop's next pass.
        task.cancel()


def iter_final(records: Iterable[AgentToolCall]) -> list[AgentToolCall]:
    """Return the final records among ``records``, in deferral order."""
    return sorted((record for record in records if record.is_final), key=lambda r: r.deferral_order)
