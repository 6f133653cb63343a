"""The one projection of a tool-calling model response that every adapter stores.

A UI reads stored messages without knowing which framework wrote them, so every adapter projects a model
response the same way: the response's text, when it has any, is an ``assistant`` message without tool
fields; each tool call follows as its own ``assistant`` message carrying ``tool_call_id``, ``tool_name``
and ``tool_arguments`` (a JSON object as text) and no text; each result is a ``tool`` message carrying the
call's ID, name, arguments and ``tool_output``. Assistant messages with neither text nor a tool call
(reasoning items, for example) may sit anywhere and are ignored here.

The ``tool_output`` of a call that did not succeed (rejected, abandoned by a steer or a cancel, failed, or of
unknown outcome) is exactly `dex_agents.describe_tool_call_outcome` of its final record, whatever envelope the
framework shows its own model, so a UI shows every adapter's such calls alike.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dex_agents import AgentMessage, AgentToolCall, FrameworkMessage, MessageRole, describe_tool_call_outcome

__all__ = ["ProjectedCall", "check_message_projection"]


@dataclass(frozen=True)
class ProjectedCall:
    """A tool call as a stored projection should show it.

    Attributes:
        tool_call_id: The call's ID.
        tool_name: The tool's name.
        arguments: The call's arguments.
    """

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, object]


def _arguments(message: FrameworkMessage | AgentMessage) -> object:
    try:
        return json.loads(message.tool_arguments or "")
    except ValueError:
        return message.tool_arguments


def _describe(message: FrameworkMessage | AgentMessage) -> str:
    return (
        f"{message.role.value}(text={message.text!r:.60}, tool_call_id={message.tool_call_id!r}, "
        f"tool_name={message.tool_name!r}, tool_arguments={message.tool_arguments!r:.80}"
        + ("" if message.tool_output is None else f", tool_output={message.tool_output!r:.100}")
        + ")"
    )


def check_message_projection(
    messages: Sequence[FrameworkMessage | AgentMessage],
    *,
    response_text: str,
    calls: Sequence[ProjectedCall],
    outputs: Mapping[str, str],
    final_records: Sequence[AgentToolCall] = (),
) -> None:
    """Assert that ``messages`` project one tool-calling response and its results the shared way.

    Args:
        messages: The messages a turn stored after its user message, in order: a runner's
            `dex_agents.FrameworkMessage` items, or the session's stored `dex_agents.AgentMessage` items.
        response_text: The text of the response that called the tools; it must be on an assistant
            message without tool fields, before the calls.
        calls: The response's calls in model order.
        outputs: A text each call's tool output contains, by tool call ID; a call with a record in
            ``final_records`` needs none.
        final_records: Final records of some of the calls, such as the rejected, abandoned, failed and
            outcome-unknown ones: each call's tool output must be exactly
            `dex_agents.describe_tool_call_outcome` of its record, with no framework envelope around it.

    Raises:
        AssertionError: Naming the first message that breaks the projection.
    """
    shown = "\n".join(_describe(message) for message in messages)
    meaningful = [
        message
        for message in messages
        if not (message.role is MessageRole.ASSISTANT and not message.text and message.tool_call_id is None)
    ]
    text_index = next(
        (
            index
            for index, message in enumerate(meaningful)
            if message.role is MessageRole.ASSISTANT and response_text in (message.text or "")
        ),
        None,
    )
    assert text_index is not None, f"no assistant message carries {response_text!r}:\n{shown}"
    text_message = meaningful[text_index]
    assert (text_message.tool_call_id, text_message.tool_name, text_message.tool_arguments) == (
        None,
        None,
        None,
    ), f"the response's text must be on an assistant message without tool fields:\n{shown}"
    call_messages = [
        message
        for message in meaningful
        if message.role is MessageRole.ASSISTANT and message.tool_call_id is not None
    ]
    expected: list[tuple[str, str, Any]] = [
        (call.tool_call_id, call.tool_name, dict(call.arguments)) for call in calls
    ]
    assert [
        (message.tool_call_id, message.tool_name, _arguments(message)) for message in call_messages
    ] == expected, f"each call must be one assistant message with its ID, name and arguments:\n{shown}"
    assert all(not message.text for message in call_messages), (
        f"a tool call message carries no text; the response's text is on its own message:\n{shown}"
    )
    first_call = meaningful.index(call_messages[0]) if call_messages else len(meaningful)
    assert text_index < first_call, f"the response's text comes before its calls:\n{shown}"
    results = [message for message in meaningful if message.role is MessageRole.TOOL]
    by_id = {message.tool_call_id: message for message in results}
    records = {record.tool_call_id: record for record in final_records}
    strays = sorted(set(records) - {call.tool_call_id for call in calls})
    assert not strays, f"final_records names calls that are not among calls: {strays}"
    wrong: list[str] = []
    for call in calls:
        result = by_id.get(call.tool_call_id)
        assert result is not None, f"no tool message for {call.tool_call_id!r}:\n{shown}"
        assert (result.tool_name, _arguments(result)) == (call.tool_name, dict(call.arguments)), (
            f"the tool message of {call.tool_call_id!r} must carry the call's name and arguments:\n{shown}"
        )
        record = records.get(call.tool_call_id)
        if record is None:
            assert call.tool_call_id in outputs, f"pass {call.tool_call_id!r} in outputs or final_records"
        elif result.tool_output != describe_tool_call_outcome(record):
            wrong.append(
                f"the tool message of {call.tool_call_id!r} ({record.status.value}) must carry exactly "
                f"{describe_tool_call_outcome(record)!r}, not {result.tool_output!r}"
            )
        assert outputs.get(call.tool_call_id, "") in (result.tool_output or ""), (
            f"the tool message of {call.tool_call_id!r} must carry its output:\n{shown}"
        )
        position = meaningful.index(result)
        assert position > meaningful.index(
            next(message for message in call_messages if message.tool_call_id == call.tool_call_id)
        ), f"the result of {call.tool_call_id!r} comes after its call:\n{shown}"
    # Every such call at once: an adapter usually stores all its non-succeeded calls through one path.
    assert not wrong, "\n".join([*wrong, shown])
