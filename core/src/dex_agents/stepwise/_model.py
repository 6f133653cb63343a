"""The model call of a Stepwise agent: one streaming LiteLLM completion per `RunModel`.

A `ModelClient` makes exactly one call per `complete`, streams its text and reasoning to the turn's events
as they arrive, and returns the whole answer with the call's usage. `LiteLLMModelClient` is the client on
``litellm.acompletion(stream=True)``; the call belongs to the calling coroutine, so cancelling it (as
``cancel_turn`` cancels `RunModel`) stops the request and closes the response stream.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, cast, runtime_checkable

from dex_agents._provider_errors import UnfinishedModelResponse
from dex_agents.events import AgentEventWriter
from dex_agents.runner import ModelCallMetadata, ModelRequestParameters, ModelToolDescription, server_endpoint
from dex_agents.stepwise._litellm import litellm
from dex_agents.stepwise._tools import ListedTool, chat_tool
from dex_agents.values import AgentUsage

__all__ = [
    "GENAI_PROVIDER_NAMES",
    "LiteLLMModelClient",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelToolCall",
    "ToolChoice",
    "model_call_metadata",
]

ToolChoice = Literal["auto", "required", "none"]
"""How the model may use tools: as it likes, at least one, or none."""


@dataclass(frozen=True)
class ModelSettings:
    """Sampling and limits of each model call; unset values leave the provider's defaults.

    Attributes:
        max_output_tokens: The most tokens one answer may have (LiteLLM's ``max_tokens``).
        temperature: Sampling temperature.
        top_p: Nucleus sampling.
        parallel_tool_calls: Whether one answer may ask for several tools; sent only with tools.
        reasoning_effort: LiteLLM's ``reasoning_effort`` (``"low"``, ``"medium"``, ``"high"``, ...).
        timeout_seconds: The request's timeout. `RunModel` also stops a call after 15 minutes.
        extra_arguments: Further keyword arguments for ``litellm.acompletion``, such as
            ``{"thinking": {...}}`` or ``{"drop_params": True}``. They hold no secrets: they are code,
            and settings that change per session go through ``AgentDefinition.resolve_model``.
    """

    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    parallel_tool_calls: bool | None = None
    reasoning_effort: str | None = None
    timeout_seconds: float | None = None
    extra_arguments: Mapping[str, object] = field(default_factory=dict[str, object])

    def __post_init__(self) -> None:
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be at least 1, got {self.max_output_tokens}")
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"temperature must not be negative, got {self.temperature}")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ValueError(f"timeout_seconds must be positive, got {self.timeout_seconds}")


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call in a model's answer.

    Attributes:
        tool_call_id: The provider's ID of the call.
        tool_name: The tool the model asks for.
        arguments: The arguments as the model wrote them, JSON text.
    """

    tool_call_id: str
    tool_name: str
    arguments: str

    def to_chat(self) -> dict[str, object]:
        """Return the call as an entry of an assistant message's ``tool_calls`` in the OpenAI format."""
        return {
            "id": self.tool_call_id,
            "type": "function",
            "function": {"name": self.tool_name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ModelRequest:
    """One model call.

    Attributes:
        messages: The chat messages in the OpenAI format, instructions first.
        tools: The tools the model may call.
        settings: Sampling and limits.
        events: Receives the answer's text and reasoning as they stream; `None` streams nowhere.
        tool_choice: How the model may use tools; `None` leaves the provider's default (``auto``).
    """

    messages: Sequence[Mapping[str, object]]
    tools: Sequence[ListedTool] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    events: AgentEventWriter | None = None
    tool_choice: ToolChoice | None = None


@dataclass(frozen=True)
class ModelResponse:
    """A model's whole answer to one call.

    Attributes:
        message: The assistant message to replay in later calls, in the OpenAI chat format, with the
            provider's reasoning fields that some providers need back (``thinking_blocks``).
        text: The answer's text.
        reasoning: The reasoning text the provider streamed, if any.
        tool_calls: The tool calls, in the model's order.
        usage: The call's usage (one model call).
        finish_reason: Why the answer ended, as the provider says.
        response_model: The model that answered, as the provider names it.
        response_id: The provider's ID of the answer.
        provider_name: LiteLLM's name of the provider (``openai``, ``anthropic``, ``gemini``, ...).
        request_model: The model the request named, as the provider knows it (``gpt-4.1-mini`` for
            ``openai/gpt-4.1-mini``); `None` leaves the client's ``model_name``.
        time_to_first_chunk_seconds: Seconds from the request to the answer's first chunk, if measured.
        cache_creation_input_tokens: Input tokens the provider wrote to its prompt cache, if it says.
        server_address: The host of the endpoint the client called, when it knows it.
        server_port: That endpoint's port.
    """

    message: Mapping[str, object]
    text: str
    reasoning: str | None
    tool_calls: tuple[ModelToolCall, ...]
    usage: AgentUsage
    finish_reason: str | None = None
    response_model: str | None = None
    response_id: str | None = None
    provider_name: str | None = None
    request_model: str | None = None
    time_to_first_chunk_seconds: float | None = None
    cache_creation_input_tokens: int | None = None
    server_address: str | None = None
    server_port: int | None = None


@runtime_checkable
class ModelClient(Protocol):
    """Makes the model call of one `RunModel`."""

    @property
    def model_name(self) -> str:
        """The model this client calls, for errors and spans."""
        ...

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make exactly one model call, streaming its text and reasoning to ``request.events``."""
        ...

    def supports_forced_tool_choice(self, settings: ModelSettings) -> bool:
        """Whether the model accepts ``tool_choice="required"`` with these settings."""
        ...


@dataclass
class _ToolCallParts:
    tool_call_id: str = ""
    tool_name: str = ""
    arguments: list[str] = field(default_factory=list[str])


@dataclass
class _StreamedAnswer:
    """The pieces of one streamed answer, joined as they arrive."""

    text: list[str] = field(default_factory=list[str])
    reasoning: list[str] = field(default_factory=list[str])
    tool_calls: dict[int, _ToolCallParts] = field(default_factory=dict[int, _ToolCallParts])
    thinking_blocks: list[dict[str, object]] = field(default_factory=list[dict[str, object]])
    thinking_parts: list[str] = field(default_factory=list[str])
    usage: AgentUsage | None = None
    cache_creation_input_tokens: int | None = None
    finish_reason: str | None = None
    response_model: str | None = None
    response_id: str | None = None

    def add(self, chunk: Any, events: AgentEventWriter | None) -> None:
        self.response_id = self.response_id or getattr(chunk, "id", None)
        self.response_model = getattr(chunk, "model", None) or self.response_model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = _usage_of(usage)
            created = getattr(usage, "cache_creation_input_tokens", None)
            if isinstance(created, int) and created > 0:
                self.cache_creation_input_tokens = created
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "finish_reason", None):
                self.finish_reason = str(choice.finish_reason)
            delta = getattr(choice, "delta", None)
            if delta is not None:
                self._add_delta(delta, events)

    def _add_delta(self, delta: Any, events: AgentEventWriter | None) -> None:
        text = getattr(delta, "content", None)
        if text:
            self.text.append(text)
            if events is not None:
                events.write_text_delta(text)
        reasoning = getattr(delta, "reasoning_content", None)
        if reasoning:
            self.reasoning.append(reasoning)
            if events is not None:
                events.write_reasoning_delta(reasoning)
        for position, call in enumerate(getattr(delta, "tool_calls", None) or ()):
            index = getattr(call, "index", None)
            parts = self.tool_calls.setdefault(
                index if isinstance(index, int) else position, _ToolCallParts()
            )
            parts.tool_call_id = parts.tool_call_id or (getattr(call, "id", None) or "")
            function = getattr(call, "function", None)
            parts.tool_name = parts.tool_name or (getattr(function, "name", None) or "")
            arguments = getattr(function, "arguments", None)
            if arguments:
                parts.arguments.append(arguments)
        for block in getattr(delta, "thinking_blocks", None) or ():
            self._add_thinking(cast(Mapping[str, object], block))

    def _add_thinking(self, block: Mapping[str, object]) -> None:
        # Anthropic streams a thinking block in pieces and signs it last; replaying a tool-use turn needs
        # each signed block whole, and redacted blocks as they came.
        if block.get("type") == "redacted_thinking":
            self.thinking_parts.clear()
            if block.get("data"):
                self.thinking_blocks.append({"type": "redacted_thinking", "data": block["data"]})
            return
        thinking = block.get("thinking")
        if isinstance(thinking, str) and thinking:
            self.thinking_parts.append(thinking)
        signature = block.get("signature")
        if isinstance(signature, str) and signature:
            self.thinking_blocks.append(
                {"type": "thinking", "thinking": "".join(self.thinking_parts), "signature": signature}
            )
            self.thinking_parts.clear()

    def response(self, provider_name: str | None, request_model: str | None) -> ModelResponse:
        text = "".join(self.text)
        reasoning = "".join(self.reasoning) or None
        calls = tuple(
            ModelToolCall(parts.tool_call_id, parts.tool_name, "".join(parts.arguments))
            for _, parts in sorted(self.tool_calls.items())
        )
        # Providers refuse an assistant message with neither content nor tool calls, so an empty answer
        # keeps its empty text.
        message: dict[str, object] = {"role": "assistant", "content": text or (None if calls else "")}
        if calls:
            message["tool_calls"] = [call.to_chat() for call in calls]
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        if self.thinking_blocks:
            message["thinking_blocks"] = list(self.thinking_blocks)
        return ModelResponse(
            message=message,
            text=text,
            reasoning=reasoning,
            tool_calls=calls,
            usage=self.usage or AgentUsage(model_calls=1),
            finish_reason=self.finish_reason,
            response_model=self.response_model,
            response_id=self.response_id,
            provider_name=provider_name,
            request_model=request_model,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
        )


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _usage_of(usage: Any) -> AgentUsage:
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    return AgentUsage(
        model_calls=1,
        input_tokens=_count(getattr(usage, "prompt_tokens", 0)),
        output_tokens=_count(getattr(usage, "completion_tokens", 0)),
        cached_input_tokens=_count(getattr(prompt_details, "cached_tokens", 0)),
        reasoning_tokens=_count(getattr(completion_details, "reasoning_tokens", 0)),
    )


class LiteLLMModelClient:
    """A `ModelClient` on ``litellm.acompletion`` with ``stream=True``.

    The provider's key comes from the environment, as LiteLLM reads it (``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``, ...), or from ``completion_arguments``, which are code and never stored.

    Args:
        model: A LiteLLM model string, such as ``"openai/gpt-4.1-mini"`` or ``"anthropic/claude-sonnet-4-5"``.
        forced_tool_choice: Whether the model accepts ``tool_choice="required"``; `None` asks LiteLLM's
            model map, and refuses it for Anthropic models with extended thinking.
        **completion_arguments: Keyword arguments for every ``litellm.acompletion`` call, such as
            ``api_base`` or ``num_retries``.

    Raises:
        ValueError: If ``model`` is blank.
    """

    def __init__(
        self, model: str, *, forced_tool_choice: bool | None = None, **completion_arguments: Any
    ) -> None:
        if not isinstance(model, str) or not model.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"a LiteLLM model must be a non-empty model string, got {model!r}")
        self._model = model
        self._forced_tool_choice = forced_tool_choice
        self._completion_arguments = dict(completion_arguments)

    @property
    def model_name(self) -> str:
        """The LiteLLM model string."""
        return self._model

    def __repr__(self) -> str:
        return f"LiteLLMModelClient({self._model!r})"

    def supports_forced_tool_choice(self, settings: ModelSettings) -> bool:
        """Whether the model accepts ``tool_choice="required"`` with these settings.

        Args:
            settings: The call's settings; Anthropic refuses a forced tool choice with extended thinking.

        Returns:
            The explicit ``forced_tool_choice``, else what LiteLLM's model map says.
        """
        if self._forced_tool_choice is not None:
            return self._forced_tool_choice
        arguments = {**self._completion_arguments, **settings.extra_arguments}
        thinks = settings.reasoning_effort is not None or arguments.get("thinking") is not None
        if thinks and "claude" in self._model.lower():
            return False
        try:
            return bool(litellm.utils.supports_tool_choice(model=self._model))
        except Exception:
            return False

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        arguments: dict[str, Any] = {**self._completion_arguments, **settings.extra_arguments}
        arguments.update(
            model=self._model,
            messages=[dict(message) for message in request.messages],
            stream=True,
            stream_options={"include_usage": True},
        )
        if request.tools:
            arguments["tools"] = [chat_tool(tool) for tool in request.tools]
            if settings.parallel_tool_calls is not None:
                arguments["parallel_tool_calls"] = settings.parallel_tool_calls
        if request.tool_choice is not None:
            arguments["tool_choice"] = request.tool_choice
        optional = {
            "max_tokens": settings.max_output_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "reasoning_effort": settings.reasoning_effort,
            "timeout": settings.timeout_seconds,
        }
        arguments.update({name: value for name, value in optional.items() if value is not None})
        return arguments

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one streaming completion and return the whole answer.

        Args:
            request: The call.

        Returns:
            The answer, with the usage the provider reported (LiteLLM estimates it when the provider
            reports none).

        Raises:
            Exception: As LiteLLM raises it for a failed call; `RunModel` retries it.
        """
        arguments = self._arguments(request)
        started = time.monotonic()
        stream = await litellm.acompletion(**arguments)
        if not isinstance(stream, litellm.CustomStreamWrapper):
            raise TypeError(
                f"litellm.acompletion(stream=True) returned {type(stream).__name__}, not a stream"
            )
        answer = _StreamedAnswer()
        first_chunk: float | None = None
        # The context closes the provider's response stream however the loop ends, cancellation included.
        async with stream:
            async for chunk in stream:
                if first_chunk is None:
                    first_chunk = time.monotonic() - started
                answer.add(chunk, request.events)
        if stream.received_finish_reason is None and stream.intermittent_finish_reason is None:
            # LiteLLM ends a stream that stopped early as if it had finished; the provider never said so.
            raise UnfinishedModelResponse(
                f"the answer of {self._model!r} ended without a finish reason, so it may be cut short; "
                "RunModel calls the model again"
            )
        response = answer.response(getattr(stream, "custom_llm_provider", None), self._provider_model())
        address, port = server_endpoint(arguments.get("api_base") or arguments.get("base_url"))
        return replace(
            response, time_to_first_chunk_seconds=first_chunk, server_address=address, server_port=port
        )

    def _provider_model(self) -> str | None:
        """The model name the provider receives: the model string without LiteLLM's provider prefix."""
        try:
            model, *_ = litellm.get_llm_provider(model=self._model)
        except Exception:
            return None  # a model LiteLLM cannot route fails the call itself; the span keeps the string
        return model or None


GENAI_PROVIDER_NAMES: Mapping[str, str] = {
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "cohere_chat": "cohere",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "vertex_ai": "gcp.vertex_ai",
    "vertex_ai_beta": "gcp.vertex_ai",
    "watsonx": "ibm.watsonx.ai",
    "xai": "x_ai",
}
"""LiteLLM's provider names that the GenAI conventions spell differently; any other name is the same in both
(``openai``, ``anthropic``, ``cohere``, ``groq``, ``deepseek``, ``perplexity``) or has no conventional
name and is kept as LiteLLM spells it."""


def _system_instructions(messages: Sequence[Mapping[str, object]]) -> str | None:
    first = messages[0] if messages else None
    if first is None or first.get("role") != "system":
        return None
    content = first.get("content")
    return content if isinstance(content, str) and content else None


def model_call_metadata(
    client: ModelClient, response: ModelResponse, request: ModelRequest | None = None
) -> ModelCallMetadata:
    """Return what tracing records about one model call.

    Args:
        client: The client that made the call.
        response: Its answer.
        request: The call, for its parameters, instructions and tools; Stepwise always streams.

    Returns:
        The metadata, with the provider as the GenAI conventions name it.
    """
    provider = response.provider_name
    parameters = ModelRequestParameters()
    instructions: str | None = None
    tools: tuple[ModelToolDescription, ...] = ()
    if request is not None:
        settings = request.settings
        parameters = ModelRequestParameters(
            max_tokens=settings.max_output_tokens, temperature=settings.temperature, top_p=settings.top_p
        )
        instructions = _system_instructions(request.messages)
        tools = tuple(
            ModelToolDescription(
                name=tool.name,
                description=tool.description or None,
                parameters=json.dumps(dict(tool.input_schema), ensure_ascii=False, separators=(",", ":")),
            )
            for tool in request.tools
        )
    return ModelCallMetadata(
        request_model=response.request_model or client.model_name,
        response_model=response.response_model,
        provider_name=None if provider is None else GENAI_PROVIDER_NAMES.get(provider, provider),
        response_id=response.response_id,
        finish_reasons=() if response.finish_reason is None else (response.finish_reason,),
        request_parameters=parameters,
        is_streaming=True,
        server_address=response.server_address,
        server_port=response.server_port,
        time_to_first_chunk_seconds=response.time_to_first_chunk_seconds,
        cache_creation_input_tokens=response.cache_creation_input_tokens,
        system_instructions=instructions,
        tool_definitions=tools,
    )
