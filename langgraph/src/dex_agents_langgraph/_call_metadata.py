"""`ModelCallMetadata` of a model Step, from LangChain's own records of the call.

The request side comes from the LangSmith parameters every LangChain chat model reports when its call
starts (``ls_model_name``, ``ls_provider``); the response side from the answer's ``response_metadata``
(``model_name``, ``model_provider``, ``id``, ``finish_reason`` or Anthropic's ``stop_reason``) and its ID.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dex_agents import AgentUsage, ModelCallMetadata
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata

__all__ = ["model_call_metadata", "token_usage"]

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


def model_call_metadata(
    request_parameters: Mapping[str, Any] | None, response: AIMessage | None
) -> ModelCallMetadata | None:
    """Return what LangChain recorded about the agent's model call, or `None` when there was no call.

    Args:
        request_parameters: The metadata the call's start reported (``ls_model_name``, ``ls_provider``).
        response: The answer, when the call returned one.

    Returns:
        The metadata, every field that LangChain did not record left `None`.
    """
    if request_parameters is None and response is None:
        return None
    request = request_parameters or {}
    answered: Mapping[str, Any] = {} if response is None else response.response_metadata
    provider = _text(answered.get("model_provider")) or _text(request.get("ls_provider"))
    reason = _text(answered.get("finish_reason")) or _text(answered.get("stop_reason"))
    return ModelCallMetadata(
        request_model=_text(request.get("ls_model_name")),
        response_model=_text(answered.get("model_name")) or _text(answered.get("model")),
        provider_name=None if provider is None else _GENAI_PROVIDER_NAMES.get(provider, provider),
        response_id=_text(answered.get("id")) or _provider_message_id(response),
        finish_reasons=() if reason is None else (reason,),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


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
