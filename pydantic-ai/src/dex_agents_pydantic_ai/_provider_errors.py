"""What a model call's provider said: whether its answer finished, and which of its errors end the turn.

A model Step may take a provider's answer as final only when the provider said it finished. Pydantic AI
builds a `ModelResponse` from whatever a stream delivered before it ended, so a stream that closes cleanly
halfway through an answer (no ``finish_reason``, no ``[DONE]``; no ``response.completed``; no
``message_delta`` with a ``stop_reason``) still yields a response that looks whole. Its
`ModelResponse.finish_reason` is then `None`, except from `OpenAIChatModel`, which fills in ``'stop'``
for OpenAI-compatible servers that never send one; the provider's own value is kept apart in
``provider_details['finish_reason']``, which the OpenAI, Anthropic, Google, Groq, Mistral, Cohere, Bedrock
and Hugging Face models all set. A stream that breaks off with a transport error raises on its own
(`ModelConnectionError`), and the attempt fails as any other.

Provider errors: a context-length refusal becomes `ContextWindowExceeded` (the session compacts or ends
the turn), a refusal a retry would only repeat (a 400, 401, 403, 404 or 422) ends the turn with its
``turn_error``, and anything else fails the attempt, which `RunModel` retries.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from dex_agents import (
    ContextWindowExceeded,
    UnfinishedModelResponse,
    is_context_window_refusal,
    provider_refusal,
)
from pydantic_ai.exceptions import ModelContextWindowExceededError
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model
from pydantic_ai.models.fallback import FallbackModel
from pydantic_ai.models.wrapper import WrapperModel

__all__ = ["check_finished", "provider_turn_error"]

_CHAT_MODULE = "pydantic_ai.models.openai"


def check_finished(response: ModelResponse, model: Model | None) -> None:
    """Raise `UnfinishedModelResponse` unless the provider said ``response`` finished.

    A response without a `provider_url` came from a local model (`FunctionModel`, `TestModel`), which has no
    provider to say anything, so it counts as finished.

    Args:
        response: The response of one model request, after its stream ended.
        model: The model that made the request (possibly wrapped); `None` when unknown.

    Raises:
        UnfinishedModelResponse: If the stream ended before the provider said the answer was complete.
    """
    reason = _unfinished_reason(response, model)
    if reason is not None:
        raise UnfinishedModelResponse(
            f"the model's answer from {response.provider_name or 'the provider'} ({response.model_name}) "
            f"{reason}, so it may be cut short; the model call is made again"
        )


def _unfinished_reason(response: ModelResponse, model: Model | None) -> str | None:
    if response.provider_url is None:
        return None
    if response.state in ("incomplete", "interrupted"):
        return "ended before the provider's last event"
    raw_reason = (response.provider_details or {}).get("finish_reason")
    if raw_reason:
        return None
    if response.finish_reason is None:
        return "ended without a finish reason"
    # `OpenAIChatModel` fills in 'stop' for a stream that ended without a finish reason and keeps no raw
    # value; only its refusal (a content filter) is a finish it reports without one.
    if response.finish_reason != "content_filter" and _uses_chat_completions(model):
        return "ended without a finish reason"
    return None


def _uses_chat_completions(model: Model | None) -> bool:
    # An `OpenAIChatModel` exists only once its module is imported, so the `openai` extra stays optional.
    chat_module = sys.modules.get(_CHAT_MODULE)
    if chat_module is None or model is None:
        return False
    chat_model: type[Model] = chat_module.OpenAIChatModel
    return any(isinstance(leaf, chat_model) for leaf in _leaf_models(model))


def _leaf_models(model: Model) -> Iterator[Model]:
    if isinstance(model, WrapperModel):
        yield from _leaf_models(model.wrapped)
    elif isinstance(model, FallbackModel):
        for fallback in model.models:
            yield from _leaf_models(fallback)
    else:
        yield model


def provider_turn_error(error: Exception) -> str | None:
    """Return the ``turn_error`` for a provider refusal that every attempt would meet, or `None`.

    Args:
        error: What the model request raised.

    Returns:
        The turn's error text for a refusal a retry would only repeat; `None` when the attempt should fail
        (re-raise ``error``), so `RunModel` retries it.

    Raises:
        ContextWindowExceeded: If the provider refused the input as longer than the model's context window.
    """
    if isinstance(error, ModelContextWindowExceededError) or is_context_window_refusal(error):
        raise ContextWindowExceeded(str(error)) from error
    return provider_refusal(error)
