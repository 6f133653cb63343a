"""Compaction and storage options, the runner capability check, and ScriptedRunner's cut rule."""

import json

import pytest

from dex_agents import (
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
