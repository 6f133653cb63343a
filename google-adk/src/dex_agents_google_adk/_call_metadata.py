"""What one ADK model call reports: its usage, its tracing metadata, and whether its failure is final.

Everything here reads ADK's own objects: the `LlmRequest` ADK sent (its `GenerateContentConfig`), the
complete `LlmResponse` (or the `Event` ADK stored for it), and the model object that answered.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import cast

from dex_agents import (
    AgentUsage,
    ModelCallMetadata,
    ModelRequestParameters,
    ModelToolDescription,
    server_endpoint,
)
from google.adk.models import BaseLlm
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

__all__ = [
    "PROVIDER_NAME_ATTRIBUTE",
    "ModelCallTiming",
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


@dataclass(frozen=True)
class ModelCallTiming:
    """Whether ADK asked the model to stream, and when its first response arrived.

    Attributes:
        is_streaming: Whether ADK called the model with ``stream=True`` (`StreamingMode.SSE`).
        time_to_first_chunk_seconds: Seconds from the request to the first (partial or complete)
            response, for a streaming call.
    """

    is_streaming: bool = False
    time_to_first_chunk_seconds: float | None = None


def model_call_metadata(
    request: LlmRequest | None,
    response: LlmResponse | None,
    model: BaseLlm | None,
    timing: ModelCallTiming | None = None,
) -> ModelCallMetadata:
    """Return the tracing metadata of one model call from ADK's request and response.

    ADK's `LlmResponse` keeps the model version and the finish reason, but not the ``response_id`` of a
    ``generateContent`` answer; the response ID is the interaction ID that the Interactions API (and the
    scripted model) report, else none. The request's `GenerateContentConfig` gives the sampling
    parameters, the system instruction and the function declarations; the model object its endpoint.

    Args:
        request: The `LlmRequest` ADK sent, after every callback that changed it.
        response: The complete response (or the failed one), `None` when none arrived.
        model: The model object ADK called, for its provider and endpoint.
        timing: Whether the call streamed, and its first response's time; `None` for a call that did not
            stream.

    Returns:
        The metadata.
    """
    finish_reason = None if response is None else response.finish_reason
    timing = timing or ModelCallTiming()
    config = None if request is None else request.config
    address, port = (None, None) if model is None else _endpoint(model)
    # google-genai types part of the instruction's union loosely; it is read as a plain object.
    instruction = cast(object, None if config is None else config.system_instruction)  # pyright: ignore[reportUnknownMemberType]
    return ModelCallMetadata(
        request_model=(None if request is None else request.model) or None,
        response_model=None if response is None else response.model_version,
        provider_name=None if model is None else provider_name(model),
        response_id=None if response is None else response.interaction_id,
        finish_reasons=() if finish_reason is None else (code_text(finish_reason).lower(),),
        request_parameters=ModelRequestParameters() if config is None else _request_parameters(config),
        is_streaming=timing.is_streaming,
        server_address=address,
        server_port=port,
        time_to_first_chunk_seconds=timing.time_to_first_chunk_seconds if timing.is_streaming else None,
        system_instructions=_instruction_text(instruction),
        tool_definitions=() if config is None else _tool_definitions(config.tools or ()),
    )


def _request_parameters(config: types.GenerateContentConfig) -> ModelRequestParameters:
    return ModelRequestParameters(
        max_tokens=config.max_output_tokens,
        temperature=config.temperature,
        top_p=config.top_p,
        stop_sequences=config.stop_sequences or (),
        frequency_penalty=config.frequency_penalty,
        presence_penalty=config.presence_penalty,
    )


def _endpoint(model: BaseLlm) -> tuple[str | None, int | None]:
    """The endpoint a model object names: Gemini's ``base_url``, LiteLLM's ``api_base``; else unknown.

    Without one the client uses its provider's default endpoint, which ADK does not expose.
    """
    url: object = getattr(model, "base_url", None) if isinstance(model, Gemini) else None
    if url is None:
        # LiteLlm keeps the keyword arguments of every completion (api_base included) in a private attribute.
        arguments: object = getattr(model, "_additional_args", None)
        if isinstance(arguments, Mapping):
            named = cast(Mapping[str, object], arguments)
            url = named.get("api_base") or named.get("base_url")
    return server_endpoint(url) if isinstance(url, str) else (None, None)


def _instruction_text(instruction: object) -> str | None:
    """The text of a `system_instruction`, which may be a string, a part, a content, or a list of them."""
    if instruction is None:
        return None
    items = cast(list[object], instruction) if isinstance(instruction, list) else [instruction]
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, types.Part):
            texts.append(item.text or "")
        elif isinstance(item, types.Content):
            texts.extend(part.text or "" for part in item.parts or ())
    return "\n\n".join(text for text in texts if text) or None


def _tool_definitions(tools: Sequence[types.ToolUnion]) -> tuple[ModelToolDescription, ...]:
    """The function declarations the request offers; Google's built-in tools (search, ...) are left out."""
    described: list[ModelToolDescription] = []
    for tool in tools:
        if not isinstance(tool, types.Tool):
            continue  # a Python callable, which ADK turns into declarations before the request
        for declaration in tool.function_declarations or ():
            if not declaration.name:
                continue
            schema: object = declaration.parameters_json_schema
            if schema is None and declaration.parameters is not None:
                schema = declaration.parameters.model_dump(mode="json", exclude_none=True)
            described.append(
                ModelToolDescription(
                    name=declaration.name,
                    description=declaration.description or None,
                    parameters=None
                    if schema is None
                    else json.dumps(schema, ensure_ascii=False, separators=(",", ":"), default=str),
                )
            )
    return tuple(described)


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
