"""Middleware a Dex session cannot keep, refused when the runner is built instead of failing turns later."""

from __future__ import annotations

from typing import Any, cast

from langchain.agents.middleware import SummarizationMiddleware
from langgraph.pregel import Pregel

__all__ = ["middleware_behind_nodes", "refuse_conversation_rewriting_middleware"]


def middleware_behind_nodes(graph: Pregel[Any, Any, Any, Any]) -> list[object]:
    """The objects whose bound methods a graph's nodes run: `create_agent` adds a node per middleware hook."""
    owners: list[object] = []
    for node in graph.nodes.values():
        for function in (getattr(node.bound, "func", None), getattr(node.bound, "afunc", None)):
            owner = getattr(function, "__self__", None)
            if owner is not None and owner not in owners:
                owners.append(owner)
    return owners


def refuse_conversation_rewriting_middleware(graph: Pregel[Any, Any, Any, Any]) -> None:
    """Refuse a `SummarizationMiddleware` (or a subclass) in the graph.

    It replaces the graph's conversation with a summary once the conversation passes its trigger. The
    session stores the conversation as it happened and hands all of it to every turn, so the middleware
    would summarize again on every later turn, store each summary as a user message, and, summarizing
    with a model, make that model call in the model Step on every turn.

    Raises:
        TypeError: If the graph runs such a middleware, naming it and the fix.
    """
    for owner in middleware_behind_nodes(graph):
        if isinstance(owner, SummarizationMiddleware):
            name = type(cast(object, owner)).__name__
            raise TypeError(
                f"{name} cannot run in a Dex session: past its trigger it replaces the graph's conversation "
                "with a summary, but the session keeps the conversation as it happened and gives every turn "
                f"all of it, so {name} would summarize again on every turn and store each summary as a "
                "user message. Remove it, and bound what the model sees in a wrap_model_call middleware "
                "instead, which changes one model call's input and not the stored conversation: trim "
                "request.messages with langchain_core.messages.trim_messages and call "
                "handler(request.override(messages=...)), or use ContextEditingMiddleware to clear old "
                "tool outputs"
            )
