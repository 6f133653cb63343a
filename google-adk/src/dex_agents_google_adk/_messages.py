"""ADK session events <-> stored session messages, and tool results <-> function responses.

Every stored `AgentMessage` keeps ADK `Event` JSON in `framework_item`, so the next turn replays into a
fresh session service exactly what ADK produced. Only the conversation is stored: the model's responses,
the tool results the model saw, and the user's messages. ADK's confirmation bookkeeping of a turn (the
`adk_request_confirmation` calls, the placeholder responses that stood in for the deferred tools, and the
confirmations that carried the recorded results back) lives only in the framework run state while the
turn runs; ADK leaves it out of model requests anyway.

The stored messages follow the projection every adapter shares, although ADK keeps a response's text and
its function calls in one event, and the results of one response in another: a model response becomes one
`assistant` message per run of parts without a call (its text) and one per function call, in the
response's order, and a function response event one `tool` message per result. Each piece holds the
event with only its own parts, so the pieces of one event share its ID. Replaying joins consecutive pieces
with the same event ID into the event they came from (`events_from_stored_messages`), so ADK gets its own
event back. Histories stored by release 0.1.0 hold one message per model response and split results the
same way, so they replay unchanged.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from dex_agents.values import AgentMessage, FrameworkMessage, MessageRole
from google.adk.events import Event
from google.genai import types

__all__ = [
    "REQUEST_CONFIRMATION_FUNCTION_NAME",
    "TRANSFER_TO_AGENT",
    "build_user_event",
    "decode_event",
    "encode_event",
    "events_from_stored_messages",
    "function_response_to_text",
    "project_turn_events",
    "text_of",
    "text_to_function_response",
    "user_content_of",
]

REQUEST_CONFIRMATION_FUNCTION_NAME = "adk_request_confirmation"
"""The name of the function call ADK adds for every tool call that waits for a confirmation."""
TRANSFER_TO_AGENT = "transfer_to_agent"
"""The name of the tool ADK offers an agent with sub-agents or peers to transfer the conversation to."""
USER_AUTHOR = "user"


def encode_event(event: Event) -> str:
    """Return one ADK event as JSON text."""
    return event.model_dump_json(exclude_none=True)


def decode_event(item: str) -> Event:
    """Return the ADK event stored as JSON text by `encode_event`.

    Raises:
        pydantic.ValidationError: If the text is not an ADK event, for example because another adapter's
            runner stored it.
    """
    return Event.model_validate_json(item)


def build_user_event(text: str) -> Event:
    """Return a user message as the ADK event a `Runner` appends for ``text``."""
    return Event(
        author=USER_AUTHOR,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        invocation_id="",
    )


def user_content_of(message: AgentMessage) -> types.Content:
    """Return the content a stored user message sends to ADK as a new message."""
    event = decode_event(message.framework_item)
    if event.content is None:
        return types.Content(role="user", parts=[types.Part(text=message.text or "")])
    return types.Content(role="user", parts=list(event.content.parts or []))


def text_of(content: types.Content | None) -> str:
    """Return the text parts of a content joined, leaving out thoughts."""
    if content is None:
        return ""
    return "".join(part.text for part in content.parts or () if part.text and not part.thought)


def function_response_to_text(response: Mapping[str, Any] | None) -> str:
    """Return a tool's function response as the text a person (and the session) reads.

    ADK wraps a tool result that is not a dict as ``{"result": value}``; a string result is given back as
    it is, anything else as JSON.
    """
    if response is None:
        return ""
    if set(response) == {"result"}:
        value = response["result"]
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return json.dumps(dict(response), ensure_ascii=False)


def text_to_function_response(text: str) -> dict[str, Any]:
    """Return recorded result text as the function response ADK gives the model.

    The inverse of `function_response_to_text`: a JSON object comes back as that object, any other text
    as ``{"result": text}``.
    """
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return cast(dict[str, Any], value)
    return {"result": text}


def _is_bookkeeping_call(call: types.FunctionCall) -> bool:
    return call.name == REQUEST_CONFIRMATION_FUNCTION_NAME


def project_turn_events(
    events: Sequence[Event], recorded_outputs: Mapping[str, str] | None = None
) -> list[FrameworkMessage]:
    """Project the events of a turn onto stored messages, in order, leaving out ADK's bookkeeping.

    Args:
        events: The turn's events after its user message, as the session service holds them.
        recorded_outputs: The stored ``tool_output`` of each recorded call by its ID
            (`dex_agents.describe_tool_call_outcome`); the model still reads ADK's function response
            (an ``{"error": ...}`` envelope, a result object), but a UI reads the session's own text.
            A call without an entry (a valid structured answer) stores its function response as text.

    Returns:
        For each model response, an `assistant` message per run of parts without a call (its text) and
        one per function call; a `tool` message per tool result the model saw; and a `user` message per
        other user content.
    """
    # A deferred call is answered twice: by the placeholder that paused the turn, then by the recorded
    # result. Only the last answer reaches the model, so only it is stored.
    last_answer: dict[str, int] = {}
    for index, event in enumerate(events):
        for response in event.get_function_responses():
            if response.id:
                last_answer[response.id] = index
    calls: dict[str, types.FunctionCall] = {}
    projected: list[FrameworkMessage] = []
    # State that an event without stored content carries (an agent callback's change, say) rides on the
    # next stored message, or on the last one when none follows, so replaying the stored messages ends
    # in the same state.
    pending_state: dict[str, Any] = {}
    for index, event in enumerate(events):
        before = len(projected)
        projected.extend(_project_event(event, index, last_answer, calls, recorded_outputs or {}))
        state_delta = dict(event.actions.state_delta) if event.actions.state_delta else {}
        if len(projected) == before:
            pending_state.update(state_delta)
        elif pending_state:
            projected[before] = _with_state(projected[before], pending_state, overrides=False)
            pending_state = {}
    if pending_state and projected:
        projected[-1] = _with_state(projected[-1], pending_state, overrides=True)
    return projected


def _project_event(
    event: Event,
    index: int,
    last_answer: Mapping[str, int],
    calls: dict[str, types.FunctionCall],
    recorded_outputs: Mapping[str, str],
) -> list[FrameworkMessage]:
    content = event.content
    if content is None or not content.parts or event.partial:
        return []
    if event.author == USER_AUTHOR or content.role == "user":
        return _project_user_content(event, content, index, last_answer, calls, recorded_outputs)
    parts = [
        part
        for part in content.parts
        if part.function_call is None or not _is_bookkeeping_call(part.function_call)
    ]
    for part in parts:
        if part.function_call is not None and part.function_call.id:
            calls[part.function_call.id] = part.function_call
    return [_project_model_piece(event, content.role, piece) for piece in _model_response_pieces(parts)]


def _model_response_pieces(parts: Sequence[types.Part]) -> list[list[types.Part]]:
    """Group a response's parts: each run of parts without a function call, and each call on its own."""
    pieces: list[list[types.Part]] = []
    for part in parts:
        if part.function_call is None and pieces and pieces[-1][-1].function_call is None:
            pieces[-1].append(part)
        else:
            pieces.append([part])
    return pieces


def _project_model_piece(event: Event, role: str | None, parts: list[types.Part]) -> FrameworkMessage:
    piece = event.model_copy(update={"content": types.Content(role=role, parts=parts)})
    call = parts[0].function_call
    if call is None:
        return FrameworkMessage(
            role=MessageRole.ASSISTANT, framework_item=encode_event(piece), text=text_of(piece.content)
        )
    return FrameworkMessage(
        role=MessageRole.ASSISTANT,
        framework_item=encode_event(piece),
        tool_call_id=call.id,
        tool_name=call.name,
        tool_arguments=_arguments_text(call),
    )


def _arguments_text(call: types.FunctionCall) -> str:
    return json.dumps(call.args or {}, ensure_ascii=False, sort_keys=True)


def _with_state(message: FrameworkMessage, state: Mapping[str, Any], *, overrides: bool) -> FrameworkMessage:
    """Return ``message`` whose event also applies ``state``; ``overrides`` says whose keys win."""
    event = decode_event(message.framework_item)
    own = dict(event.actions.state_delta or {})
    merged = {**own, **state} if overrides else {**state, **own}
    event.actions = event.actions.model_copy(update={"state_delta": merged})
    return dataclasses.replace(message, framework_item=encode_event(event))


def _project_user_content(
    event: Event,
    content: types.Content,
    index: int,
    last_answer: Mapping[str, int],
    calls: Mapping[str, types.FunctionCall],
    recorded_outputs: Mapping[str, str],
) -> list[FrameworkMessage]:
    projected: list[FrameworkMessage] = []
    other_parts: list[types.Part] = []
    for part in content.parts or ():
        response = part.function_response
        if response is None:
            other_parts.append(part)
            continue
        if response.name == REQUEST_CONFIRMATION_FUNCTION_NAME or last_answer.get(response.id or "") != index:
            continue
        call = calls.get(response.id or "")
        single = event.model_copy(update={"content": types.Content(role=content.role, parts=[part])})
        projected.append(
            FrameworkMessage(
                role=MessageRole.TOOL,
                framework_item=encode_event(single),
                tool_call_id=response.id,
                tool_name=response.name,
                tool_arguments=_arguments_text(call) if call is not None else None,
                tool_output=_stored_output(event, response, recorded_outputs),
            )
        )
    if other_parts:
        rest = event.model_copy(update={"content": types.Content(role=content.role, parts=other_parts)})
        projected.append(
            FrameworkMessage(
                role=MessageRole.USER, framework_item=encode_event(rest), text=text_of(rest.content)
            )
        )
    return projected


def _stored_output(
    event: Event, response: types.FunctionResponse, recorded_outputs: Mapping[str, str]
) -> str:
    if response.id in recorded_outputs:
        return recorded_outputs[response.id or ""]
    if response.name == TRANSFER_TO_AGENT and event.actions.transfer_to_agent:
        # ADK's answer to a transfer is {"result": null}; a reader wants to know where it went.
        return f"Transferred to agent {event.actions.transfer_to_agent}."
    return function_response_to_text(response.response)


def events_from_stored_messages(messages: Iterable[AgentMessage]) -> list[Event]:
    """Return the ADK events of stored messages, in sequence order, with split events joined again.

    Consecutive messages whose events have the same ID are the pieces of one event (see the module
    docstring): their parts are joined in order, and the state changes they carry are applied in order.
    """
    events: list[Event] = []
    pieces: list[Event] = []
    for message in messages:
        event = decode_event(message.framework_item)
        if pieces and (not event.id or event.id != pieces[0].id):
            events.append(_joined(pieces))
            pieces = []
        pieces.append(event)
    if pieces:
        events.append(_joined(pieces))
    return events


def _joined(pieces: Sequence[Event]) -> Event:
    first = pieces[0]
    if len(pieces) == 1:
        return first
    parts = [part for piece in pieces for part in (piece.content.parts or () if piece.content else ())]
    role = first.content.role if first.content else None
    state: dict[str, Any] = {}
    for piece in pieces:
        state.update(piece.actions.state_delta or {})
    return first.model_copy(
        update={
            "content": types.Content(role=role, parts=parts),
            "actions": first.actions.model_copy(update={"state_delta": state}),
        }
    )
