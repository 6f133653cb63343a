"""The session's tool call records in Pydantic AI's two forms of a tool result.

A turn that goes on hands Pydantic AI the records as `DeferredToolResults`, and Pydantic AI writes the
tool returns itself. A turn that ends without going on (steered, cancelled, failed) writes the returns
here, in the same shape Pydantic AI would have written, so the stored history never holds a tool call
without its result: a provider refuses such a request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from dex_agents import (
    DEFAULT_REJECTION_TOOL_RESULT,
    AgentToolCall,
    ToolCallStatus,
    describe_tool_call_outcome,
)
from pydantic_ai import DeferredToolResults, ToolDenied, ToolFailed
from pydantic_ai.messages import (
    INTERRUPTED_TOOL_RETURN_CONTENT,
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ToolCallPart,
    ToolReturnPart,
)

__all__ = ["OUTPUT_TOOL_CALL_RESULT", "close_open_tool_calls", "deferred_tool_results"]

OUTPUT_TOOL_CALL_RESULT = "output tool call, processed by Pydantic AI"
"""The value an output tool call gets on resume: Pydantic AI validates the call's own arguments and ignores
the value."""

_OUTCOMES: Mapping[ToolCallStatus, Literal["success", "failed", "denied"]] = {
    ToolCallStatus.SUCCEEDED: "success",
    ToolCallStatus.REJECTED: "denied",
    ToolCallStatus.FAILED: "failed",
    ToolCallStatus.OUTCOME_UNKNOWN: "failed",
}


def deferred_tool_results(
    calls: Sequence[ToolCallPart], output_tool_call_ids: Sequence[str], records: Mapping[str, AgentToolCall]
) -> DeferredToolResults:
    """Return every recorded result of a waiting response, in the form Pydantic AI resumes with.

    Args:
        calls: The calls of the response whose tool calls waited.
        output_tool_call_ids: Which of them call the agent's output tools; Pydantic AI processes those.
        records: The turn's final tool call records by tool call ID.

    Returns:
        A success as `calls[id] = output`; a rejection as `approvals[id] = ToolDenied(message)` (only
        there does the model see it as a denial); a failure or an unknown outcome as
        `calls[id] = ToolFailed(<the session's text>)`.

    Raises:
        KeyError: If a call that is not an output tool call has no record.
    """
    results = DeferredToolResults()
    for call in calls:
        if call.tool_call_id in output_tool_call_ids:
            results.calls[call.tool_call_id] = OUTPUT_TOOL_CALL_RESULT
            continue
        record = records[call.tool_call_id]
        if record.status is ToolCallStatus.SUCCEEDED:
            results.calls[record.tool_call_id] = record.output or ""
        elif record.status is ToolCallStatus.REJECTED:
            results.approvals[record.tool_call_id] = ToolDenied(
                record.rejection_message or DEFAULT_REJECTION_TOOL_RESULT
            )
        else:
            results.calls[record.tool_call_id] = ToolFailed(describe_tool_call_outcome(record))
    return results


def close_open_tool_calls(
    messages: Sequence[ModelMessage], records: Mapping[str, AgentToolCall]
) -> list[ModelMessage]:
    """Return ``messages`` with a tool return for every tool call that has none.

    Each response whose calls have no return later in ``messages`` is followed by a request holding one
    `ToolReturnPart` per such call: the call's final record as the model would have seen it on resume
    (`describe_tool_call_outcome`, with the outcome `success`, `denied` or `failed`), or, for a call the
    session has no record of (an output tool call that Pydantic AI never processed), Pydantic AI's own
    return for an interrupted call.

    Args:
        messages: The turn's Pydantic AI messages.
        records: The turn's final tool call records by tool call ID.

    Returns:
        The messages, closed.
    """
    answered = {
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, BaseToolReturnPart)
    }
    closed: list[ModelMessage] = []
    for message in messages:
        closed.append(message)
        if not isinstance(message, ModelResponse):
            continue
        open_calls = [call for call in message.tool_calls if call.tool_call_id not in answered]
        if open_calls:
            closed.append(
                ModelRequest(
                    parts=[_return_part(call, records.get(call.tool_call_id)) for call in open_calls]
                )
            )
    return closed


def _return_part(call: ToolCallPart, record: AgentToolCall | None) -> ToolReturnPart:
    if record is None:
        return ToolReturnPart(
            call.tool_name,
            INTERRUPTED_TOOL_RETURN_CONTENT,
            tool_call_id=call.tool_call_id,
            tool_kind=call.tool_kind,
            outcome="interrupted",
        )
    return ToolReturnPart(
        call.tool_name,
        describe_tool_call_outcome(record),
        tool_call_id=call.tool_call_id,
        tool_kind=call.tool_kind,
        outcome=_OUTCOMES[record.status],
    )
