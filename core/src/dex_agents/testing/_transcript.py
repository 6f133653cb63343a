"""Checks on a stored transcript that every adapter's tests share."""

from __future__ import annotations

from collections.abc import Iterable

from dex_agents import AgentMessage, MessageRole

__all__ = ["stored_calls_without_result"]


def stored_calls_without_result(messages: Iterable[AgentMessage]) -> list[str]:
    """Return the tool call IDs of stored tool requests that have no stored tool result after them.

    A provider refuses a request whose history holds a tool call without its result, so a turn that ends
    early (failed, steered or cancelled) must store a result for every call it stored. A turn whose runner
    stores none of its items stores no call at all, which passes too.

    Args:
        messages: Stored messages in sequence order, such as ``AgentSnapshot.messages``.

    Returns:
        The IDs, in the order their requests were stored; empty when every call has its result.
    """
    waiting: dict[tuple[str, str], None] = {}
    for message in messages:
        if message.tool_call_id is None:
            continue
        # Tool call IDs may repeat across turns, so a call is its turn plus its ID.
        key = (message.turn_id, message.tool_call_id)
        if message.role is MessageRole.TOOL:
            waiting.pop(key, None)
        elif message.role is MessageRole.ASSISTANT:
            waiting[key] = None
    return [tool_call_id for _, tool_call_id in waiting]
