"""What one Pydantic AI model call reports, as the `ModelCallMetadata` that names the session's `chat` span.

Everything comes from Pydantic AI's own objects: the requested model's `model_name`, and the response's
`model_name`, `provider_name`, `provider_response_id`, `provider_url`, usage and finish reason. Pydantic AI
normalizes the finish reason (`tool_call`, `stop`, ...) and keeps the provider's own in
`provider_details["finish_reason"]`; the span gets the provider's own, as the GenAI conventions ask, else the
normalized one. Pydantic AI names providers by its own provider classes (`google`, `bedrock`, `mistral`,
...); the names whose GenAI spelling differs are translated.

What the request carried comes from the request Pydantic AI built (`ModelRequestNode.last_request_context`):
the model settings merged as Pydantic AI merges them (the model's own, the agent's, the run's), the tools it
offered, and the system prompts and instructions in its messages. The runner streams every call and times
its first chunk itself (`CallRequest`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import cast

from dex_agents import ModelCallMetadata, ModelRequestParameters, ModelToolDescription, server_endpoint
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, SystemPromptPart
from pydantic_ai.models import Model, ModelRequestContext
from pydantic_ai.tools import ToolDefinition

__all__ = [
    "GENAI_PROVIDER_NAMES",
    "CallRequest",
    "genai_provider_name",
    "model_call_metadata",
    "request_parameters",
    "system_instructions",
]

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


@dataclass(frozen=True)
class CallRequest:
    """What the runner saw of the request of one streamed model call.

    Attributes:
        settings: The model settings the request was made with, merged as Pydantic AI merges them.
        tools: The tools the request offered the model (function and output tools).
        system_instructions: The system prompts and instructions the model received.
        time_to_first_chunk_seconds: Seconds from the start of the request to the stream's first event;
            `None` when the stream produced none.
    """

    settings: Mapping[str, object] | None = None
    tools: Sequence[ToolDefinition] = ()
    system_instructions: str | None = None
    time_to_first_chunk_seconds: float | None = None

    @classmethod
    def of(
        cls, context: ModelRequestContext | None, time_to_first_chunk_seconds: float | None
    ) -> CallRequest:
        """Read the request Pydantic AI built for a model request step.

        Args:
            context: The step's request (`ModelRequestNode.last_request_context`), `None` if it has none.
            time_to_first_chunk_seconds: What the runner measured.
        """
        if context is None:
            return cls(time_to_first_chunk_seconds=time_to_first_chunk_seconds)
        parameters = context.model_request_parameters
        return cls(
            settings=context.model_settings,
            tools=(*parameters.function_tools, *parameters.output_tools),
            system_instructions=system_instructions(context.messages),
            time_to_first_chunk_seconds=time_to_first_chunk_seconds,
        )


def system_instructions(messages: Sequence[ModelMessage]) -> str | None:
    """The system prompts in ``messages`` and the latest request's instructions, as the model got them.

    Args:
        messages: The messages of one model request.

    Returns:
        The texts joined by blank lines, or `None` when there are none.
    """
    texts = [
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, SystemPromptPart) and part.content
    ]
    # Pydantic AI sends only the newest request's instructions; earlier ones were for earlier calls.
    latest = next((message for message in reversed(messages) if isinstance(message, ModelRequest)), None)
    if latest is not None and latest.instructions:
        texts.append(latest.instructions)
    return "\n\n".join(texts) or None


def _number(settings: Mapping[str, object], key: str) -> float | None:
    value = settings.get(key)
    # A bool is an int to Python, but no sampling parameter is one.
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def request_parameters(settings: Mapping[str, object] | None) -> ModelRequestParameters:
    """The GenAI request parameters in Pydantic AI model settings; a setting left out stays unset.

    Args:
        settings: The request's `ModelSettings`.
    """
    if not settings:
        return ModelRequestParameters()
    max_tokens = settings.get("max_tokens")
    stop = settings.get("stop_sequences")
    stop_sequences = cast(Sequence[object], stop) if isinstance(stop, list | tuple) else ()
    return ModelRequestParameters(
        max_tokens=max_tokens if isinstance(max_tokens, int) and not isinstance(max_tokens, bool) else None,
        temperature=_number(settings, "temperature"),
        top_p=_number(settings, "top_p"),
        stop_sequences=[str(item) for item in stop_sequences],
        frequency_penalty=_number(settings, "frequency_penalty"),
        presence_penalty=_number(settings, "presence_penalty"),
    )


def _tool_description(tool: ToolDefinition) -> ModelToolDescription:
    return ModelToolDescription(
        name=tool.name,
        description=tool.description or None,
        parameters=json.dumps(tool.parameters_json_schema, ensure_ascii=False, separators=(",", ":")),
    )


def model_call_metadata(
    response: ModelResponse, model: Model | None, request: CallRequest | None = None
) -> ModelCallMetadata:
    """Return what the model call that produced ``response`` reports about itself.

    Args:
        response: The model's response.
        model: The model the request went to, when the runner knows it.
        request: What the runner saw of the streamed request; `None` leaves the request's parameters,
            instructions and tools unset and the call not streaming.

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
    address, port = server_endpoint(response.provider_url)
    # Pydantic AI reports 0 when the provider says nothing about cache writes; 0 and unknown look alike.
    created = response.usage.cache_write_tokens
    return ModelCallMetadata(
        request_model=model.model_name if model is not None else None,
        response_model=response.model_name,
        provider_name=genai_provider_name(provider) if provider else None,
        response_id=response.provider_response_id,
        finish_reasons=reasons,
        request_parameters=request_parameters(request.settings if request is not None else None),
        is_streaming=request is not None,
        server_address=address,
        server_port=port,
        time_to_first_chunk_seconds=request.time_to_first_chunk_seconds if request is not None else None,
        cache_creation_input_tokens=created if created > 0 else None,
        system_instructions=request.system_instructions if request is not None else None,
        tool_definitions=[_tool_description(tool) for tool in request.tools] if request is not None else (),
    )
