"""What one ADK model call reports: its usage, its tracing metadata, and whether its failure is final.

Everything here reads ADK's own objects: the `LlmRequest` ADK sent, the complete `LlmResponse` (or the
`Event` ADK stored for it), and the model object that answered.
"""

from __future__ import annotations

import os
from enum import Enum

from dex_agents import AgentUsage, ModelCallMetadata
from google.adk.models import BaseLlm
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_response import LlmResponse
from google.genai import types

__all__ = [
    "PROVIDER_NAME_ATTRIBUTE",
    "code_text",
    "model_call_metadata",
    "model_call_usage",
    "provider_name",
    "terminal_model_error",
]

PROVIDER_NAME_ATTRIBUTE = "gen_ai_provider_name"
"""A class attribute by which a `BaseLlm` of your own names its provider for tracing."""

_ANTHROPIC_MODULE = "google.adk.models.anthropic_llm"
# LiteLLM's provider prefixes whose GenAI conventions name differs from the prefix itself.
_LITELLM_PROVIDERS = {
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}


def _enterprise_mode() -> bool:
    # As ADK and google-genai decide whether Gemini is reached through Vertex AI.
    for name in ("GOOGLE_GENAI_USE_ENTERPRISE", "GOOGLE_GENAI_USE_VERTEXAI"):
        if name in os.environ:
            return os.environ[name].strip().lower() in ("true", "1")
    return False


def provider_name(model: BaseLlm) -> str | None:
    """Return the provider that serves ``model``, as the GenAI semantic conventions spell it.

    A model class may name its own provider with a ``gen_ai_provider_name`` class attribute. ADK's Gemini
    is ``gcp.gemini`` (``gcp.vertex_ai`` in enterprise mode), ADK's Claude (on Vertex AI) is
    ``gcp.vertex_ai`` and its Anthropic model ``anthropic``; a LiteLLM model is its ``<provider>/`` prefix.

    Args:
        model: The model object ADK called.

    Returns:
        The provider's name, or `None` when the model does not say (tracing then uses
        `AgentTracing.provider_name`).
    """
    declared: object = getattr(type(model), PROVIDER_NAME_ATTRIBUTE, None)
    if isinstance(declared, str):
        return declared
    if isinstance(model, Gemini):
        return "gcp.vertex_ai" if _enterprise_mode() else "gcp.gemini"
    # Anthropic's and LiteLLM's packages are optional dependencies of ADK, so their model classes are
    # recognised by name instead of imported.
    classes = {(cls.__module__, cls.__qualname__) for cls in type(model).__mro__}
    if (_ANTHROPIC_MODULE, "Claude") in classes:
        return "gcp.vertex_ai"
    if (_ANTHROPIC_MODULE, "AnthropicLlm") in classes:
        return "anthropic"
    if ("google.adk.models.lite_llm", "LiteLlm") in classes:
        prefix, separator, _ = model.model.partition("/")
        if separator and prefix:
            return _LITELLM_PROVIDERS.get(prefix.lower(), prefix.lower())
    return None


def model_call_metadata(
    request_model: str | None, response: LlmResponse | None, provider: str | None
) -> ModelCallMetadata:
    """Return the tracing metadata of one model call from ADK's request and response.

    ADK's `LlmResponse` keeps the model version and the finish reason, but not the ``response_id`` of a
    ``generateContent`` answer; the response ID is the interaction ID that the Interactions API (and the
    scripted model) report, else none.

    Args:
        request_model: `LlmRequest.model`, the model ADK asked for.
        response: The complete response (or the failed one), `None` when none arrived.
        provider: The provider from `provider_name`.

    Returns:
        The metadata.
    """
    finish_reason = None if response is None else response.finish_reason
    return ModelCallMetadata(
        request_model=request_model or None,
        response_model=None if response is None else response.model_version,
        provider_name=provider,
        response_id=None if response is None else response.interaction_id,
        finish_reasons=() if finish_reason is None else (code_text(finish_reason).lower(),),
    )


def model_call_usage(response: LlmResponse) -> AgentUsage:
    """Return the usage of the model call that produced ``response``."""
    metadata = response.usage_metadata
    if metadata is None:
        return AgentUsage(model_calls=1)
    return AgentUsage(
        model_calls=1,
        input_tokens=metadata.prompt_token_count or 0,
        output_tokens=(metadata.candidates_token_count or 0) + (metadata.thoughts_token_count or 0),
        cached_input_tokens=metadata.cached_content_token_count or 0,
        reasoning_tokens=metadata.thoughts_token_count or 0,
    )


# Why the provider blocked the prompt (`prompt_feedback.block_reason`, which ADK puts in `error_code` with
# no `finish_reason`): the same prompt is blocked again on every attempt. Only
# BLOCKED_REASON_UNSPECIFIED, which names no reason, is left to the retry.
_TERMINAL_BLOCK_REASONS = frozenset(
    reason.value
    for reason in (
        types.BlockedReason.SAFETY,
        types.BlockedReason.OTHER,
        types.BlockedReason.BLOCKLIST,
        types.BlockedReason.PROHIBITED_CONTENT,
        types.BlockedReason.IMAGE_SAFETY,
        types.BlockedReason.MODEL_ARMOR,
        types.BlockedReason.JAILBREAK,
    )
)
# Finish reasons ADK reports as `error_code` (a response without content, or any non-STOP finish when
# streaming) that judge the request itself, so a retry pays for the same answer again: content filters,
# recitation, an unsupported language, and the output limit of the request's own configuration.
# Left to the retry are the reasons a new sample can cure or that say nothing: MALFORMED_FUNCTION_CALL,
# UNEXPECTED_TOOL_CALL and TOO_MANY_TOOL_CALLS (the model wrote a bad call this time), OTHER,
# FINISH_REASON_UNSPECIFIED, NO_IMAGE, IMAGE_OTHER, CONTINUATION, and every code that is not a finish
# reason (ADK's MODEL_RETURNED_NO_CONTENT, other providers' own codes).
_TERMINAL_FINISH_REASONS = frozenset(
    reason.value
    for reason in (
        types.FinishReason.SAFETY,
        types.FinishReason.RECITATION,
        types.FinishReason.LANGUAGE,
        types.FinishReason.BLOCKLIST,
        types.FinishReason.PROHIBITED_CONTENT,
        types.FinishReason.SPII,
        types.FinishReason.IMAGE_SAFETY,
        types.FinishReason.IMAGE_PROHIBITED_CONTENT,
        types.FinishReason.IMAGE_RECITATION,
        types.FinishReason.MAX_TOKENS,
    )
)


def code_text(code: object) -> str:
    """Return an ADK error code or finish reason as its text."""
    return code.value if isinstance(code, Enum) else str(code)


def terminal_model_error(response: LlmResponse) -> str | None:
    """Return the turn error for a failed model call that a retry would repeat, else `None`."""
    code = code_text(response.error_code)
    message = response.error_message or ""
    if response.finish_reason is None and code in _TERMINAL_BLOCK_REASONS:
        return f"the model provider blocked the prompt ({code}){': ' + message if message else ''}"
    if response.finish_reason is not None and code in _TERMINAL_FINISH_REASONS:
        if not message and code == types.FinishReason.MAX_TOKENS.value:
            message = "the answer reached the output token limit (max_output_tokens)"
        return f"the model call ended without a usable answer ({code}){': ' + message if message else ''}"
    return None
