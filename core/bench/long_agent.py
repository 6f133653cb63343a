"""A framework-free runner that grows a session fast, for the long-session benchmark.

A user message ``grow <n>`` makes one model call that answers with ``n`` stored messages at once, so a
session reaches 10,000 messages in minutes. Any other message is a measured turn shaped like
``bench.agent``'s: a model call, a read tool, a model call (user, assistant, tool, assistant). Message
sizes follow the Pydantic AI adapter's (``framework_item`` of 240 B to 1 KiB), so the values that cross
the devserver's 1 KiB blob threshold are the same as a real adapter's.

It compacts: a token is 4 bytes of ``framework_item``, any cut after an assistant or tool message is valid
(no tool call is ever open in what it stores), and the summary call returns a fixed 2 KiB text.
"""

from __future__ import annotations

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
    FrameworkMessage,
    MessageRole,
    ToolEffect,
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
