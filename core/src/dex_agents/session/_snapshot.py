"""The reads a UI makes: `get_agent_snapshot` and `list_agent_messages`, each one stored value at most.

An RPC's output is stored like any value, so both build theirs within `MAX_RPC_OUTPUT_BYTES`, whatever the
session holds. Their messages carry no ``framework_item`` unless a page asks for it: that is the runner's
copy of the same message. Both load the window and only the message chunks the caller named; what they
needed and were not given, they name in ``missing_chunks``, and `AgentSessionClient` calls again with those.

The snapshot fills its budget in order of what a UI cannot draw without: the session's state, interrupts
and the active turn's records first (their long texts cut when they alone would take half the budget),
then the waiting user messages (at most a quarter of it), then the newest messages with what is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from dex import Channel, Context

from dex_agents.limits import MAX_RPC_OUTPUT_BYTES, bounded_text
from dex_agents.persistence import AGENT_TOOL_CALLS, QUEUED_USER_MESSAGES, STEERED_USER_MESSAGES
from dex_agents.session._message_reads import read_page
from dex_agents.session._plan import read_plan
from dex_agents.session._settings import read_session_settings
from dex_agents.session._state import (
    json_size,
    read_context_summary,
    read_interrupts,
    read_state,
    read_usage,
)
from dex_agents.values import (
    AgentInterrupt,
    AgentMessage,
    AgentMessagesPage,
    AgentSnapshot,
    AgentToolCall,
    AgentUserMessage,
    ListAgentMessagesRequest,
    PendingUserMessage,
)

__all__ = [
    "PAGE_LIMIT_MAX",
    "SNAPSHOT_MESSAGE_LIMIT",
    "build_snapshot",
    "list_messages",
    "message_view",
]

#: The most messages a snapshot returns: the newest ones.
SNAPSHOT_MESSAGE_LIMIT = 200

#: The most messages one `list_agent_messages` page returns.
PAGE_LIMIT_MAX = 200

#: How long a record's or an interrupt's texts may stay in a snapshot whose records would take more than
#: half its budget, tried in this order until they fit.
_PREVIEW_BYTES = (4096, 512, 64)


def message_view(message: AgentMessage, *, include_framework_item: bool = False) -> AgentMessage:
    """Return a stored message as the snapshot and pages hold it: without ``framework_item`` by default."""
    if include_framework_item or not message.framework_item:
        return message
    return replace(message, framework_item="")


def _view_size(message: AgentMessage) -> int:
    # A list's items are separated by a comma.
    return json_size(message_view(message)) + 1


def _active_records(context: Context, turn_id: str | None) -> list[AgentToolCall]:
    if turn_id is None:
        return []
    records = (AGENT_TOOL_CALLS.get(context, key) for key in AGENT_TOOL_CALLS.get_all_instance_keys(context))
    return sorted((record for record in records if record.turn_id == turn_id), key=lambda r: r.deferral_order)


def _cut_optional(text: str | None, limit: int) -> str | None:
    return None if text is None else bounded_text(text, limit)


def _record_preview(record: AgentToolCall, limit: int) -> AgentToolCall:
    return replace(
        record,
        arguments=bounded_text(record.arguments, limit),
        output=_cut_optional(record.output, limit),
        error=_cut_optional(record.error, limit),
        rejection_message=_cut_optional(record.rejection_message, limit),
        input_continuation=_cut_optional(record.input_continuation, limit),
        input_question=_cut_optional(record.input_question, limit),
    )


def _interrupt_preview(interrupt: AgentInterrupt, limit: int) -> AgentInterrupt:
    return replace(
        interrupt,
        arguments=bounded_text(interrupt.arguments, limit),
        question=_cut_optional(interrupt.question, limit),
    )


def _pending(context: Context, channel: Channel[AgentUserMessage]) -> list[PendingUserMessage]:
    return [
        PendingUserMessage(message_id=message.message_id, message=message.value)
        for message in channel.pending_messages(context)
    ]


def _fitting(items: Iterable[PendingUserMessage], budget: int) -> tuple[tuple[PendingUserMessage, ...], int]:
    """The leading items whose JSON fits ``budget``, and the bytes they take."""
    kept: list[PendingUserMessage] = []
    used = 0
    for item in items:
        size = json_size(item) + 1
        if used + size > budget:
            break
        kept.append(item)
        used += size
    return tuple(kept), used


def build_snapshot(context: Context) -> AgentSnapshot:
    """Return the session's snapshot, at most `MAX_RPC_OUTPUT_BYTES` of JSON.

    Needs the window, the `AgentToolCalls` map and both waiting-message Channels loaded, and the chunks it
    returns messages from (it names the ones it lacked in ``missing_chunks``).
    """
    state = read_state(context)
    queued = _pending(context, QUEUED_USER_MESSAGES)
    steered = _pending(context, STEERED_USER_MESSAGES)
    records = _active_records(context, None if state is None else state.active_turn_id)
    interrupts = read_interrupts(context)
    snapshot = AgentSnapshot(
        state=state,
        messages=(),
        pending_interrupts=tuple(interrupts),
        tool_calls=tuple(records),
        usage=read_usage(context),
        queued_message_count=len(queued),
        plan=read_plan(context),
        context_summary=read_context_summary(context),
        session_settings=read_session_settings(context),
        steered_message_count=len(steered),
    )
    used = json_size(snapshot)
    for limit in _PREVIEW_BYTES:
        if used <= MAX_RPC_OUTPUT_BYTES // 2:
            break
        snapshot = replace(
            snapshot,
            tool_calls=tuple(_record_preview(record, limit) for record in records),
            pending_interrupts=tuple(_interrupt_preview(interrupt, limit) for interrupt in interrupts),
        )
        used = json_size(snapshot)
    kept_steered, steered_bytes = _fitting(steered, MAX_RPC_OUTPUT_BYTES // 4)
    kept_queued, queued_bytes = _fitting(queued, MAX_RPC_OUTPUT_BYTES // 4 - steered_bytes)
    used += steered_bytes + queued_bytes
    if state is None:
        return replace(snapshot, queued_messages=kept_queued, steered_messages=kept_steered)
    page = read_page(
        context,
        state.next_message_sequence,
        limit=SNAPSHOT_MESSAGE_LIMIT,
        byte_budget=MAX_RPC_OUTPUT_BYTES - used,
        size_of=_view_size,
        at_least_one=False,
    )
    next_before = page.next_before_sequence
    if not page.messages and state.next_message_sequence > page.first_sequence:
        # Not even the newest message fitted: the UI reads it with list_agent_messages.
        next_before = state.next_message_sequence
    return replace(
        snapshot,
        messages=tuple(message_view(message) for message in page.messages),
        queued_messages=kept_queued,
        steered_messages=kept_steered,
        next_before_sequence=next_before,
        missing_chunks=page.missing_chunks,
    )


def list_messages(context: Context, request: ListAgentMessagesRequest) -> AgentMessagesPage:
    """Return one page of `list_agent_messages`, at most `MAX_RPC_OUTPUT_BYTES` of JSON.

    Needs the window loaded, and the chunks it returns messages from (it names the ones it lacked in
    ``missing_chunks``).
    """
    state = read_state(context)
    if state is None:
        return AgentMessagesPage()
    include = request.include_framework_items is True

    def size_of(message: AgentMessage) -> int:
        return json_size(message_view(message, include_framework_item=include)) + 1

    page = read_page(
        context,
        state.next_message_sequence,
        limit=min(max(request.limit, 1), PAGE_LIMIT_MAX),
        # Room for the page's other fields.
        byte_budget=MAX_RPC_OUTPUT_BYTES - 1024,
        size_of=size_of,
        before_sequence=request.before_sequence,
    )
    return AgentMessagesPage(
        messages=tuple(message_view(message, include_framework_item=include) for message in page.messages),
        next_before_sequence=page.next_before_sequence,
        deleted_before_sequence=page.first_sequence if page.first_sequence > 1 else None,
        missing_chunks=page.missing_chunks,
    )
