"""Context compaction for `GoogleAdkRunner`: the token estimate, the cut, the summary call and its place.

ADK has an events compaction of its own (`App.events_compaction_config`), but it summarizes with a model
call inside the invocation, outside the one model call a Step may make, and keeps its summary as an ADK
event the session does not store; the runner turns it off and implements the session's
`ContextCompactionRunner` instead. The estimate counts the text a model reads (a token per
`CHARACTERS_PER_TOKEN` characters): the summary, the stored messages after it, the turn's events in the run
state, and the root agent's instruction. A cut falls only after a whole ADK event with no tool call left
without its result, before the turn's own user message. The summary call goes to the root agent's own
model (the first `LlmAgent` of the tree) with the core's prompt (`dex_agents.build_summary_prompt`) and
instructions, and once the session has a summary, each model Step's session starts with it as a user
event (`context_summary_text`), ADK's own message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence

from dex_agents import DEFAULT_SUMMARY_INSTRUCTIONS, build_summary_prompt
from dex_agents.values import AgentMessage, ContextSummary, MessageRole
from google.adk.agents import BaseAgent, LlmAgent
from google.adk.events import Event
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from dex_agents_google_adk._app import iter_agents
from dex_agents_google_adk._messages import decode_event, text_of

__all__ = [
    "CHARACTERS_PER_TOKEN",
    "estimate_event_tokens",
    "estimate_text_tokens",
    "select_cutoff",
    "summarize",
    "summary_model",
    "transcript_lines",
]

CHARACTERS_PER_TOKEN = 4
"""The estimate's ratio: about right for English prose on current tokenizers, low for code."""


def estimate_text_tokens(texts: Iterable[str]) -> int:
    """Return the tokens of ``texts``: their characters divided by `CHARACTERS_PER_TOKEN`, rounded up."""
    return -(-sum(len(text) for text in texts) // CHARACTERS_PER_TOKEN)


def estimate_event_tokens(events: Iterable[Event]) -> int:
    """Return the estimated tokens of the text, calls and results of ADK events."""
    return estimate_text_tokens(text for event in events for text in _event_texts(event))


def _event_texts(event: Event) -> Iterator[str]:
    for part in event.content.parts or () if event.content else ():
        if part.text:
            yield part.text
        if part.function_call is not None:
            yield part.function_call.name or ""
            yield json.dumps(part.function_call.args or {}, ensure_ascii=False)
        if part.function_response is not None:
            yield part.function_response.name or ""
            yield json.dumps(part.function_response.response or {}, ensure_ascii=False, default=str)


def _message_tokens(message: AgentMessage) -> int:
    return estimate_event_tokens([decode_event(message.framework_item)])


def select_cutoff(
    messages: Sequence[AgentMessage], turn_message: AgentMessage, *, unstored_tokens: int, budget: int
) -> int | None:
    """Return the sequence of the last message to summarize, or `None` when no cut is allowed.

    A cut may follow a message when every tool call up to it has its result up to it, the next message
    is not a piece of the same ADK event, and the turn's own user message comes after it. Of the allowed
    cuts it takes the earliest whose newer messages, with the turn's unstored events, fit ``budget``, so
    as much as fits stays verbatim; when none fits, the latest.
    """
    end = next((index for index, message in enumerate(messages) if message is turn_message), len(messages))
    kept_after = [0] * (len(messages) + 1)
    for index in range(len(messages) - 1, -1, -1):
        kept_after[index] = kept_after[index + 1] + _message_tokens(messages[index])
    event_ids = [decode_event(message.framework_item).id for message in messages]
    open_calls: set[str] = set()
    cuts: list[int] = []
    for index in range(end):
        message = messages[index]
        if message.tool_call_id and message.role is MessageRole.ASSISTANT:
            open_calls.add(message.tool_call_id)
        elif message.tool_call_id and message.role is MessageRole.TOOL:
            open_calls.discard(message.tool_call_id)
        same_event = (
            index + 1 < len(messages) and event_ids[index] and event_ids[index] == event_ids[index + 1]
        )
        if not open_calls and not same_event:
            cuts.append(index)
    for index in cuts:
        if kept_after[index + 1] + unstored_tokens <= budget:
            return messages[index].sequence
    return messages[cuts[-1]].sequence if cuts else None


def transcript_lines(messages: Sequence[AgentMessage]) -> list[str]:
    """Return the messages as the summary call's transcript, a line per message, naming each agent."""
    lines: list[str] = []
    for message in messages:
        if message.role is MessageRole.USER:
            lines.append(f"user: {message.text or ''}")
            continue
        author = decode_event(message.framework_item).author
        if message.role is MessageRole.TOOL:
            lines.append(f"tool {message.tool_name} ({author}) returned: {message.tool_output or ''}")
        elif message.tool_call_id:
            lines.append(f"{author} called {message.tool_name} {message.tool_arguments or '{}'}")
        elif message.text:
            lines.append(f"{author}: {message.text}")
    return lines


def summary_model(root: BaseAgent) -> BaseLlm:
    """The model of the summary call: the root agent's own, or the first `LlmAgent`'s of the tree."""
    for agent in iter_agents(root):
        if isinstance(agent, LlmAgent):
            return agent.canonical_model
    raise TypeError(f"the agent tree of {root.name!r} has no LlmAgent whose model could summarize")


async def summarize(
    model: BaseLlm,
    prompt_messages: Sequence[AgentMessage],
    summary: ContextSummary | None,
    input_token_budget: int,
) -> tuple[LlmResponse, LlmRequest]:
    """Make the one summary request and return ADK's complete response and the request.

    The oldest messages are left out, and the prompt says how many, while the request is over
    ``input_token_budget`` (0 or less: no limit).
    """
    kept = list(prompt_messages)
    left_out = 0
    prompt = build_summary_prompt(summary, transcript_lines(kept))
    while kept and input_token_budget > 0:
        size = estimate_text_tokens([prompt, DEFAULT_SUMMARY_INSTRUCTIONS])
        if size <= input_token_budget:
            break
        kept.pop(0)
        left_out += 1
        prompt = build_summary_prompt(summary, transcript_lines(kept), left_out=left_out)
    request = LlmRequest(
        model=model.model,
        contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
        config=types.GenerateContentConfig(system_instruction=DEFAULT_SUMMARY_INSTRUCTIONS),
    )
    final: LlmResponse | None = None
    async for response in model.generate_content_async(request, stream=False):
        if not response.partial:
            final = response
    if final is None:
        raise RuntimeError("the summary call returned no complete response")
    if final.error_code is not None:
        raise RuntimeError(f"the summary call failed: {final.error_code}: {final.error_message or ''}")
    if not text_of(final.content).strip():
        raise RuntimeError("the summary call returned no text")
    return final, request
