"""Stepwise compacts context, in process through LiteLLM's real code path: count, cut, and summary call.

The conversation is built by the real runner against the session's side of the contract: turn 1 asks for two
lookups (stored as the answer's text, then one message per call), then answers from their results; turn 2 is a
plain question and answer; turn 3's question waits for the next model call. Its sequences:

1 user, 2 assistant text, 3 call lk-1, 4 call lk-2, 5 result lk-1, 6 result lk-2, 7 answer, 8 user, 9 answer,
10 user. A cut may follow only 6 (the results that complete turn 1's calls), 7 and 9.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from dex_agents import (
    CONTEXT_SUMMARY_HEADER,
    DEFAULT_SUMMARY_INSTRUCTIONS,
    AgentMessage,
    AgentUsage,
    ContextCompactionRunner,
    ContextSummary,
    ToolCallsRequested,
    TurnCompleted,
    left_out_messages_note,
)
from dex_agents.stepwise import (
    AgentDefinition,
    InstructionContext,
    LiteLLMModelClient,
    ModelSettings,
    StepwiseRunner,
    function_tool,
)
from dex_agents.stepwise._litellm import litellm
from dex_agents.stepwise._run_state import StepwiseRunState
from dex_agents.stepwise._tools import chat_tool
from dex_agents.testing import (
    ModelCallScope,
    ScriptedResponse,
    ScriptStore,
    model_call_scope,
)
from dex_agents.testing.stepwise import scripted_model
from tests.stepwise_litellm import CHUNK_MODEL, chunk, chunk_model, usage_chunk
from tests.test_stepwise_runner import SESSION, Driver, lookup_order, read_call

INSTRUCTIONS = "You handle orders."
# Longer than the note that says a message was left out, so leaving it out makes room.
SHIPPED = "Both have shipped: A-1 left the warehouse on Monday and B-2 on Tuesday, both with the courier."
LOOKUP = function_tool(lookup_order, effect="read")


def tokens(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()) -> int:
    """A token per 4 characters of what the model reads, counted independently of the runner."""
    characters = 0
    for message in messages:
        characters += len(str(message.get("content") or ""))
        calls: list[dict[str, Any]] = message.get("tool_calls") or []
        characters += sum(len(call["function"]["name"] + call["function"]["arguments"]) for call in calls)
    characters += sum(len(json.dumps(tool)) for tool in tools)
    return -(-characters // 4)


def chat(message: AgentMessage) -> dict[str, Any]:
    return json.loads(message.framework_item)


async def whole_turn(driver: Driver, text: str) -> None:
    """Run a turn to its end as the session would: tools in between, the final messages stored."""
    driver.start(text)
    while True:
        outcome = await driver.step()
        if isinstance(outcome, TurnCompleted):
            driver.side.store(outcome.new_messages)
            return
        await driver.run_tools()


@pytest.fixture
async def conversation(tmp_path: Path) -> Driver:
    store = ScriptStore(tmp_path)
    store.set_turns(
        SESSION,
        [
            [
                ScriptedResponse(
                    text="Let me look both up.", tool_calls=(read_call("lk-1"), read_call("lk-2", "B-2"))
                ),
                ScriptedResponse(text=SHIPPED),
            ],
            [ScriptedResponse(text="Refunded.")],
            [ScriptedResponse(text="You are welcome.")],
        ],
    )
    definition = AgentDefinition(
        name="orders", model=scripted_model("compaction", store), instructions=INSTRUCTIONS, tools=[LOOKUP]
    )
    driver = Driver(StepwiseRunner(definition))
    await whole_turn(driver, "Where are A-1 and B-2?")
    await whole_turn(driver, "Refund A-1, please.")
    driver.start("Thanks!")
    assert [message.sequence for message in driver.side.messages] == list(range(1, 11))
    return driver


def cut_keeps_every_call_with_its_result(messages: Sequence[AgentMessage], through: int) -> bool:
    summarized = [chat(message) for message in messages if message.sequence <= through]
    calls = {
        str(call["id"]) for item in summarized for call in list[dict[str, Any]](item.get("tool_calls") or [])
    }
    results = {item["tool_call_id"] for item in summarized if item["role"] == "tool"}
    kept = [chat(message) for message in messages if message.sequence > through]
    return calls == results and (not kept or kept[0]["role"] != "tool")


async def test_the_cut_falls_only_after_a_response_whose_calls_all_have_stored_results(
    conversation: Driver,
) -> None:
    runner = conversation.runner
    assert isinstance(runner, ContextCompactionRunner)
    turn = conversation.side.context()
    messages = turn.messages
    kept_after = {n: tokens([chat(m)]) for n, m in enumerate(messages, 1)}

    def kept(through: int) -> int:
        return sum(size for sequence, size in kept_after.items() if sequence > through)

    # Every budget picks one of the three cuts, the earliest that keeps what fits; none splits a response.
    cuts = {runner.select_compaction_cutoff(turn, budget) for budget in range(0, kept(0) + 2)}
    assert cuts == {6, 7, 9}
    assert all(cut_keeps_every_call_with_its_result(messages, cut) for cut in (6, 7, 9))
    assert runner.select_compaction_cutoff(turn, kept(6)) == 6
    assert runner.select_compaction_cutoff(turn, kept(6) - 1) == 7
    assert runner.select_compaction_cutoff(turn, kept(7)) == 7
    assert runner.select_compaction_cutoff(turn, kept(9)) == 9
    assert runner.select_compaction_cutoff(turn, 0) == 9  # nothing fits: the latest cut
    # Within the first answer (its text, its two calls, the first result) there is no cut at all.
    assert runner.select_compaction_cutoff(dataclasses.replace(turn, messages=messages[:5]), 0) is None


async def test_a_turn_waiting_for_its_tool_results_keeps_them_and_its_open_calls_after_the_cut(
    tmp_path: Path,
) -> None:
    store = ScriptStore(tmp_path)
    store.set_turns(
        SESSION,
        [
            [ScriptedResponse(text="Both have shipped.")],
            [
                ScriptedResponse(text="Checking.", tool_calls=(read_call("lk-9", "C-3"),)),
                ScriptedResponse(text="x"),
            ],
        ],
    )
    definition = AgentDefinition(name="orders", model=scripted_model("open-calls", store), tools=[LOOKUP])
    driver = Driver(StepwiseRunner(definition))
    await whole_turn(driver, "Where are A-1 and B-2?")
    driver.start("And C-3?")
    assert isinstance(await driver.step(), ToolCallsRequested)
    await driver.run_tools()
    turn = driver.side.context()
    runner = driver.runner

    # Stored: 1 user, 2 answer, 3 user, 4 text, 5 call lk-9; the result is the turn's, not stored yet. The
    # only cut is after the first answer, and the unstored result counts against the budget.
    result = {"role": "tool", "tool_call_id": "lk-9", "content": "C-3 has shipped"}
    after_answer = sum(tokens([chat(m)]) for m in turn.messages[2:]) + tokens([result])
    assert runner.select_compaction_cutoff(turn, after_answer) == 2
    assert runner.select_compaction_cutoff(turn, 0) == 2


async def test_the_estimate_counts_exactly_what_the_model_call_sends() -> None:
    async def instructions(context: InstructionContext) -> str:
        return f"{INSTRUCTIONS} Answer in {context.session_settings['language']}."

    model = chunk_model("estimate", chunk(content="Sure."), usage_chunk(10, 2))
    definition = AgentDefinition(name="orders", model=model, instructions=instructions, tools=[LOOKUP])
    driver = Driver(StepwiseRunner(definition))
    driver.start("Where is A-1?")
    summary = ContextSummary(1, 1, 0, "The user is Ana.", "t")
    turn = dataclasses.replace(
        driver.side.context(), context_summary=summary, session_settings={"language": "French"}
    )
    estimate = await driver.runner.estimate_input_tokens(turn)

    await driver.runner.run_model_step(turn)

    [sent] = CHUNK_MODEL.requests["estimate"]
    assert sent == [
        {"role": "system", "content": f"{INSTRUCTIONS} Answer in French."},
        {"role": "user", "content": f"{CONTEXT_SUMMARY_HEADER}\n\nThe user is Ana."},
        {"role": "user", "content": "Where is A-1?"},
    ]
    assert estimate == tokens(sent, [chat_tool(LOOKUP.definition)])
    # A model LiteLLM knows is counted with LiteLLM's own token counter.
    known = dataclasses.replace(definition, model="openai/gpt-4.1-mini")
    assert await StepwiseRunner(known).estimate_input_tokens(turn) == litellm.token_counter(  # pyright: ignore[reportUnknownMemberType]
        model="openai/gpt-4.1-mini", messages=sent, tools=[cast(Any, chat_tool(LOOKUP.definition))]
    )
    # A turn that ends with its tool results makes no model call, so it never compacts.
    ending = dataclasses.replace(turn, framework_run_state=StepwiseRunState(end_turn=True).to_json())
    assert await driver.runner.estimate_input_tokens(ending) == 0


async def test_after_compaction_the_model_input_starts_with_the_summary_then_the_newer_messages(
    conversation: Driver, tmp_path: Path
) -> None:
    summary = ContextSummary(1, 1, 7, "Ana asked where A-1 and B-2 are; both have shipped.", "t")
    side = conversation.side
    turn = dataclasses.replace(
        side.context(), messages=tuple(m for m in side.messages if m.sequence > 7), context_summary=summary
    )
    with model_call_scope(ModelCallScope(SESSION, turn.turn_id, 1, "RunModel-9")):
        outcome = await conversation.runner.run_model_step(turn)

    assert isinstance(outcome, TurnCompleted)
    calls = [call for call in ScriptStore(tmp_path).invocations.read() if call.kind == "model"]
    assert list(calls[-1].model_input) == [
        f"system: {INSTRUCTIONS}",
        f"user: {CONTEXT_SUMMARY_HEADER}\n\nAna asked where A-1 and B-2 are; both have shipped.",
        "user: Refund A-1, please.",
        "assistant: Refunded.",
        "user: Thanks!",
    ]


def summary_runner(**definition: Any) -> StepwiseRunner:
    """An agent whose model for {"model": "large"} is the chunk model ``summary-large``."""
    small = chunk_model("summary-small", chunk(content="Wrong model."), usage_chunk(1, 1))
    large = chunk_model(
        "summary-large", chunk(content="Ana's orders "), chunk(content="shipped."), usage_chunk(300, 8)
    )
    models: dict[str, LiteLLMModelClient] = {"small": small, "large": large}
    return StepwiseRunner(
        AgentDefinition(
            name="orders",
            resolve_model=lambda settings: models[str(settings.get("model", "small"))],
            tools=[LOOKUP],
            **definition,
        )
    )


async def test_the_summary_call_is_one_call_with_the_turns_model_and_the_conversation_as_a_transcript(
    conversation: Driver,
) -> None:
    runner = summary_runner()
    previous = ContextSummary(1, 1, 0, "The user is Ana.", "t")

    result = await runner.summarize_context(
        conversation.side.summary_request(9, previous_summary=previous, session_settings={"model": "large"})
    )

    assert result.text == "Ana's orders shipped."
    assert result.usage == AgentUsage(model_calls=1, input_tokens=300, output_tokens=8)
    assert CHUNK_MODEL.requests["summary-small"] == []
    [sent] = CHUNK_MODEL.requests["summary-large"]
    assert sent == [
        {"role": "system", "content": DEFAULT_SUMMARY_INSTRUCTIONS},
        {
            "role": "user",
            "content": "\n".join(
                [
                    f"{CONTEXT_SUMMARY_HEADER}\n\nThe user is Ana.\n\nThe conversation since that summary:",
                    "user: Where are A-1 and B-2?",
                    "assistant: Let me look both up.",
                    'assistant calls lookup_order {"order_id":"A-1"} [lk-1]',
                    'assistant calls lookup_order {"order_id":"B-2"} [lk-2]',
                    "tool lookup_order [lk-1]: A-1 has shipped",
                    "tool lookup_order [lk-2]: B-2 has shipped",
                    f"assistant: {SHIPPED}",
                    "user: Refund A-1, please.",
                    "assistant: Refunded.",
                ]
            ),
        },
    ]


async def test_a_summary_request_too_large_for_the_budget_leaves_out_the_oldest_responses_and_says_so(
    conversation: Driver,
) -> None:
    side = conversation.side
    runner = summary_runner(
        model_settings=ModelSettings(max_output_tokens=100), summary_instructions="Summarize."
    )
    large = {"model": "large"}

    async def summary_prompt(budget: int, previous: ContextSummary | None = None) -> str:
        """The prompt the summary call sends with this budget; the answer's 100 tokens come out of it."""
        await runner.summarize_context(
            side.summary_request(
                9, previous_summary=previous, input_token_budget=budget, session_settings=large
            )
        )
        system, prompt = CHUNK_MODEL.requests["summary-large"][-1]
        assert system == {"role": "system", "content": "Summarize."}
        return prompt["content"]

    def request_tokens(prompt: str) -> int:
        return tokens([{"content": "Summarize."}, {"content": prompt}])

    whole = await summary_prompt(100_000)
    # With one token less than the whole request needs, the first response and its results (6 messages)
    # go, and the note takes room of its own.
    six = await summary_prompt(request_tokens(whole) + 100 - 1)
    assert six == "\n".join(
        [
            "[Dex] 6 earlier messages did not fit in this request and are left out.\n\nThe conversation:",
            f"assistant: {SHIPPED}",
            "user: Refund A-1, please.",
            "assistant: Refunded.",
        ]
    )
    assert six.startswith(left_out_messages_note(6))

    # After a summary through 6, the oldest response is the one answer 7: as few messages as fit go.
    previous = ContextSummary(1, 1, 6, "Both have shipped.", "t")
    one_left_out = (
        f"{CONTEXT_SUMMARY_HEADER}\n\nBoth have shipped.\n\n"
        "[Dex] 1 earlier message did not fit in this request and is left out.\n\n"
        "The conversation since that summary:\nuser: Refund A-1, please.\nassistant: Refunded."
    )
    assert await summary_prompt(request_tokens(one_left_out) + 100, previous) == one_left_out
    # Less than that leaves out every message; the previous summary still goes.
    assert await summary_prompt(request_tokens(one_left_out) + 100 - 1, previous) == (
        f"{CONTEXT_SUMMARY_HEADER}\n\nBoth have shipped.\n\n"
        "[Dex] 3 earlier messages did not fit in this request and are left out.\n\n"
        "The conversation since that summary:"
    )
