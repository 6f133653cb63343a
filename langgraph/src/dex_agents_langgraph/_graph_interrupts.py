"""An `interrupt(value)` in a graph node, asked as the session's question.

The session asks questions for tool calls only, so a node's pending interrupt becomes a call the runner
defers itself: tool `GRAPH_INTERRUPT_TOOL`, ID ``graph-interrupt-<interrupt ID>``, a `read` that needs no
approval. Its tool Step asks the user (`ask_user_input`, as a tool's own `interrupt()` asks) and returns the
answer as its output, so the answer is the call's record, which survives Worker restarts. When the turn
resumes, the runner finds the interrupt still pending in the run state and resumes it with
`Command(resume={interrupt_id: answer})`, so `interrupt()` returns the answer, as in LangGraph.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from dex_agents.runner import DeferredToolCall, ToolPolicy, TurnCompleted, describe_tool_call_outcome
from dex_agents.values import AgentToolCall, ToolCallStatus, ToolEffect
from langgraph.types import Interrupt

__all__ = [
    "GRAPH_INTERRUPT_TOOL",
    "graph_interrupt_answer",
    "graph_interrupt_call",
    "graph_interrupt_value",
    "is_graph_interrupt_call",
]

GRAPH_INTERRUPT_TOOL = "langgraph_interrupt"
"""The tool name of the call that asks a graph node's `interrupt()` as the session's question."""

_ID_PREFIX = "graph-interrupt-"
_QUESTION_POLICY = ToolPolicy(ToolEffect.READ, requires_approval=False)


def _call_id(pending: Interrupt) -> str:
    return f"{_ID_PREFIX}{pending.id}"


def graph_interrupt_call(pending: Interrupt) -> DeferredToolCall:
    """Return the call that asks a node's pending interrupt; its arguments keep the interrupt's value."""
    arguments = json.dumps({"value": pending.value}, default=str, ensure_ascii=False)
    return DeferredToolCall(_call_id(pending), GRAPH_INTERRUPT_TOOL, arguments, _QUESTION_POLICY)


def is_graph_interrupt_call(tool_call_id: str, tool_name: str) -> bool:
    """Whether a deferred call is one the runner made for a node's interrupt."""
    return tool_name == GRAPH_INTERRUPT_TOOL and tool_call_id.startswith(_ID_PREFIX)


def graph_interrupt_value(arguments: str) -> object:
    """The interrupt's value from its call's arguments."""
    return cast(Mapping[str, Any], json.loads(arguments)).get("value")


def graph_interrupt_answer(pending: Interrupt, records: Mapping[str, AgentToolCall]) -> str | TurnCompleted:
    """Return the user's answer that resumes a node's interrupt, or the turn's end when there is none.

    Raises:
        RuntimeError: If the call's record is not final (the session makes every record final first).
    """
    record = records.get(_call_id(pending))
    if record is None:
        return TurnCompleted(
            new_messages=(),
            turn_error=f"the graph is waiting on an interrupt the session never asked ({pending.value!r})",
        )
    if not record.is_final:
        raise RuntimeError(f"the graph's interrupt {pending.id!r} has no final record to resume with")
    if record.status is ToolCallStatus.SUCCEEDED:
        return record.output or ""
    return TurnCompleted(
        new_messages=(),
        turn_error=f"the graph's question was not answered: {describe_tool_call_outcome(record)}",
    )
