"""A runner wrapper that tells a scripted model which ``RunModel`` call it answers."""

from __future__ import annotations

from typing import Any, cast

from dex_agents import (
    AgentFrameworkRunner,
    AgentTurnContext,
    AgentTurnOutcome,
    ContextCompactionRunner,
    ContextSummaryRequest,
    ContextSummaryResult,
    DeferredToolExecution,
    DeferredToolOutcome,
    FrameworkMessage,
)
from dex_agents.testing._script import ModelCallScope, model_call_scope

__all__ = ["ModelCallScopedRunner", "with_model_call_scope"]


class ModelCallScopedRunner:
    """Delegates to a runner, and runs each ``run_model_step`` inside a :class:`ModelCallScope`.

    A scripted model inside a framework's model slot cannot see the Dex Step it runs in; this wrapper
    makes the session ID, turn, attempt, Step execution and recorded tool calls available to
    :func:`scripted_model_response`. Every other attribute is the wrapped runner's.

    Args:
        runner: The adapter's runner.
    """

    def __init__(self, runner: AgentFrameworkRunner) -> None:
        self._runner = runner

    @property
    def wrapped(self) -> AgentFrameworkRunner:
        """The adapter's runner."""
        return self._runner

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Delegate to the wrapped runner.

        Args:
            text: The user's text.

        Returns:
            The wrapped runner's message.
        """
        return self._runner.build_user_message(text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Delegate to the wrapped runner inside the call's scope.

        Args:
            turn: The turn's committed state.

        Returns:
            The wrapped runner's outcome.
        """
        scope = ModelCallScope(
            session_id=turn.flow_id,
            turn_id=turn.turn_id,
            attempt=turn.attempt,
            step_execution_id=turn.events.step_execution_id,
            recorded_tool_call_ids=frozenset(turn.tool_calls),
        )
        with model_call_scope(scope):
            return await self._runner.run_model_step(turn)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        """Delegate to the wrapped runner.

        Args:
            call: The approved call.

        Returns:
            The wrapped runner's result.
        """
        return await self._runner.execute_deferred_tool_call(call)

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Delegate a context summary call to the wrapped runner inside a summary call's scope.

        The wrapped runner's scripted model then answers from the session's summary script. Only a wrapped
        runner that compacts is ever asked: the wrapper has the other compaction methods only when it does.

        Args:
            request: The summary call.

        Returns:
            The wrapped runner's result.
        """
        scope = ModelCallScope(
            session_id=request.flow_id,
            turn_id=request.turn_id,
            attempt=request.attempt,
            step_execution_id=request.events.step_execution_id,
            is_summary=True,
        )
        with model_call_scope(scope):
            return await cast(ContextCompactionRunner, self._runner).summarize_context(request)

    def __getattr__(self, name: str) -> Any:
        # Optional runner capabilities (and adapter-specific attributes) stay visible through the wrapper.
        return getattr(self._runner, name)


def with_model_call_scope(runner: AgentFrameworkRunner) -> ModelCallScopedRunner:
    """Wrap an adapter's runner so its scripted model can call :func:`scripted_model_response`.

    Args:
        runner: The adapter's runner, built with a scripted model.

    Returns:
        The wrapped runner, to pass to ``AgentSessionFlow``.
    """
    return ModelCallScopedRunner(runner)
