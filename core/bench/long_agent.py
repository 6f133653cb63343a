"""A framework-free runner that grows a session fast, for the long-session benchmark.

A user message ``grow <n>`` makes one model call that answers with ``n`` stored messages at once, so a
session reaches 10,000 messages in minutes. Any other message is a measured turn shaped like
``bench.agent``'s: a model call, a read tool, a model call (user, assistant, tool, assistant). Message
sizes follow the Pydantic AI adapter's (``framework_item`` of 240 B to 1 KiB), so the values that cross
the devserver's 1 KiB blob threshold are the same as a real adapter's.

It compacts: a token is 4 bytes of ``framework_item``, any cut after an assistant or tool message is valid
(no tool call is ever open in what it stores), and the summary call returns a fixed 2 KiB text.

The large-message profile (``LargeRunner``, ``build_large_flows``) stores what an agent reading documents
does: every grown message, user message and tool output is ``message_bytes`` (100 KiB), and each stored
message holds its text twice, as a real adapter's does (the text and the framework item that repeats it).
"""

from __future__ import annotations

import json

from bench.agent import TOOL_NAME, BareRunner, item_of_size
from dex_agents import (
    AgentMessage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    CompactionPolicy,
    ContextSummaryRequest,
    ContextSummaryResult,
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

GROW_PREFIX = "grow "
#: The context window of the compacting Flow, in the runner's tokens: compaction starts near 100 messages.
CONTEXT_WINDOW_TOKENS = 20_000
_BYTES_PER_TOKEN = 4
_SUMMARY = "Earlier: the user asked about orders A-1 to A-9999; all shipped. " * 32


def _tokens(message: AgentMessage) -> int:
    return len(message.framework_item) // _BYTES_PER_TOKEN


class BulkRunner(BareRunner):
    """``bench.agent``'s runner, which also answers ``grow <n>`` with ``n`` messages and compacts."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Grow the session, or make the measured turn's model calls."""
        question = turn.messages[-1].text or ""
        if question.startswith(GROW_PREFIX) and turn.framework_run_state is None:
            count = int(question.removeprefix(GROW_PREFIX))
            sizes = (1065, 480, 881, 640)
            grown = [
                FrameworkMessage(
                    role=MessageRole.ASSISTANT,
                    framework_item=item_of_size("assistant", sizes[number % len(sizes)]),
                    text=f"part {number}",
                )
                for number in range(count)
            ]
            return TurnCompleted(grown, AgentUsage(model_calls=1, input_tokens=10, output_tokens=5))
        return await super().run_model_step(turn)

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Count a token per 4 bytes of every stored item the next call would send, and the summary."""
        summary = 0 if turn.context_summary is None else len(turn.context_summary.text) // _BYTES_PER_TOKEN
        return summary + sum(_tokens(message) for message in turn.messages)

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Keep the newest messages that fit the budget; cut after an assistant or tool message."""
        kept = 0
        messages = list(turn.messages)
        for position in range(len(messages) - 1, 0, -1):
            kept += _tokens(messages[position])
            before = messages[position - 1]
            if kept >= retained_token_budget and before.role is not MessageRole.USER:
                return before.sequence
        return None

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Return the fixed summary at once."""
        return ContextSummaryResult(_SUMMARY, AgentUsage(model_calls=1, input_tokens=100, output_tokens=500))


def build_flows(message_chunk_size: int = 32) -> tuple[AgentSessionFlow, AgentSessionFlow]:
    """Return the benchmark's Flows: without compaction, and with it.

    Args:
        message_chunk_size: Messages per chunk; every other storage option is the default.

    Returns:
        The Flow without compaction, and the one with it.
    """
    plain = AgentSessionOptions(
        tool_policies={TOOL_NAME: ToolPolicy(ToolEffect.READ)}, message_chunk_size=message_chunk_size
    )
    compacting = AgentSessionOptions(
        tool_policies={TOOL_NAME: ToolPolicy(ToolEffect.READ)},
        message_chunk_size=message_chunk_size,
        compaction=CompactionPolicy(context_window_tokens=CONTEXT_WINDOW_TOKENS),
    )
    return (
        AgentSessionFlow(BulkRunner(), flow_type="LongBench", options=plain),
        AgentSessionFlow(BulkRunner(), flow_type="LongBenchCompacting", options=compacting),
    )


#: The large profile's compacting Flow's context window in the runner's tokens: about 800 KB of items.
LARGE_CONTEXT_WINDOW_TOKENS = 200_000


def _item(role: str, text: str | None = None, **fields: str | None) -> str:
    return json.dumps({"role": role, "text": text, **fields})


class LargeRunner(BulkRunner):
    """The large-message profile: every grown message and tool output is ``message_bytes`` of text."""

    def __init__(self, message_bytes: int) -> None:
        self.message_bytes = message_bytes

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Return the user message, its text repeated in its item as an adapter's is."""
        return FrameworkMessage(role=MessageRole.USER, framework_item=_item("user", text), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Grow the session by large messages, or make the measured turn's two model calls."""
        question = turn.messages[-1].text or ""
        usage = AgentUsage(model_calls=1, input_tokens=10, output_tokens=5)
        if question.startswith(GROW_PREFIX) and turn.framework_run_state is None:
            count = int(question.removeprefix(GROW_PREFIX).split()[0])
            text = "d" * self.message_bytes
            item = _item("assistant", text)
            grown = [FrameworkMessage(MessageRole.ASSISTANT, item, text) for _ in range(count)]
            return TurnCompleted(grown, usage)
        if turn.framework_run_state is None:
            call = DeferredToolCall(
                "lookup-1", TOOL_NAME, '{"order_id":"A-1"}', turn.resolve_tool_policy(TOOL_NAME)
            )
            return ToolCallsRequested(item_of_size("run_state", 1167), (call,), usage)
        record = turn.tool_calls["lookup-1"]
        calls = FrameworkMessage(
            role=MessageRole.ASSISTANT,
            framework_item=_item("assistant", tool_call_id="lookup-1", tool_arguments=record.arguments),
            tool_call_id="lookup-1",
            tool_name=TOOL_NAME,
            tool_arguments=record.arguments,
        )
        result = FrameworkMessage(
            role=MessageRole.TOOL,
            framework_item=_item("tool", tool_call_id="lookup-1", output=record.output),
            tool_call_id="lookup-1",
            tool_name=TOOL_NAME,
            tool_output=record.output,
        )
        answer = FrameworkMessage(
            role=MessageRole.ASSISTANT, framework_item=_item("assistant", "It shipped."), text="It shipped."
        )
        return TurnCompleted((calls, result, answer), usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Return a document of ``message_bytes``."""
        return ToolExecutionResult("r" * self.message_bytes)


def build_large_flows(message_bytes: int) -> tuple[AgentSessionFlow, AgentSessionFlow]:
    """Return the large profile's Flows, default storage options: without compaction, and with it."""
    policies = {TOOL_NAME: ToolPolicy(ToolEffect.READ)}
    compacting = AgentSessionOptions(
        tool_policies=policies, compaction=CompactionPolicy(context_window_tokens=LARGE_CONTEXT_WINDOW_TOKENS)
    )
    plain = AgentSessionOptions(tool_policies=policies)
    return (
        AgentSessionFlow(LargeRunner(message_bytes), flow_type="LargeBench", options=plain),
        AgentSessionFlow(LargeRunner(message_bytes), flow_type="LargeBenchCompacting", options=compacting),
    )
