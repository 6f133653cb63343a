"""Reading and writing session state from a Step or RPC Context."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from dex import AsyncContext, Context

from dex_agents._codecs import encode_json_data
from dex_agents.limits import MAX_STORED_VALUE_BYTES, utf8_size
from dex_agents.persistence import (
    AGENT_STATE,
    AGENT_TOOL_CALLS,
    AGENT_USAGE,
    CONTEXT_SUMMARY,
    FRAMEWORK_RUN_STATE,
    PENDING_INTERRUPTS,
    TOOL_CALL_RESULTS,
)
from dex_agents.values import (
    AgentInterrupt,
    AgentMessage,
    AgentState,
    AgentToolCall,
    AgentUsage,
    ContextSummary,
    FrameworkMessage,
    MessageRole,
    ToolCallCompleted,
)

__all__ = [
    "HEARTBEAT_INTERVAL",
    "CheckedMessage",
    "InvalidRunnerOutput",
    "finish_tool_call",
    "format_time",
    "heartbeating",
    "iter_final",
    "json_size",
    "now",
    "parse_time",
    "read_context_summary",
    "read_interrupts",
    "read_run_state",
    "read_state",
    "read_tool_call",
    "read_turn_records",
    "read_usage",
    "stored_message",
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


def read_context_summary(context: Context) -> ContextSummary | None:
    """Return the summary of the earlier messages, or `None` before the session first compacted."""
    return cast(ContextSummary | None, CONTEXT_SUMMARY.get(context))


def read_tool_call(context: Context, tool_call_id: str) -> AgentToolCall | None:
    """Return one tool call record, or `None` when it does not exist. Needs its instance loaded."""
    return cast(AgentToolCall | None, AGENT_TOOL_CALLS.get(context, tool_call_id))


def read_turn_records(context: Context, turn_id: str | None) -> list[AgentToolCall]:
    """Return the records of one turn in deferral order. Needs the whole `AgentToolCalls` map loaded."""
    if turn_id is None:
        return []
    records = [AGENT_TOOL_CALLS.get(context, key) for key in AGENT_TOOL_CALLS.get_all_instance_keys(context)]
    return sorted((record for record in records if record.turn_id == turn_id), key=lambda r: r.deferral_order)


# Window messages are measured on every Step that stores a message; a decoded message is shared by every
# read of it (the decoded-value cache), so its size is kept beside it for as long as it lives.
_message_sizes: weakref.WeakKeyDictionary[AgentMessage, int] = weakref.WeakKeyDictionary()


def json_size(value: object) -> int:
    """Return the size of a dataclass value's JSON encoding, as the SDK writes it, in UTF-8 bytes."""
    return utf8_size(json.dumps(encode_json_data(value), separators=(",", ":"), sort_keys=True))


def stored_size(value: AgentMessage | AgentToolCall) -> int:
    """Return the stored size of a value: its JSON encoding, as the SDK writes it, in UTF-8 bytes."""
    if not isinstance(value, AgentMessage):
        return json_size(value)
    size = _message_sizes.get(value)
    if size is None:
        size = json_size(value)
        _message_sizes[value] = size
    return size


@dataclass(frozen=True)
class CheckedMessage:
    """A runner's message as it will be stored, with its stored size.

    Attributes:
        message: The stored message.
        size: Its stored size in bytes (`stored_size`).
    """

    message: AgentMessage
    size: int


def to_agent_message(message: object, sequence: int, turn_id: str, created_at: str) -> AgentMessage:
    """Check a runner's message and return it as a stored message.

    Raises:
        InvalidRunnerOutput: If the message is not a `FrameworkMessage` with a known role, string
            ``framework_item``, and a size that can be stored.
    """
    return stored_message(message, sequence, turn_id, created_at).message


def stored_message(message: object, sequence: int, turn_id: str, created_at: str) -> CheckedMessage:
    """Check a runner's message and return it as a stored message with its stored size.

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
    return CheckedMessage(stored, size)


def finish_tool_call(context: Context, record: AgentToolCall) -> None:
    """Store a final record and publish its result in the same commit, for the `ResumeTurn` that waits.

    A call that `resumes_turn` itself has no `ResumeTurn` waiting, so nothing is published: a message no
    Step consumes would wake the next round's `ResumeTurn` for nothing.
    """
    AGENT_TOOL_CALLS.set(context, record.tool_call_id, record)
    if not record.resumes_turn:
        TOOL_CALL_RESULTS.publish(context, ToolCallCompleted(record.tool_call_id))


def usage_payload(recorded: AgentUsage, session: AgentUsage) -> dict[str, object]:
    """Return the payload of a `usage_recorded` event."""
    return {"recorded": encode_json_data(recorded), "session": encode_json_data(session)}


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
