"""What the CLI's model calls report: the `ModelCallMetadata` of a run's `chat` span, and its usage.

One CLI run may make several model calls; the span names the last one (its model, response ID and stop
reason, read from what the run streamed), and the usage sums them all from the run's `ResultMessage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from claude_agent_sdk import ResultMessage
from dex_agents.runner import ModelCallMetadata
from dex_agents.values import AgentUsage

__all__ = ["ANTHROPIC_PROVIDER", "last_call_metadata", "no_call_metadata", "run_usage"]

ANTHROPIC_PROVIDER = "anthropic"
"""The provider of the Claude Code CLI's model calls, as the OpenTelemetry GenAI conventions spell it."""


def last_call_metadata(
    request_model: str | None, response_model: str | None, response_id: str | None, finish_reason: str | None
) -> ModelCallMetadata:
    """The metadata of a run's last model call, for the `chat` span."""
    return ModelCallMetadata(
        request_model=request_model,
        response_model=response_model,
        provider_name=ANTHROPIC_PROVIDER,
        response_id=response_id,
        finish_reasons=(finish_reason,) if finish_reason else (),
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
