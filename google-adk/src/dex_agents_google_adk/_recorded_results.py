"""The session's final records, handed back to ADK as the answers the model reads.

When a turn resumes, every call of the paused invocation gets its record's result: through a confirmation
response (`recorded_confirmations`), which the gate turns into the tool's answer, or, for the calls ADK
answered itself in the model Step (a name the agent does not have, a structured answer that failed its
check), by replacing that answer in the restored events (`with_recorded_results`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import Any, cast

from dex_agents.runner import AgentTurnContext, describe_tool_call_outcome
from dex_agents.values import AgentToolCall, ToolCallStatus
from google.adk.events import Event
from google.genai import types

from dex_agents_google_adk._gate import CONFIRMATION_RESPONSE_KEY
from dex_agents_google_adk._messages import REQUEST_CONFIRMATION_FUNCTION_NAME, text_to_function_response
from dex_agents_google_adk._state import GoogleAdkRunState

__all__ = ["recorded_confirmations", "recorded_outputs", "recorded_response", "with_recorded_results"]


def recorded_response(record: AgentToolCall) -> dict[str, Any]:
    """Return the function response the model sees for a final record."""
    if record.status is ToolCallStatus.SUCCEEDED:
        return text_to_function_response(record.output or "")
    # ADK's convention for a call that did not produce a result; the text is the session's own.
    return {"error": describe_tool_call_outcome(record)}


def recorded_outputs(turn: AgentTurnContext) -> dict[str, str]:
    """Return the stored ``tool_output`` of every final call of the turn: the session's text, verbatim.

    Every adapter stores a call's outcome in one shape (`describe_tool_call_outcome`), so a UI reads a
    rejection, failure or abandoned call the same way whatever framework ran it, without ADK's
    ``{"error": ...}`` envelope that the model reads.
    """
    return {
        call_id: describe_tool_call_outcome(record)
        for call_id, record in turn.tool_calls.items()
        if record.is_final
    }


def with_recorded_results(
    turn_events: Sequence[Event], turn: AgentTurnContext, call_ids: Set[str]
) -> list[Event]:
    """Return the paused invocation's events with the answer of each recorded call in ``call_ids`` replaced.

    ADK answered these calls itself in the model Step (a tool name the agent does not have, a structured
    answer that failed its check) or with the gate's placeholder; the session's record is what the model
    must see.
    """
    events: list[Event] = []
    for event in turn_events:
        content = event.content
        if (
            not call_ids
            or content is None
            or not any(
                part.function_response is not None and part.function_response.id in call_ids
                for part in content.parts or ()
            )
        ):
            events.append(event)
            continue
        parts: list[types.Part] = []
        for part in content.parts or ():
            response = part.function_response
            if (
                response is not None
                and response.id is not None
                and response.id in call_ids
                and response.id in turn.tool_calls
            ):
                recorded = types.FunctionResponse(
                    id=response.id,
                    name=response.name,
                    response=recorded_response(turn.tool_calls[response.id]),
                )
                parts.append(types.Part(function_response=recorded))
            else:
                parts.append(part)
        events.append(event.model_copy(update={"content": types.Content(role=content.role, parts=parts)}))
    return events


def recorded_confirmations(state: GoogleAdkRunState, turn: AgentTurnContext) -> types.Content | None:
    """Return the confirmation responses that carry every recorded result back into ADK."""
    answered = {
        response.id
        for event in state.turn_events
        for response in event.get_function_responses()
        if response.id
    }
    parts: list[types.Part] = []
    for event in state.turn_events:
        for call in event.get_function_calls():
            if call.name != REQUEST_CONFIRMATION_FUNCTION_NAME or not call.id or call.id in answered:
                continue
            original = cast(Mapping[str, Any], (call.args or {}).get("originalFunctionCall") or {})
            record = turn.recorded_tool_call(str(original.get("id")))
            confirmation = {
                "confirmed": True,
                "payload": {CONFIRMATION_RESPONSE_KEY: recorded_response(record)},
            }
            parts.append(
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call.id, name=REQUEST_CONFIRMATION_FUNCTION_NAME, response=confirmation
                    )
                )
            )
    # A turn whose calls all named unknown tools has nothing to confirm; resuming the invocation by its
    # ID alone makes ADK continue with the next model call.
    return types.Content(role="user", parts=parts) if parts else None
