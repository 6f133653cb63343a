"""A framework-free runner for the turn benchmark: two model calls around one read tool, no framework.

The messages have the sizes the Pydantic AI adapter stores for the same turn (user 239 bytes, assistant
~1 KiB, tool ~480 bytes, assistant ~880 bytes of ``framework_item``) and the run state is ~1.2 KiB, so the
values that cross the 1 KiB blob threshold are the same; the figures are the session Flow's, the SDK's and
the devserver's cost, without any framework work. The answers stream word by word, as a model's do (and as
the adapters' scripted models stream them).
"""

from __future__ import annotations

import json
import os

from dex_agents import (
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import text_chunks

TOOL_NAME = "lookup_order"
#: The user message that starts each benchmark turn.
QUESTION = "Where is order A-1?"


def item_of_size(kind: str, size: int, **fields: str) -> str:
    """Return a ``framework_item`` of about ``size`` bytes."""
    body = {"kind": kind, **fields}
    text = json.dumps(body)
    return json.dumps({**body, "padding": "x" * max(0, size - len(text) - 15)})


class BareRunner:
    """Answers from a fixed script: a tool call first, then a final answer once the tool result is in."""

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return the user message."""
        return FrameworkMessage(
            role=MessageRole.USER, framework_item=item_of_size("user", 239, text=text), text=text
        )

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Request the read tool on the first call, answer on the second."""
        text = "Let me look that up. " if turn.framework_run_state is None else "Order A-1 has shipped."
        for chunk in text_chunks(text):
            turn.events.write_text_delta(chunk)
        usage = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
        if turn.framework_run_state is None:
            policy = turn.resolve_tool_policy(TOOL_NAME)
            call = DeferredToolCall("lookup-1", TOOL_NAME, json.dumps({"order_id": "A-1"}), policy)
            return ToolCallsRequested(item_of_size("run_state", 1167), (call,), usage)
        record = turn.tool_calls["lookup-1"]
        calls = FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=item_of_size("assistant", 1065),
            text="Let me look that up. ",
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            tool_arguments=record.arguments,
        )
        result = FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item=item_of_size("tool", 480),
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            tool_output=record.output,
        )
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=item_of_size("assistant", 881),
            text="Order A-1 has shipped.",
        )
        return TurnCompleted((calls, result, answer), usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Return the order's status, and which Worker process looked it up (`bench.scale` counts them)."""
        arguments = json.loads(call.tool_call.arguments)
        return ToolExecutionResult(
            json.dumps({"order_id": arguments["order_id"], "status": "shipped", "worker_pid": os.getpid()})
        )


def build_flow() -> AgentSessionFlow:
    """Return the benchmark's session Flow."""
    return AgentSessionFlow(
        BareRunner(),
        flow_type="CoreBench",
        options=AgentSessionOptions(tool_policies={TOOL_NAME: ToolPolicy(ToolEffect.READ)}),
    )
