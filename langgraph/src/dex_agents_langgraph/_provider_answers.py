"""What a provider's answer says about itself: whether it finished, and its tool calls' raw arguments.

LangChain's provider clients take an answer whose stream stopped early for a whole one: ChatOpenAI and
ChatAnthropic merge whatever chunks came and return them as the `AIMessage` when the server ends the body
cleanly without a finish reason (Chat Completions: no ``finish_reason`` before ``[DONE]``; Responses: no
``response.completed``; Messages: no ``message_delta`` with a ``stop_reason``). Such an answer is a prefix
of one, and taking it as final stores a truncated reply or runs a call whose arguments were cut short.
The provider's own marker is the only sign it finished, so `unfinished_answer` reads it from the answer's
``response_metadata``: ``finish_reason`` (Chat Completions), ``status`` (Responses) or ``stop_reason``
(Messages). A provider that reports none of them is trusted, since there is nothing to read.

LangChain parses streamed tool-call arguments leniently (`parse_partial_json` completes a cut-off object,
so ``{"order": "A-`` becomes ``{"order": "A-"}``), and a call whose text is no JSON at all lands in
`AIMessage.invalid_tool_calls`, which `create_agent` does not route to its tools. `RawToolArguments`
keeps the text the provider streamed for each call, so the runner can hand the tool Step the provider's
own text and `parse_tool_arguments` can fail the call instead of running the tool with invented
arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.tool import ToolCallChunk

__all__ = ["RawToolArguments", "unfinished_answer"]

# The Responses API's statuses of a response the provider ended itself (`incomplete`: it stopped at a
# limit, which it says, as Chat Completions says `length`).
_ENDED_RESPONSE_STATUSES = frozenset({"completed", "incomplete"})


def unfinished_answer(message: BaseMessage) -> str | None:
    """Return why ``message`` is not a finished provider answer, or `None` when it is (or cannot tell).

    Args:
        message: The agent's model answer, as the chat model returned it.

    Returns:
        A sentence for `UnfinishedModelResponse`, or `None`.
    """
    metadata: Mapping[str, Any] = message.response_metadata
    provider = metadata.get("model_provider")
    if provider == "anthropic" or "stop_reason" in metadata:
        if metadata.get("stop_reason"):
            return None
        return "the Anthropic Messages answer ended without a stop_reason (the stream stopped early)"
    if provider == "openai" or "finish_reason" in metadata:
        if metadata.get("finish_reason") or metadata.get("status") in _ENDED_RESPONSE_STATUSES:
            return None
        return (
            "the OpenAI answer ended without a finish_reason or a completed response (the stream stopped "
            "early)"
        )
    return None


class RawToolArguments:
    """The argument text of each tool call of one model answer, as the provider sent it."""

    def __init__(self) -> None:
        self._streamed: dict[int, list[str]] = {}
        self._ids: dict[int, str] = {}
        self._texts: dict[str, str] = {}

    def add_chunk(self, chunks: Sequence[ToolCallChunk]) -> None:
        """Add the tool-call pieces of one streamed chunk (each names its call by index)."""
        for chunk in chunks:
            index = chunk.get("index")
            if index is None:
                continue
            self._streamed.setdefault(index, []).append(chunk.get("args") or "")
            call_id = chunk.get("id")
            if call_id:
                self._ids.setdefault(index, call_id)

    def add_answer(self, message: BaseMessage) -> None:
        """Add the whole answer: the streamed calls get their IDs, unparsable calls their own text."""
        for index, pieces in self._streamed.items():
            call_id = self._ids.get(index)
            if call_id is not None:
                self._texts[call_id] = "".join(pieces)
        if isinstance(message, AIMessage):
            for call in message.invalid_tool_calls:
                if call.get("id") and call.get("args") is not None:
                    self._texts[call["id"] or ""] = call["args"] or ""

    def malformed(self, tool_call_id: str) -> str | None:
        """Return the call's own text when it is not a JSON object, else `None` (the parsed arguments hold).

        Args:
            tool_call_id: The provider's call ID.

        Returns:
            The raw text, for the tool Step to refuse with the parse error.
        """
        text = self._texts.get(tool_call_id)
        if text is None or not text.strip():
            # No text at all is how providers send a call without arguments.
            return None
        try:
            value: object = json.loads(text)
        except (ValueError, RecursionError):
            # Nested past Python's recursion limit is as unreadable as no JSON: the tool Step refuses it.
            return text
        return None if isinstance(value, dict) else text
