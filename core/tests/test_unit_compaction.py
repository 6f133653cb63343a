"""Compaction and storage options, the runner capability check, and ScriptedRunner's cut rule."""

import json

import pytest

from dex_agents import (
    CONTEXT_SUMMARY_HEADER,
    MAX_MESSAGE_CHUNK_BYTES,
    AgentEventWriter,
    AgentMessage,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentUsage,
    CompactionPolicy,
    ContextCompactionRunner,
    ContextSummary,
    ContextSummaryResult,
    MessageRole,
    ToolEffect,
    build_summary_prompt,
    context_summary_text,
    left_out_messages_note,
)
from dex_agents.runner import AgentTurnContext
from dex_agents.testing import ScriptedRunner, render_message, scripted_token_count
from tests.test_unit_values import _Runner  # pyright: ignore[reportPrivateUsage]


def test_the_policy_has_the_design_defaults_and_refuses_ratios_that_would_loop() -> None:
    policy = CompactionPolicy(context_window_tokens=1000)
    assert (policy.trigger_ratio, policy.retained_ratio) == (0.85, 0.3)
    assert (policy.trigger_tokens, policy.retained_token_budget) == (850, 300)
    with pytest.raises(ValueError, match="context_window_tokens must be a positive number"):
        CompactionPolicy(context_window_tokens=0)
    with pytest.raises(ValueError, match=r"trigger_ratio must be above 0 and at most 1"):
        CompactionPolicy(1000, trigger_ratio=1.5)
    with pytest.raises(ValueError, match=r"retained_ratio \(0.9\) must be below trigger_ratio \(0.85\)"):
        CompactionPolicy(1000, retained_ratio=0.9)


def test_storage_options_have_the_design_defaults_and_bounds() -> None:
    options = AgentSessionOptions()
    assert (options.message_window_size, options.message_chunk_size) == (64, 32)
    assert (options.message_chunk_max_bytes, options.retained_message_limit) == (1024 * 1024, 1000)
    assert options.compaction is None
    assert AgentSessionOptions(retained_message_limit=None).retained_message_limit is None
    with pytest.raises(ValueError, match="at most 8388608"):
        AgentSessionOptions(message_chunk_max_bytes=MAX_MESSAGE_CHUNK_BYTES + 1)
    for name in (
        "message_window_size",
        "message_chunk_size",
        "message_chunk_max_bytes",
        "retained_message_limit",
    ):
        with pytest.raises(ValueError, match=f"{name} must be a positive int, got 0"):
            AgentSessionOptions(**{name: 0})  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="compaction must be a CompactionPolicy"):
        AgentSessionOptions(compaction=1000)  # pyright: ignore[reportArgumentType]


def test_compaction_needs_a_runner_with_the_capability() -> None:
    options = AgentSessionOptions(compaction=CompactionPolicy(context_window_tokens=1000))
    with pytest.raises(TypeError, match=r"_Runner does not implement ContextCompactionRunner"):
        AgentSessionFlow(_Runner(), flow_type="NoCompaction", options=options)
    flow = AgentSessionFlow(ScriptedRunner(), flow_type="Compacts", options=options)
    assert isinstance(flow.runner, ContextCompactionRunner)
    assert not isinstance(_Runner(), ContextCompactionRunner)


def _message(sequence: int, role: MessageRole, text: str = "", call: str | None = None) -> AgentMessage:
    item = {
        "role": role.value,
        "text": text or None,
        "tool_call_id": call,
        "tool_name": "lookup" if call else None,
        "tool_arguments": "{}" if call and role is MessageRole.ASSISTANT else None,
        "tool_output": "ok" if role is MessageRole.TOOL else None,
    }
    return AgentMessage(sequence, "turn-1", role, text or None, call, None, None, None, json.dumps(item), "t")


async def _no_heartbeat() -> None:
    return None


def _turn(messages: list[AgentMessage], summary: ContextSummary | None = None) -> AgentTurnContext:
    return AgentTurnContext(
        flow_id="s",
        turn_id="turn-1",
        attempt=1,
        messages=tuple(messages),
        framework_run_state=None,
        tool_calls={},
        events=AgentEventWriter(lambda event: None, "turn-1", 1),
        tool_policies={},
        default_tool_effect=ToolEffect.READ,
        heartbeat_function=_no_heartbeat,
        context_summary=summary,
    )


def test_the_scripted_runner_never_cuts_between_a_tool_call_and_its_result() -> None:
    runner = ScriptedRunner()
    messages = [
        _message(1, MessageRole.USER, "x" * 94),
        _message(2, MessageRole.ASSISTANT, call="c1"),
        _message(3, MessageRole.TOOL, call="c1"),
        _message(4, MessageRole.ASSISTANT, "y" * 89),
        _message(5, MessageRole.USER, "z" * 94),
    ]
    tokens = [scripted_token_count(render_message(message)) for message in messages]
    turn = _turn(messages)
    assert runner.estimate_input_tokens(turn) == sum(tokens)
    # Keeping only the question needs a cut after the answer (4); a cut after the call (2) would separate
    # it from its result, so it never happens.
    assert runner.select_compaction_cutoff(turn, tokens[4]) == 4
    assert runner.select_compaction_cutoff(turn, sum(tokens[3:])) == 3
    assert runner.select_compaction_cutoff(turn, sum(tokens[2:])) == 3  # 2 is not a valid cut
    assert runner.select_compaction_cutoff(turn, 0) == 4  # nothing fits: the latest cut
    assert runner.select_compaction_cutoff(_turn(messages[:1]), 0) is None  # the question alone stays
    summary = ContextSummary(1, 1, 0, "earlier", "t")
    assert runner.estimate_input_tokens(_turn(messages, summary)) == sum(tokens) + scripted_token_count(
        "summary: earlier"
    )


def test_a_summary_result_defaults_to_no_usage() -> None:
    assert ContextSummaryResult("text").usage == AgentUsage()


def test_the_texts_every_compacting_runner_shows_its_model_are_pinned() -> None:
    assert CONTEXT_SUMMARY_HEADER == "[Dex] Summary of the earlier conversation:"
    summary = ContextSummary(2, 1, 9, "The user is Ana; A-1 was refunded.", "t")
    assert context_summary_text(summary) == (
        "[Dex] Summary of the earlier conversation:\n\nThe user is Ana; A-1 was refunded."
    )
    assert left_out_messages_note(1) == "[Dex] 1 earlier message did not fit in this request and is left out."
    assert left_out_messages_note(12) == (
        "[Dex] 12 earlier messages did not fit in this request and are left out."
    )
    with pytest.raises(ValueError, match="at least one left-out message, got 0"):
        left_out_messages_note(0)


def test_the_summary_prompt_folds_the_previous_summary_and_says_what_was_left_out() -> None:
    lines = ["user: Refund A-1", "assistant: Done."]
    assert build_summary_prompt(None, lines) == "The conversation:\nuser: Refund A-1\nassistant: Done."
    previous = ContextSummary(1, 1, 4, "The user is Ana.", "t")
    assert build_summary_prompt(previous, lines, left_out=3) == (
        "[Dex] Summary of the earlier conversation:\n\nThe user is Ana.\n\n"
        "[Dex] 3 earlier messages did not fit in this request and are left out.\n\n"
        "The conversation since that summary:\nuser: Refund A-1\nassistant: Done."
    )


class _CountingRunner(ScriptedRunner):
    """Counts one token per message, so only bytes can trigger a compaction; records the cut's budget."""

    def __init__(self) -> None:
        super().__init__()
        self.budgets: list[int] = []

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        return len(turn.messages)

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        self.budgets.append(retained_token_budget)
        return turn.messages[-2].sequence


async def test_a_model_input_past_the_byte_trigger_compacts_and_keeps_its_share_of_the_tokens() -> None:
    from dex_agents.compaction._decision import compaction_cutoff

    policy = CompactionPolicy(context_window_tokens=1_000_000, context_window_bytes=100_000)
    assert (policy.trigger_bytes, policy.retained_bytes) == (85_000, 30_000)
    runner = _CountingRunner()
    small = [_message(number, MessageRole.USER, "x" * 10) for number in range(1, 11)]
    assert await compaction_cutoff(policy, runner, _turn(small), 11) is None  # 10 tokens, a few hundred bytes
    large = [_message(number, MessageRole.USER, "x" * 10_000) for number in range(1, 11)]
    # About 200 KB stored (text and runner item): past 85,000 bytes though 10 tokens are far below the
    # token trigger. Keeping 30,000 of ~200,000 bytes keeps that share of the 10 tokens.
    assert await compaction_cutoff(policy, runner, _turn(large), 11) == 9
    assert runner.budgets == [1]
    with pytest.raises(ValueError, match="context_window_bytes must be a positive number"):
        CompactionPolicy(1000, context_window_bytes=0)
