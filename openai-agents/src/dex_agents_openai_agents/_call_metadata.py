"""`ModelCallMetadata` for tracing, from the model a call used and the Responses API response it streamed.

The request model and the provider come from what the SDK resolves the call's model from (the run
configuration's model, else the agent's): a `Model` object's ``model`` name, or a model name as the SDK's
`MultiProvider` reads it. The response model, its ID and the finish reason come from the response in the
stream's closing `ResponseCompletedEvent`, which the SDK's OpenAI models (Responses and Chat
Completions) and the adapter's scripted model all send.
"""

from __future__ import annotations

from agents import (
    Model,
    ModelProvider,
    MultiProvider,
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    OpenAIResponsesModel,
)
from agents.models import get_default_model
from dex_agents.runner import ModelCallMetadata
from openai import AsyncAzureOpenAI
from openai.types.responses import Response

__all__ = ["OPENAI_PROVIDER_NAME", "model_call_metadata"]

OPENAI_PROVIDER_NAME = "openai"
"""``gen_ai.provider.name`` of OpenAI, as the GenAI semantic conventions spell it."""

_AZURE_OPENAI_PROVIDER_NAME = "azure.ai.openai"

# `MultiProvider` routes "openai/<model>" and a bare name to OpenAI, and "litellm/" or "any-llm/" to the
# provider named after the prefix, which gets the rest of the name.
_OPENAI_PREFIX = "openai"
_ROUTING_PREFIXES = frozenset({_OPENAI_PREFIX, "litellm", "any-llm"})

# A Responses API status that is not "completed" says why the answer stopped early.
_INCOMPLETE_REASONS = {"max_output_tokens": "length", "content_filter": "content_filter"}


def _model_name(model: str | Model | None) -> str | None:
    if model is None:
        return get_default_model()
    if isinstance(model, str):
        prefix, _, rest = model.partition("/")
        return rest if rest and prefix in _ROUTING_PREFIXES else model
    name = getattr(model, "model", None)
    return name if isinstance(name, str) else None


def _provider_name(model: str | Model | None, provider: ModelProvider) -> str | None:
    if isinstance(model, (OpenAIResponsesModel, OpenAIChatCompletionsModel)):
        client = getattr(model, "_client", None)
        return _AZURE_OPENAI_PROVIDER_NAME if isinstance(client, AsyncAzureOpenAI) else OPENAI_PROVIDER_NAME
    if isinstance(model, Model):
        # A custom model may say which provider it calls.
        named = getattr(model, "provider_name", None)
        return named if isinstance(named, str) and named else None
    if isinstance(provider, OpenAIProvider):
        return OPENAI_PROVIDER_NAME
    if isinstance(provider, MultiProvider):
        prefix = model.partition("/")[0] if model is not None and "/" in model else None
        if prefix is None or prefix == _OPENAI_PREFIX:
            return OPENAI_PROVIDER_NAME
    return None


def _finish_reasons(response: Response) -> tuple[str, ...]:
    if response.status == "incomplete":
        reason = response.incomplete_details.reason if response.incomplete_details is not None else None
        return (_INCOMPLETE_REASONS.get(str(reason), str(reason)),) if reason is not None else ()
    if response.status not in (None, "completed"):
        return (response.status,)
    calls = any(getattr(item, "type", None) == "function_call" for item in response.output)
    return ("tool_calls" if calls else "stop",)


def model_call_metadata(
    model: str | Model | None, provider: ModelProvider, response: Response | None
) -> ModelCallMetadata:
    """Return what tracing reports about one model call.

    Args:
        model: The model the call was resolved from: the run configuration's model, else the agent's
            (`None` for the SDK's default model).
        provider: The run configuration's model provider, which resolves model names.
        response: The streamed response, or `None` when the stream ended without one.

    Returns:
        The request model and provider (`None` when they cannot be told: a custom `Model` without a
        ``model`` or ``provider_name`` attribute, or a name a custom provider resolves), and the response's
        model, ID and finish reason: ``tool_calls`` or ``stop`` for a completed response, ``length`` or
        ``content_filter`` for an incomplete one.
    """
    return ModelCallMetadata(
        request_model=_model_name(model),
        response_model=response.model if response is not None and response.model else None,
        provider_name=_provider_name(model, provider),
        response_id=response.id if response is not None and response.id else None,
        finish_reasons=_finish_reasons(response) if response is not None else (),
    )
