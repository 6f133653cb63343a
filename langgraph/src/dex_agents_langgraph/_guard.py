"""A callback guard that keeps a model Step to one model call of the agent and no tool run.

The tool gate already stops a well-formed graph after its model call. The guard is the backstop for a
graph that is not: it rides along as a LangChain callback handler on the model Step's graph run and, with
`raise_error`, aborts the run *before* a second model call of the agent reaches its provider or a tool
body runs, so neither can ever happen silently inside `RunModel`.

A model call that a middleware makes for itself and that LangChain marks as internal to the middleware
(`LLMToolSelectorMiddleware` choosing the tools, for example) is part of the Step: it is allowed, counted
and its usage added to the Step's.

The guard also stops the agent's call when the turn's scope (the session's tools, the model and
instructions its settings chose) did not reach it, and keeps what the call's start reported for its
`ModelCallMetadata`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from dex_agents.values import AgentUsage
from langchain.agents.middleware.internal_call_transformer import (
    INTERNAL_CALL_METADATA_KEY,
    internal_call_metadata,
)
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, LLMResult

from dex_agents_langgraph._turn_scope import TurnScope

__all__ = ["ModelStepGuard", "ModelStepViolation", "is_middleware_model_call", "token_usage"]


class ModelStepViolation(Exception):
    """The graph tried to make a second model call or run a tool inside the model Step."""


def is_middleware_model_call(metadata: Mapping[str, Any] | None) -> bool:
    """Whether a model call's metadata marks it as a middleware's own call.

    LangChain's marker carries a token private to the process, so a graph's own metadata cannot fake it.
    """
    marker = internal_call_metadata()[INTERNAL_CALL_METADATA_KEY]
    return metadata is not None and metadata.get(INTERNAL_CALL_METADATA_KEY) == marker


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


class ModelStepGuard(BaseCallbackHandler):
    """Counts the model calls of one graph run and refuses a second call of the agent and every tool run.

    Args:
        scope: The turn's scope, which must have reached the agent's model call.

    Attributes:
        model_calls: Every model call the run started (a call that fails counts too), the middleware's
            own included.
        middleware_usage: The summed tokens of the middleware's own calls that returned.
        request_parameters: What the agent's model call reported when it started (its LangSmith
            parameters: ``ls_model_name``, ``ls_provider``, ...), or `None` before it.
    """

    # Without `raise_error`, LangChain would log the guard's exception and carry on. The guard runs like any
    # other handler (not inline): an inline handler that raises leaves the other handlers' coroutines
    # unawaited. LangChain awaits every start callback before the model or tool runs, so it still stops both.
    raise_error: bool = True
    run_inline: bool = False

    def __init__(self, scope: TurnScope | None = None) -> None:
        self.model_calls = 0
        self.middleware_usage = AgentUsage()
        self.request_parameters: Mapping[str, Any] | None = None
        self._scope = scope
        self._agent_calls = 0
        self._middleware_runs: set[UUID] = set()

    def _model_call_starts(self, run_id: UUID, metadata: Mapping[str, Any] | None) -> None:
        if is_middleware_model_call(metadata):
            self._middleware_runs.add(run_id)
        elif self._agent_calls >= 1:
            raise ModelStepViolation(
                "the graph started a second model call in one model Step; every tool call must stop at "
                "DexToolGate (create_agent) or dex_tool_node (your own graph) before the next model call"
            )
        else:
            unapplied = None if self._scope is None else self._scope.unapplied()
            if unapplied is not None:
                raise ModelStepViolation(unapplied)
            self._agent_calls += 1
            self.request_parameters = dict(metadata or {})
        self.model_calls += 1

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Count a chat model call; refuse a second one of the agent."""
        self._model_call_starts(run_id, metadata)

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Count a completion model call; refuse a second one of the agent."""
        self._model_call_starts(run_id, metadata)

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the usage of a middleware's own call (the agent's call is read from its `AIMessage`)."""
        if run_id not in self._middleware_runs:
            return
        usage: UsageMetadata | None = None
        for generations in response.generations:
            for generation in generations:
                if isinstance(generation, ChatGeneration) and isinstance(generation.message, AIMessage):
                    usage = generation.message.usage_metadata or usage
        self.middleware_usage = self.middleware_usage.plus(token_usage(usage))

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Refuse any tool run: tools run only in their own tool Steps."""
        name = serialized.get("name") if isinstance(serialized, dict) else None  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ModelStepViolation(
            f"tool {name or '?'!r} was about to run inside the model Step; every tool must stop at "
            "DexToolGate (create_agent) or dex_tool_node (your own graph), so it runs in its own tool Step"
        )
