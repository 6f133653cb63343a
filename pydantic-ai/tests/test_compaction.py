"""Context compaction and session settings in process: the session's side played by `SessionSide`.

A conversation is driven through the runner exactly as the Steps drive it, so what is stored is the real
projection (split responses, one message per tool result); the tests then ask the runner what the session
asks before a model call (estimate, cut), make the summary call, and look at what the model was shown.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence

import pytest
from dex_agents import (
    AgentTurnContext,
    ContextSummary,
    MessageRole,
    ModelCallMetadata,
    ToolCallsRequested,
    ToolCallStatus,
    TurnCompleted,
)
from dex_agents.testing import SessionSide
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage

from dex_agents_pydantic_ai import (
    CONTEXT_SUMMARY_HEADER,
    DEFAULT_SUMMARY_INSTRUCTIONS,
    InstructionsForSettings,
    ModelForSettings,
    PydanticAiRunner,
    PydanticAiRunState,
    TokenEstimator,
    estimate_tokens,
)
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.support import respond, tool_call

QUESTIONS = ("Where are orders A-1 and A-2?", "And the refund?", "Thanks, anything else?")


def answer_conversation(messages: list[ModelMessage]) -> ModelResponse:
    """Turn 1 looks up two orders in one response, then answers; later turns answer at once."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    if any(part.part_kind == "tool-return" for part in last.parts):
        return respond(TextPart("Both orders shipped on Monday."))
    prompt = next(part.content for part in last.parts if isinstance(part, UserPromptPart))
    if prompt == QUESTIONS[0]:
        return respond(
            TextPart("Let me look both up."),
            tool_call("lookup_order", {"order_id": "A-1"}, "read-1"),
            tool_call("lookup_order", {"order_id": "A-2"}, "read-2"),
        )
    return respond(TextPart(f"Answer to: {prompt}"))


def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


def build_runner(
    model: ScriptedModel,
    *,
    model_for_settings: ModelForSettings | None = None,
    instructions_for_settings: InstructionsForSettings | None = None,
    token_estimator: TokenEstimator = estimate_tokens,
    summary_instructions: str = DEFAULT_SUMMARY_INSTRUCTIONS,
) -> PydanticAiRunner[None]:
    agent = Agent(model, instructions="You are the order desk.", tools=[lookup_order])
    return PydanticAiRunner(
        agent,
        model_for_settings=model_for_settings,
        instructions_for_settings=instructions_for_settings,
        token_estimator=token_estimator,
        summary_instructions=summary_instructions,
    )


async def play_turn(runner: PydanticAiRunner[None], session: SessionSide, text: str) -> None:
    """Run one whole turn as the session does: model Steps, tool Steps, the final commit."""
    session.start_turn(runner.build_user_message(text))
    while True:
        outcome = await runner.run_model_step(session.context())
        if isinstance(outcome, TurnCompleted):
            assert outcome.turn_error is None
            session.store(outcome.new_messages)
            return
        assert isinstance(outcome, ToolCallsRequested)
        session.defer(outcome)
        for call in outcome.tool_calls:
            output = await session.execute(runner, call.tool_call_id)
            session.finish(call.tool_call_id, ToolCallStatus.SUCCEEDED, output=output)


async def three_turns() -> tuple[PydanticAiRunner[None], SessionSide, ScriptedModel]:
    """Turn 1 (1-7: question, split response, two results, answer), turn 2 (8-9), question 3 (10)."""
    model = ScriptedModel(answer_conversation)
    runner = build_runner(model)
    session = SessionSide()
    await play_turn(runner, session, QUESTIONS[0])
    await play_turn(runner, session, QUESTIONS[1])
    session.start_turn(runner.build_user_message(QUESTIONS[2]))
    return runner, session, model


def summary(text: str, last_sequence: int) -> ContextSummary:
    return ContextSummary(
        generation=1,
        first_sequence=1,
        last_sequence=last_sequence,
        text=text,
        created_at="2026-11-29T00:00:00Z",
    )


def after_summary(
    session: SessionSide, context_summary: ContextSummary, **changes: object
) -> AgentTurnContext:
    """The turn context the session hands a compacting runner once it has compacted."""
    return dataclasses.replace(
        session.context(),
        messages=tuple(m for m in session.messages if m.sequence > context_summary.last_sequence),
        context_summary=context_summary,
        **changes,  # pyright: ignore[reportArgumentType]
    )


def request_tokens(prompt: str) -> int:
    return estimate_tokens([ModelRequest(parts=[UserPromptPart(prompt)], instructions="Summarize.")])


def user_texts(request: ModelRequest) -> list[str]:
    return [str(part.content) for part in request.parts if isinstance(part, UserPromptPart)]


def prompt_of(messages: Sequence[ModelMessage]) -> str:
    """The one user prompt of a summary call."""
    assert len(messages) == 1 and isinstance(messages[0], ModelRequest)
    [part] = messages[0].parts
    assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
    return part.content


# The cut.


async def test_the_cut_never_separates_a_tool_call_from_its_result_nor_the_pieces_of_a_response() -> None:
    runner, session, _ = await three_turns()
    roles = [(m.sequence, m.role, m.tool_call_id) for m in session.messages]
    assert roles == [
        (1, MessageRole.USER, None),
        (2, MessageRole.ASSISTANT, None),  # the response's text piece
        (3, MessageRole.ASSISTANT, "read-1"),  # its call pieces
        (4, MessageRole.ASSISTANT, "read-2"),
        (5, MessageRole.TOOL, "read-1"),
        (6, MessageRole.TOOL, "read-2"),
        (7, MessageRole.ASSISTANT, None),
        (8, MessageRole.USER, None),
        (9, MessageRole.ASSISTANT, None),
        (10, MessageRole.USER, None),
    ]
    context = session.context()
    total = runner.estimate_input_tokens(context)
    cuts = {runner.select_compaction_cutoff(context, budget) for budget in range(total + 2)}
    # After both results (6), after an answer (7, 9): never inside the response (2-4), between its results
    # (5), after a question, or on the turn's own question (10).
    assert cuts == {6, 7, 9}
    # Everything newer than the earliest cut fits a generous budget; nothing fits no budget: the latest cut.
    assert runner.select_compaction_cutoff(context, total) == 6
    assert runner.select_compaction_cutoff(context, 0) == 9


async def test_the_cut_keeps_the_budget_of_newer_messages_counting_the_turns_unstored_ones() -> None:
    model = ScriptedModel(answer_conversation)
    runner = build_runner(model)
    session = SessionSide()
    await play_turn(runner, session, QUESTIONS[1])  # 1-2
    await play_turn(runner, session, QUESTIONS[2])  # 3-4
    session.start_turn(runner.build_user_message(QUESTIONS[0]))  # 5, whose response calls two tools
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)  # the response waits in the run state, not among the stored messages
    context = session.context()
    assert session.framework_run_state is not None
    unstored = estimate_tokens(PydanticAiRunState.from_json(session.framework_run_state).turn_messages)
    newer = sum(
        estimate_tokens([message])
        for message in (
            ModelRequest(parts=[UserPromptPart(QUESTIONS[2])]),
            respond(TextPart(f"Answer to: {QUESTIONS[2]}")),
            ModelRequest(parts=[UserPromptPart(QUESTIONS[0])]),
        )
    )
    assert unstored > 0
    # Cutting after 2 keeps 3-5 and the unstored response; a budget without room for that response keeps
    # only 5.
    assert runner.select_compaction_cutoff(context, newer + unstored) == 2
    assert runner.select_compaction_cutoff(context, newer) == 4
    older = estimate_tokens([ModelRequest(parts=[UserPromptPart(QUESTIONS[1])])]) + estimate_tokens(
        [respond(TextPart(f"Answer to: {QUESTIONS[1]}"))]
    )
    # The estimate counts the whole input at once, so it rounds once where the cut rounds per message.
    assert newer + unstored + older - 5 <= runner.estimate_input_tokens(context) <= newer + unstored + older


# The estimate.


def test_the_default_estimate_is_a_token_per_four_characters_of_what_the_model_reads() -> None:
    assert estimate_tokens([ModelRequest(parts=[UserPromptPart("x" * 40)])]) == 10
    assert estimate_tokens([ModelRequest(parts=[UserPromptPart("x" * 41)])]) == 11  # rounded up
    counted = [
        ModelRequest(parts=[SystemPromptPart("s" * 8), UserPromptPart("u" * 8)], instructions="i" * 8),
        ModelResponse(
            parts=[TextPart("t" * 8), ThinkingPart("r" * 8)],
            usage=RequestUsage(input_tokens=10_000),  # metadata, timestamps and usage are not read
        ),
        respond(tool_call("lookup_order", {"order_id": "A-1"}, "call-1")),
    ]
    call_characters = len("lookup_order") + len('{"order_id": "A-1"}')
    assert estimate_tokens(counted) == -(-(5 * 8 + call_characters) // 4)
    assert estimate_tokens([]) == 0


async def test_the_estimate_counts_the_summary_the_newer_messages_the_run_state_and_added_instructions() -> (
    None
):
    seen: list[list[ModelMessage]] = []

    def estimator(messages: Sequence[ModelMessage]) -> int:
        seen.append(list(messages))
        return 1234

    model = ScriptedModel(answer_conversation)
    runner = build_runner(
        model,
        token_estimator=estimator,
        instructions_for_settings=lambda settings: f"Answer in {settings.get('language', 'English')}.",
    )
    session = SessionSide()
    await play_turn(runner, session, QUESTIONS[1])  # 1-2
    session.start_turn(runner.build_user_message(QUESTIONS[0]))  # 3
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)
    context = after_summary(
        session, summary("They asked about a refund.", 2), session_settings={"language": "Dutch"}
    )

    seen.clear()
    assert runner.estimate_input_tokens(context) == 1234
    [messages] = seen
    first, question, pending, instructions = messages
    assert isinstance(first, ModelRequest)
    assert user_texts(first) == [f"{CONTEXT_SUMMARY_HEADER}\n\nThey asked about a refund."]
    assert isinstance(question, ModelRequest) and user_texts(question) == [QUESTIONS[0]]
    assert isinstance(pending, ModelResponse)
    assert [call.tool_call_id for call in pending.tool_calls] == ["read-1", "read-2"]
    assert isinstance(instructions, ModelRequest) and instructions.instructions == "Answer in Dutch."


# The model input after compaction.


async def test_after_compaction_the_model_input_starts_with_the_summary_then_the_newer_messages() -> None:
    model = ScriptedModel(answer_conversation)
    agent = Agent(model, system_prompt="You are terse.", tools=[lookup_order])
    runner = PydanticAiRunner(agent)
    session = SessionSide()
    for question in QUESTIONS[1:]:
        await play_turn(runner, session, question)  # 1-4
    session.start_turn(runner.build_user_message("Last one?"))  # 5
    context = after_summary(session, summary("The user asked about a refund.", 2))

    outcome = await runner.run_model_step(context)

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    shown = model.calls[-1]
    assert shown.user_prompts == [
        f"{CONTEXT_SUMMARY_HEADER}\n\nThe user asked about a refund.",
        QUESTIONS[2],
        "Last one?",
    ]
    first = shown.messages[0]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)
    assert isinstance(first.parts[1], UserPromptPart)  # the system prompt, then the summary
    assert [m.text for m in outcome.new_messages] == ["Answer to: Last one?"]  # the summary is not stored


# The summary call.


async def test_the_summary_call_folds_the_previous_summary_and_a_transcript_with_the_turns_model() -> None:
    _, session, _ = await three_turns()
    small = ScriptedModel(lambda _: "unused", model_name="small")
    summary_text = "A-1 and A-2 shipped Monday; the user asked about a refund."
    large = ScriptedModel(lambda _: summary_text, model_name="large")
    runner = build_runner(
        small, model_for_settings=lambda settings: large if settings.get("model") == "large" else None
    )
    previous = summary("The user is Ana.", 1)

    result = await runner.summarize_context(
        session.summary_request(9, previous_summary=previous, session_settings={"model": "large"})
    )

    assert result.text == summary_text
    # The usage the stream reported (FunctionModel estimates its own) for exactly one model call.
    assert result.usage.model_calls == 1 and result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    # What names the CompactContext attempt's chat span: the turn's model, as it reported the call.
    assert result.model_call_metadata is not None
    assert result.model_call_metadata.time_to_first_chunk_seconds is not None
    assert dataclasses.replace(result.model_call_metadata, time_to_first_chunk_seconds=None) == (
        ModelCallMetadata(
            request_model="large",
            response_model="large",
            provider_name="dex.scripted",
            response_id="large-1",
            finish_reasons=("stop",),
            is_streaming=True,
            system_instructions=DEFAULT_SUMMARY_INSTRUCTIONS,
        )
    )
    assert small.calls == []
    [call] = large.calls
    assert call.tool_names == ()  # a summary call offers no tools
    request = call.messages[0]
    assert isinstance(request, ModelRequest) and request.instructions == DEFAULT_SUMMARY_INSTRUCTIONS
    assert prompt_of(call.messages) == "\n\n".join(
        [
            f"{CONTEXT_SUMMARY_HEADER}\n\nThe user is Ana.",
            "\n".join(
                [
                    "The conversation since that summary:",
                    "assistant: Let me look both up.",
                    'assistant calls lookup_order {"order_id":"A-1"} [read-1]',
                    'assistant calls lookup_order {"order_id":"A-2"} [read-2]',
                    "tool lookup_order [read-1] success: A-1 shipped",
                    "tool lookup_order [read-2] success: A-2 shipped",
                    "assistant: Both orders shipped on Monday.",
                    f"user: {QUESTIONS[1]}",
                    f"assistant: Answer to: {QUESTIONS[1]}",
                ]
            ),
        ]
    )


async def test_a_summary_call_too_large_for_the_window_leaves_out_the_oldest_messages_and_says_so() -> None:
    _, session, _ = await three_turns()
    prompts: list[str] = []

    def summarize(messages: list[ModelMessage]) -> str:
        prompts.append(prompt_of(messages))
        return "Short."

    runner = build_runner(ScriptedModel(summarize), summary_instructions="Summarize.")
    whole = await runner.summarize_context(session.summary_request(9))
    assert whole.text == "Short."
    budget = (
        estimate_tokens([ModelRequest(parts=[UserPromptPart(prompts[0])], instructions="Summarize.")]) - 1
    )

    await runner.summarize_context(session.summary_request(9, input_token_budget=budget))

    # The note takes room too, so the question alone is not enough: the whole response goes, and its
    # pieces count as the messages they were stored as.
    left_out = prompts[1]
    assert left_out.startswith("[Dex] 4 earlier messages did not fit in this request and are left out.\n\n")
    assert "user: Where are orders" not in left_out and "assistant: Let me look both up." not in left_out
    assert left_out.endswith("user: And the refund?\nassistant: Answer to: And the refund?")
    assert (
        estimate_tokens([ModelRequest(parts=[UserPromptPart(left_out)], instructions="Summarize.")]) <= budget
    )


async def test_a_runner_without_a_model_says_so_in_the_summary_call() -> None:
    _, session, _ = await three_turns()
    runner = PydanticAiRunner(Agent(tools=[lookup_order]))
    with pytest.raises(Exception, match="no model for the context summary call"):
        await runner.summarize_context(session.summary_request(9))


# Session settings.


async def test_session_settings_choose_the_turns_model_and_add_instructions() -> None:
    small = ScriptedModel(lambda _: "small answer", model_name="small")
    large = ScriptedModel(lambda _: "large answer", model_name="large")
    models = {"small": small, "large": large}
    runner = build_runner(
        small,
        model_for_settings=lambda settings: models.get(str(settings.get("model"))),
        instructions_for_settings=lambda settings: str(settings.get("instructions") or "") or None,
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))
    settings = {"model": "large", "instructions": "Answer in Dutch."}

    outcome = await runner.run_model_step(dataclasses.replace(session.context(), session_settings=settings))

    assert isinstance(outcome, TurnCompleted) and [m.text for m in outcome.new_messages] == ["large answer"]
    assert small.calls == []
    request = large.calls[0].messages[-1]
    assert isinstance(request, ModelRequest)
    assert request.instructions == "You are the order desk.\n\nAnswer in Dutch."
    # Without settings the runner's own model answers, with the agent's instructions only.
    session.store(outcome.new_messages)
    session.start_turn(runner.build_user_message("Again"))
    plain = await runner.run_model_step(session.context())
    assert isinstance(plain, TurnCompleted) and [m.text for m in plain.new_messages] == ["small answer"]
    plain_request = small.calls[0].messages[-1]
    assert isinstance(plain_request, ModelRequest) and plain_request.instructions == "You are the order desk."


async def test_settings_the_hook_refuses_end_the_turn_saying_why_and_the_next_turn_works() -> None:
    model = ScriptedModel(lambda _: "fine")

    def choose(settings: Mapping[str, object]) -> None:
        if "model" in settings:
            raise KeyError(f"no model named {settings['model']!r}")

    runner = build_runner(model, model_for_settings=choose)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))
    refused = await runner.run_model_step(
        dataclasses.replace(session.context(), session_settings={"model": "x"})
    )
    assert isinstance(refused, TurnCompleted) and refused.new_messages == []
    assert refused.turn_error == (
        "the session settings chose no usable model or instructions: KeyError: \"no model named 'x'\""
    )
    assert model.calls == []
    session.start_turn(runner.build_user_message("Hi again"))
    done = await runner.run_model_step(session.context())
    assert isinstance(done, TurnCompleted) and done.turn_error is None
    assert json.loads(done.new_messages[0].framework_item)["parts"][0]["content"] == "fine"
