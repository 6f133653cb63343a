"""ADK's structured answer for an agent with both an `output_schema` and tools.

A model that cannot combine a response schema with tools (Gemini outside Vertex AI, most LiteLLM models)
gets ADK's own `set_model_response` tool instead, whose arguments are the answer. When that call passes
the schema check, ADK stores its function response with the validated value in
`EventActions.set_model_response`, then adds a model event of its own whose text is that value as JSON,
and ends the invocation: the structured answer is the turn's final answer, with no further model call.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.adk.agents import LlmAgent
from google.adk.events import Event
from google.adk.tools.set_model_response_tool import SetModelResponseTool

__all__ = ["SET_MODEL_RESPONSE", "find_structured_answer", "structured_answer_tool"]

SET_MODEL_RESPONSE = SetModelResponseTool.NAME
"""The name of ADK's structured-answer tool."""


def find_structured_answer(events: Sequence[Event]) -> Event | None:
    """Return the model event ADK added for a valid structured answer among ``events``, or `None`.

    Args:
        events: The events of one invocation, in order.
    """
    answered = False
    for event in events:
        if event.actions.set_model_response is not None and event.get_function_responses():
            answered = True
        elif (
            answered
            and event.content is not None
            and event.content.role == "model"
            and not event.get_function_calls()
        ):
            return event
    return None


def structured_answer_tool(agent: LlmAgent) -> SetModelResponseTool | None:
    """Return ADK's structured-answer tool for ``agent``, or `None` when it has no `output_schema`.

    A tool Step needs it to check an answer that failed in the model Step: ADK adds the tool to model
    requests only, so the agent's own tools do not include it.
    """
    if agent.output_schema is None:
        return None
    return SetModelResponseTool(agent.output_schema)
