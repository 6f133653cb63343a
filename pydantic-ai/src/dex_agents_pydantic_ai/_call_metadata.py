"""What one Pydantic AI model call reports, as the `ModelCallMetadata` that names the session's `chat` span.

Everything comes from Pydantic AI's own objects: the requested model's `model_name`, and the response's
`model_name`, `provider_name`, `provider_response_id` and finish reason. Pydantic AI normalizes the finish
reason (`tool_call`, `stop`, ...) and keeps the provider's own in `provider_details["finish_reason"]`; the
span gets the provider's own, as the GenAI conventions ask, else the normalized one. Pydantic AI names
providers by its own provider classes (`google`, `bedrock`, `mistral`, ...); the names whose GenAI
spelling differs are translated.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from dex_agents import ModelCallMetadata
from pydantic_ai.messages import ModelResponse
from pydantic_ai.models import Model

__all__ = ["GENAI_PROVIDER_NAMES", "genai_provider_name", "model_call_metadata"]

GENAI_PROVIDER_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "azure": "azure.ai.openai",
        "bedrock": "aws.bedrock",
        "google": "gcp.gemini",
        "google-cloud": "gcp.vertex_ai",
        # Names Pydantic AI used before its 2.0 release, still found on stored responses.
        "google-gla": "gcp.gemini",
        "google-vertex": "gcp.vertex_ai",
        "grok": "x_ai",
        "mistral": "mistral_ai",
        "xai": "x_ai",
    }
)
"""Pydantic AI provider names whose GenAI conventions spelling differs, and that spelling."""


def genai_provider_name(name: str) -> str:
    """Return a Pydantic AI provider name as the GenAI conventions spell it (``bedrock`` → ``aws.bedrock``).

    Args:
        name: A provider name as Pydantic AI reports it.

    Returns:
        The conventions' name; a name they do not list (``openai``, ``anthropic``, ``groq``, ...) as it is.
    """
    return GENAI_PROVIDER_NAMES.get(name, name)


def model_call_metadata(response: ModelResponse, model: Model | None) -> ModelCallMetadata:
    """Return what the model call that produced ``response`` reports about itself.

    Args:
        response: The model's response.
        model: The model the request went to, when the runner knows it.

    Returns:
        The metadata; a field Pydantic AI does not know stays `None` (or empty).
    """
    provider = response.provider_name or (model.system if model is not None else None)
    details = response.provider_details or {}
    raw_reason = details.get("finish_reason")
    if isinstance(raw_reason, str) and raw_reason:
        reasons: tuple[str, ...] = (raw_reason,)
    elif response.finish_reason is not None:
        reasons = (response.finish_reason,)
    else:
        reasons = ()
    return ModelCallMetadata(
        request_model=model.model_name if model is not None else None,
        response_model=response.model_name,
        provider_name=genai_provider_name(provider) if provider else None,
        response_id=response.provider_response_id,
        finish_reasons=reasons,
    )
