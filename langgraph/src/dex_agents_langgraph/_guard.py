"""A callback guard that keeps a model Step to one model call and no tool run.

The tool gate already stops a well-formed graph after its model call. The guard is the backstop for a
graph that is not: it rides along as a LangChain callback handler on the model Step's graph run and, with
`raise_error`, aborts the run *before* a second model call reaches its provider or a tool body runs, so
neither can ever happen silently inside `RunModel`.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

__all__ = ["ModelStepGuard", "ModelStepViolation"]


class ModelStepViolation(Exception):
    """The graph tried to make a second model call or run a tool inside the model Step."""


class ModelStepGuard(BaseCallbackHandler):
    """Counts model calls of one graph run and refuses a second one and every tool run."""

    # Without `raise_error`, LangChain would log the guard's exception and carry on. The guard runs like any
    # other handler (not inline): an inline handler that raises leaves the other handlers' coroutines
    # unawaited. LangChain awaits every start callback before the model or tool runs, so it still stops both.
    raise_error: bool = True
    run_inline: bool = False

    def __init__(self) -> None:
        self.model_calls = 0

    def _model_call_starts(self) -> None:
        if self.model_calls >= 1:
            raise ModelStepViolation(
                "the graph started a second model call in one model Step; every tool call must stop at "
                "DexToolGate (create_agent) or dex_tool_node (your own graph) before the next model call"
            )
        self.model_calls += 1

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, **kwargs: Any) -> None:
        """Count a chat model call; refuse a second one."""
        self._model_call_starts()

    def on_llm_start(self, serialized: dict[str, Any], prompts: list[str], **kwargs: Any) -> None:
        """Count a completion model call; refuse a second one."""
        self._model_call_starts()

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
