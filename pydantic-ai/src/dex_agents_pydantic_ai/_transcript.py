"""Pydantic AI messages as plain transcript lines, one per part a model reads.

The summary call shows the model the conversation it summarizes in this form, and `ScriptedModel` logs what
each call is shown the same way, so a test reads the summary call's input in the words the model got.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    RetryFeedbackPart,
    TextContent,
    TextPart,
    ToolCallPart,
    UserPromptPart,
)

__all__ = ["render_transcript"]


def render_transcript(messages: Iterable[ModelMessage]) -> list[str]:
    """Return one line per user prompt, tool result, retry feedback, response text and tool call.

    System prompts, instructions and thinking are left out: they are not part of the conversation.

    Args:
        messages: Pydantic AI messages in conversation order.

    Returns:
        Lines such as ``user: ...``, ``assistant: ...``, ``assistant calls <tool> <arguments> [<call ID>]``
        and ``tool <tool> [<call ID>] <outcome>: <result>``.
    """
    lines: list[str] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, BaseToolReturnPart):
                    lines.append(
                        f"tool {part.tool_name} [{part.tool_call_id}] {part.outcome}: "
                        f"{part.model_response_str(wrap_if_error=False)}"
                    )
                elif isinstance(part, RetryFeedbackPart):
                    lines.append(f"retry: {part.model_response()}")
                elif isinstance(part, UserPromptPart):
                    lines.append(f"user: {_prompt_text(part)}")
        else:
            for part in message.parts:
                if isinstance(part, TextPart):
                    lines.append(f"assistant: {part.content}")
                elif isinstance(part, ToolCallPart):
                    lines.append(
                        f"assistant calls {part.tool_name} {part.args_as_json_str()} [{part.tool_call_id}]"
                    )
    return lines


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    # Files and images are named, not rendered: the transcript is text.
    return " ".join(_content_text(item) for item in part.content)


def _content_text(item: object) -> str:
    if isinstance(item, str):
        return item
    if isinstance(item, TextContent):
        return item.content
    return f"[{type(item).__name__}]"
