"""`ModelCallMetadata` of a model Step, from LangChain's own records of the call.

The request side comes from what the agent's chat model reported when its call started: the LangSmith
parameters every LangChain chat model reports (``ls_model_name``, ``ls_provider``, ``ls_temperature``,
``ls_max_tokens``, ``ls_stop``), its invocation parameters (``top_p``, the penalties, the bound tools), its
serialized constructor arguments (the endpoint: ``base_url``, ``openai_api_base``, ...) and the input
messages (the system instructions). Whether the call streamed and when its first chunk came are what the
callbacks saw. The response side comes from the answer's ``response_metadata`` (``model_name``,
``model_provider``, ``id``, ``finish_reason`` or Anthropic's ``stop_reason``), its ID and its usage.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from dex_agents import (
    AgentUsage,
    ModelCallMetadata,
    ModelRequestParameters,
    ModelToolDescription,
    server_endpoint,
)
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.utils.function_calling import convert_to_openai_tool

__all__ = ["ModelCallStart", "model_call_metadata", "token_usage"]

# LangChain's provider names (``ls_provider``, ``model_provider``) as the GenAI conventions spell them.
# A name missing here is passed on as LangChain spells it.
_GENAI_PROVIDER_NAMES = {
    "openai": "openai",
    "azure": "azure.ai.openai",
    "azure_openai": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "anthropic": "anthropic",
    "google_genai": "gcp.gemini",
    "google_vertexai": "gcp.vertex_ai",
    "google_anthropic_vertex": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "bedrock_converse": "aws.bedrock",
    "amazon_bedrock": "aws.bedrock",
    "mistralai": "mistral_ai",
    "groq": "groq",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "perplexity": "perplexity",
    "ibm": "ibm.watsonx.ai",
    "watsonx": "ibm.watsonx.ai",
}

# IDs LangChain gives a message when the provider gave none; they name no provider response.
_LANGCHAIN_ID_PREFIXES = ("lc_", "run-")

# The constructor arguments by which LangChain's chat models name an endpoint other than their provider's
# default (ChatOpenAI's `base_url` is stored as `openai_api_base`, ChatAnthropic's as `anthropic_api_url`).
# A model serializes only arguments that differ from its defaults, so a default endpoint stays unknown.
_ENDPOINT_ARGUMENTS = (
    "openai_api_base",
    "anthropic_api_url",
    "azure_endpoint",
    "base_url",
    "api_base",
    "endpoint",
)
# How a bound function tool is typed: OpenAI's `function`, Anthropic's `custom` or none at all.
_FUNCTION_TYPES = (None, "function", "custom")
_MAX_TOKENS_PARAMETERS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "max_tokens_to_sample")


@dataclass
class ModelCallStart:
    """What the agent's model call reported when it started, and what its stream showed.

    Attributes:
        metadata: The call's LangSmith parameters (``ls_model_name``, ``ls_provider``, ...).
        invocation_parameters: The chat model's invocation parameters (its settings, the bound tools).
        constructor_arguments: The serialized constructor arguments of a serializable chat model.
        messages: The messages the model received.
        started_at: `time.monotonic()` when the call started.
        first_chunk_at: `time.monotonic()` when its first streamed chunk came, `None` if it did not stream.
    """

    metadata: Mapping[str, Any] = field(default_factory=dict[str, Any])
    invocation_parameters: Mapping[str, Any] = field(default_factory=dict[str, Any])
    constructor_arguments: Mapping[str, Any] = field(default_factory=dict[str, Any])
    messages: Sequence[BaseMessage] = ()
    started_at: float = 0.0
    first_chunk_at: float | None = None


def model_call_metadata(start: ModelCallStart | None, response: AIMessage | None) -> ModelCallMetadata | None:
    """Return what LangChain recorded about the agent's model call, or `None` when there was no call.

    Args:
        start: What the call's start reported, and when its first chunk came.
        response: The answer, when the call returned one.

    Returns:
        The metadata, every field that LangChain did not record left unset.
    """
    if start is None and response is None:
        return None
    start = start or ModelCallStart()
    request = start.metadata
    answered: Mapping[str, Any] = {} if response is None else response.response_metadata
    provider = _text(answered.get("model_provider")) or _text(request.get("ls_provider"))
    reason = _text(answered.get("finish_reason")) or _text(answered.get("stop_reason"))
    address, port = _endpoint(start.constructor_arguments)
    streamed = start.first_chunk_at is not None
    return ModelCallMetadata(
        request_model=_text(request.get("ls_model_name")),
        response_model=_text(answered.get("model_name")) or _text(answered.get("model")),
        provider_name=None if provider is None else _GENAI_PROVIDER_NAMES.get(provider, provider),
        response_id=_text(answered.get("id")) or _provider_message_id(response),
        finish_reasons=() if reason is None else (reason,),
        request_parameters=_request_parameters(request, start.invocation_parameters),
        is_streaming=streamed,
        server_address=address,
        server_port=port,
        time_to_first_chunk_seconds=(
            None if start.first_chunk_at is None else max(0.0, start.first_chunk_at - start.started_at)
        ),
        cache_creation_input_tokens=_cache_creation(response),
        system_instructions=_system_instructions(start.messages),
        tool_definitions=_tool_definitions(start.invocation_parameters.get("tools")),
    )


def _request_parameters(metadata: Mapping[str, Any], invocation: Mapping[str, Any]) -> ModelRequestParameters:
    """The LangSmith parameters first (each chat model maps its own fields to them), then the invocation's."""
    max_tokens = _integer(metadata.get("ls_max_tokens"))
    for name in _MAX_TOKENS_PARAMETERS:
        max_tokens = max_tokens if max_tokens is not None else _integer(invocation.get(name))
    temperature = _number(metadata.get("ls_temperature"))
    stop = (
        _texts(metadata.get("ls_stop"))
        or _texts(invocation.get("stop"))
        or _texts(invocation.get("stop_sequences"))
    )
    return ModelRequestParameters(
        max_tokens=max_tokens,
        temperature=temperature if temperature is not None else _number(invocation.get("temperature")),
        top_p=_number(invocation.get("top_p")),
        stop_sequences=stop,
        frequency_penalty=_number(invocation.get("frequency_penalty")),
        presence_penalty=_number(invocation.get("presence_penalty")),
    )


def _endpoint(arguments: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The host and port of the endpoint a model's constructor named; a default endpoint stays unknown."""
    url = next((arguments[name] for name in _ENDPOINT_ARGUMENTS if arguments.get(name)), None)
    # A secret-masked or structured value names no endpoint.
    return server_endpoint(url) if isinstance(url, str) else (None, None)


def _system_instructions(messages: Sequence[BaseMessage]) -> str | None:
    """The text of the system messages that open the model's input."""
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, SystemMessage):
            break
        if message.text:
            texts.append(message.text)
    return "\n\n".join(texts) or None


def _tool_definitions(tools: object) -> tuple[ModelToolDescription, ...]:
    """The bound tools, read in whatever provider format `bind_tools` left them, as function tools."""
    if not isinstance(tools, Sequence) or isinstance(tools, str):
        return ()
    described: list[ModelToolDescription] = []
    for tool in cast(Sequence[object], tools):
        if isinstance(tool, Mapping) and cast(Mapping[str, Any], tool).get("type") not in _FUNCTION_TYPES:
            continue  # a provider's built-in tool (web search, ...) is not a function the session runs
        try:
            converted = cast(Mapping[str, Any], convert_to_openai_tool(cast(Any, tool)))
        except Exception:
            continue  # a provider's own tool format LangChain cannot read: left off rather than guessed
        function = converted.get("function")
        if converted.get("type") != "function" or not isinstance(function, Mapping):
            continue
        function = cast(Mapping[str, Any], function)
        name = _text(function.get("name"))
        if name is None:
            continue
        parameters = function.get("parameters")
        described.append(
            ModelToolDescription(
                name=name,
                description=_text(function.get("description")),
                parameters=None
                if parameters is None
                else json.dumps(parameters, ensure_ascii=False, separators=(",", ":"), default=str),
            )
        )
    return tuple(described)


def _cache_creation(response: AIMessage | None) -> int | None:
    usage = None if response is None else response.usage_metadata
    details = None if usage is None else usage.get("input_token_details")
    created = None if details is None else details.get("cache_creation")
    return created if isinstance(created, int) else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _texts(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, Sequence):
        return tuple(item for item in cast(Sequence[object], value) if isinstance(item, str))
    return ()


def _provider_message_id(response: AIMessage | None) -> str | None:
    if response is None or not response.id or response.id.startswith(_LANGCHAIN_ID_PREFIXES):
        return None
    return response.id


def token_usage(usage: UsageMetadata | None) -> AgentUsage:
    """The tokens of one model call, from its response's `usage_metadata` (``model_calls`` is 0)."""
    if usage is None:
        return AgentUsage()
    input_details = usage.get("input_token_details") or {}
    output_details = usage.get("output_token_details") or {}
    return AgentUsage(
        input_tokens=usage.get("input_tokens", 0),
        output_tokens=usage.get("output_tokens", 0),
        cached_input_tokens=input_details.get("cache_read", 0) or 0,
        reasoning_tokens=output_details.get("reasoning", 0) or 0,
    )
