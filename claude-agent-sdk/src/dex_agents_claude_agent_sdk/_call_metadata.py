"""What the CLI's model calls report: the `ModelCallMetadata` of a run's `chat` span, and its usage.

One CLI run may make several model calls; the span names the last one (its model, response ID, stop
reason and prompt-cache writes, read from what the run streamed), and the usage sums them all from the
run's `ResultMessage`. The request side is what the runner knows of every request the CLI sends: the model
and system prompt of the run's options, the endpoint of its environment (``ANTHROPIC_BASE_URL``), the
runner's tools as its MCP server lists them, and that the CLI always streams.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from claude_agent_sdk import ClaudeAgentOptions, ResultMessage
from dex_agents.runner import ModelCallMetadata, ModelToolDescription, server_endpoint
from dex_agents.values import AgentUsage

__all__ = [
    "ANTHROPIC_PROVIDER",
    "RunRequest",
    "last_call_metadata",
    "no_call_metadata",
    "run_request",
    "run_usage",
]

ANTHROPIC_PROVIDER = "anthropic"
"""The provider of the Claude Code CLI's model calls, as the OpenTelemetry GenAI conventions spell it."""

# With one of these set, the CLI calls Bedrock, Vertex AI or Foundry, not the Messages API at
# ANTHROPIC_BASE_URL.
_OTHER_PLATFORMS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")


@dataclass(frozen=True)
class RunRequest:
    """What the runner knows of every model request a CLI run sends.

    Attributes:
        model: The model the run's options name, `None` for the CLI's default.
        server_address: The host of the Messages API endpoint the CLI is pointed at, when it is named.
        server_port: That endpoint's port.
        system_instructions: The run's own system prompt (the CLI puts a short preamble of its own first).
        tool_definitions: The runner's tools, as the CLI lists them from the runner's MCP server.
    """

    model: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    system_instructions: str | None = None
    tool_definitions: Sequence[ModelToolDescription] = ()


def run_request(options: ClaudeAgentOptions, tool_definitions: Sequence[ModelToolDescription]) -> RunRequest:
    """Return what a run with ``options`` sends with every model request.

    Args:
        options: The run's options, as the CLI gets them.
        tool_definitions: The runner's tools offered to the model.

    Returns:
        The request's description.
    """
    # The SDK starts the CLI with the Worker's environment and the options' env on top of it.
    environment = {**os.environ, **options.env}
    address, port = (None, None)
    if not any(_is_set(environment.get(name)) for name in _OTHER_PLATFORMS):
        address, port = server_endpoint(environment.get("ANTHROPIC_BASE_URL"))
    return RunRequest(
        model=options.model,
        server_address=address,
        server_port=port,
        system_instructions=_system_prompt(options.system_prompt),
        tool_definitions=tuple(tool_definitions),
    )


def last_call_metadata(
    request: RunRequest,
    response_model: str | None,
    response_id: str | None,
    finish_reason: str | None,
    cache_creation_input_tokens: int | None = None,
) -> ModelCallMetadata:
    """The metadata of a run's last model call, for the `chat` span; the CLI streams every call."""
    return ModelCallMetadata(
        request_model=request.model,
        response_model=response_model,
        provider_name=ANTHROPIC_PROVIDER,
        response_id=response_id,
        finish_reasons=(finish_reason,) if finish_reason else (),
        is_streaming=True,
        server_address=request.server_address,
        server_port=request.server_port,
        cache_creation_input_tokens=cache_creation_input_tokens,
        system_instructions=request.system_instructions,
        tool_definitions=request.tool_definitions,
    )


def no_call_metadata(request_model: str | None = None) -> ModelCallMetadata:
    """The metadata of an outcome that ended the turn before the CLI made any model call."""
    return ModelCallMetadata(request_model=request_model, provider_name=ANTHROPIC_PROVIDER)


def run_usage(result: ResultMessage, model_calls: int) -> AgentUsage:
    """The usage of a whole run; the API's cache reads and writes count as input tokens."""
    usage = cast(Mapping[str, Any], result.usage or {})
    cached = int(usage.get("cache_read_input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    return AgentUsage(
        model_calls=model_calls,
        input_tokens=int(usage.get("input_tokens") or 0) + cached + created,
        output_tokens=int(usage.get("output_tokens") or 0),
        cached_input_tokens=cached,
    )


def _system_prompt(prompt: object) -> str | None:
    """The text of a custom system prompt; Claude Code's preset prompt is the CLI's own, and unknown here."""
    if isinstance(prompt, str):
        return prompt or None
    if isinstance(prompt, Mapping):
        fields = cast(Mapping[str, object], prompt)
        text = fields.get("prompt")
        if fields.get("type") == "custom" and isinstance(text, str):
            return text or None
    return None


def _is_set(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no")
