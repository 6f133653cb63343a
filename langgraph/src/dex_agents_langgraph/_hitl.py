"""`HumanInTheLoopMiddleware` in a Dex session: its `interrupt_on` decides approvals, the session asks.

The middleware pauses the graph with its own `interrupt()` so a person can review tool calls. In a Dex
session the person reviews each call through the session's approvals instead (`AwaitToolApproval`,
answered with `resolve_interrupt`), which survive Worker restarts. So:

- every tool named in a middleware's `interrupt_on` requires approval, whatever the session's policy says
  about approval (its effect still decides retries);
- the middleware's interrupts are answered "approve" by the runner at once, in the same Step, so the calls
  reach `DexToolGate` and the session asks about each; the session's answer is what happens: an approved
  call runs, a rejected one never runs and the model sees the rejection message (which is how the user
  gives a `respond` decision's text, or says what an `edit` should change).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, cast

from dex_agents import ToolPolicy
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph.pregel import Pregel

from dex_agents_langgraph._refusals import middleware_behind_nodes

__all__ = ["ApprovalTools", "approving_answer"]


class ApprovalTools:
    """The tools whose calls the graph's `HumanInTheLoopMiddleware` instances review.

    Args:
        graph: The user's compiled graph.
    """

    def __init__(self, graph: Pregel[Any, Any, Any, Any]) -> None:
        names: set[str] = set()
        self.has_middleware = False
        for owner in middleware_behind_nodes(graph):
            if isinstance(owner, HumanInTheLoopMiddleware):
                reviewing = cast(HumanInTheLoopMiddleware[Any, Any, Any], owner)
                names.update(reviewing.interrupt_on)
                self.has_middleware = True
        self.tool_names = frozenset(names)

    def policy(self, tool_name: str, resolved: ToolPolicy) -> ToolPolicy:
        """Return the call's policy: the resolved one, requiring approval when the middleware reviews it."""
        if tool_name in self.tool_names and not resolved.is_approval_required:
            return dataclasses.replace(resolved, requires_approval=True)
        return resolved

    def answer(self, value: object) -> object | None:
        """Return the "approve" answer to an interrupt of the middleware, or `None` for another interrupt."""
        return approving_answer(value) if self.has_middleware else None


def approving_answer(value: object) -> object | None:
    """The answer that approves everything a `HumanInTheLoopMiddleware` interrupt asks about, else `None`.

    The batched interrupt (`HITLRequest`) gets one approve decision per action request; the per-call one
    (`ToolApprovalRequest`, langchain 1.5 and later) gets a single approve decision.
    """
    if not isinstance(value, Mapping):
        return None
    fields = cast(Mapping[str, Any], value)
    requests = fields.get("action_requests")
    if isinstance(requests, Sequence) and not isinstance(requests, str) and "review_configs" in fields:
        return {"decisions": [{"type": "approve"} for _ in cast(Sequence[object], requests)]}
    if fields.get("type") == "tool_approval" and "tool_call_id" in fields:
        return {"type": "approve"}
    return None
