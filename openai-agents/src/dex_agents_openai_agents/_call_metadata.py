"""`ModelCallMetadata` for tracing, from the model a call used and the Responses API response it streamed.

The request model and the provider come from what the SDK resolves the call's model from (the run
configuration's model, else the agent's): a `Model` object's ``model`` name, or a model name as the SDK's
`MultiProvider` reads it. The response model, its ID and the finish reason come from the response in the
stream's closing `ResponseCompletedEvent`, which the SDK's OpenAI models (Responses and Chat
Completions) and the adapter's scripted model all send.

What the request carried comes from the run hooks (`CallRequest`): the agent's model settings resolved over
the run configuration's, as the SDK resolves them, the instructions the model received (after any
``call_model_input_filter``), the function tools and handoffs offered, the time from the call's start to the
stream's first event, and the prompt cache writes in the call's usage. The endpoint is the base URL of the
OpenAI client of the SDK's own OpenAI models; any other model's endpoint is left unknown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agents import (
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelSettings,
    MultiProvider,
    OpenAIChatCompletionsModel,
    OpenAIProvider,
    OpenAIResponsesModel,
    Tool,
)
from agents.models import get_default_model
from dex_agents.runner import ModelCallMetadata, ModelRequestParameters, ModelToolDescription, server_endpoint
from openai import AsyncAzureOpenAI
from openai.types.responses import Response

__all__ = ["OPENAI_PROVIDER_NAME", "CallRequest", "model_call_metadata", "tool_descriptions"]

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


@dataclass(frozen=True)
class CallRequest:
    """What the run hooks saw of one streamed model call.

    Attributes:
        settings: The model settings of the call, the agent's resolved over the run configuration's.
        tools: The function tools and handoffs the call offered the model.
        system_instructions: The instructions the model received.
        time_to_first_chunk_seconds: Seconds from the call's start to the stream's first event; `None`
            when none arrived.
        cache_creation_input_tokens: Input tokens the provider wrote to its prompt cache, when above 0.
    """

    settings: ModelSettings | None = None
    tools: Sequence[ModelToolDescription] = ()
    system_instructions: str | None = None
    time_to_first_chunk_seconds: float | None = None
    cache_creation_input_tokens: int | None = None


def _json(schema: object) -> str:
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def tool_descriptions(
    tools: Sequence[Tool], handoffs: Sequence[Handoff[Any, Any]]
) -> list[ModelToolDescription]:
    """The function tools and handoffs one model call offered, as the model reads them.

    Hosted tools (web search, file search, ...) run at the provider and are left out.

    Args:
        tools: The tools the SDK got for the call.
        handoffs: The enabled handoffs, which the model sees as function tools.
    """
    described = [
        ModelToolDescription(
            name=tool.name, description=tool.description or None, parameters=_json(tool.params_json_schema)
        )
        for tool in tools
        if isinstance(tool, FunctionTool)
    ]
    described.extend(
        ModelToolDescription(
            name=item.tool_name,
            description=item.tool_description or None,
            parameters=_json(item.input_json_schema),
        )
        for item in handoffs
    )
    return described


def _request_parameters(settings: ModelSettings | None) -> ModelRequestParameters:
    if settings is None:
        return ModelRequestParameters()
    # The SDK's settings have no stop sequences; a provider argument in `extra_args` is not read.
    return ModelRequestParameters(
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        frequency_penalty=settings.frequency_penalty,
        presence_penalty=settings.presence_penalty,
    )


def _endpoint(model: str | Model | None, provider: ModelProvider) -> tuple[str | None, int | None]:
    """The host and port of the OpenAI client the call went through, when the SDK's OpenAI model made it."""
    resolved: object = model
    if not isinstance(model, Model) and _provider_name(model, provider) == OPENAI_PROVIDER_NAME:
        try:
            # What the SDK does for the call itself; the provider reuses its client, so nothing is sent.
            resolved = provider.get_model(model)
        except Exception:
            return None, None
    if not isinstance(resolved, (OpenAIResponsesModel, OpenAIChatCompletionsModel)):
        return None, None
    return server_endpoint(getattr(getattr(resolved, "_client", None), "base_url", None))


def model_call_metadata(
    model: str | Model | None,
    provider: ModelProvider,
    response: Response | None,
    request: CallRequest | None = None,
) -> ModelCallMetadata:
    """Return what tracing reports about one model call.

    Args:
        model: The model the call was resolved from: the run configuration's model, else the agent's
            (`None` for the SDK's default model).
        provider: The run configuration's model provider, which resolves model names.
        response: The streamed response, or `None` when the stream ended without one.
        request: What the run hooks saw of the streamed call; `None` leaves the request's parameters,
            instructions and tools unset and the call not streaming.

    Returns:
        The request model and provider (`None` when they cannot be told: a custom `Model` without a
        ``model`` or ``provider_name`` attribute, or a name a custom provider resolves), and the response's
        model, ID and finish reason: ``tool_calls`` or ``stop`` for a completed response, ``length`` or
        ``content_filter`` for an incomplete one; with ``request``, what the request carried.
    """
    address, port = _endpoint(model, provider)
    return ModelCallMetadata(
        request_model=_model_name(model),
        response_model=response.model if response is not None and response.model else None,
        provider_name=_provider_name(model, provider),
        response_id=response.id if response is not None and response.id else None,
        finish_reasons=_finish_reasons(response) if response is not None else (),
        request_parameters=_request_parameters(request.settings if request is not None else None),
        is_streaming=request is not None,
        server_address=address,
        server_port=port,
        time_to_first_chunk_seconds=request.time_to_first_chunk_seconds if request is not None else None,
        cache_creation_input_tokens=request.cache_creation_input_tokens if request is not None else None,
        system_instructions=request.system_instructions if request is not None else None,
        tool_definitions=request.tools if request is not None else (),
    )
