"""What a turn brings besides the agent: built-in tools, session settings, and the model call's metadata.

The runner is driven the way the session drives it (`SessionSide`), with the SDK's real agent loop.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, cast

import pytest
from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    Model,
    ModelProvider,
    ModelSettings,
    ModelTracing,
    OpenAIProvider,
    OpenAIResponsesModel,
    RunConfig,
    Tool,
    TResponseInputItem,
    WebSearchTool,
    function_tool,
    handoff,
)
from agents.items import TResponseStreamEvent
from agents.run_config import CallModelData, ModelInputData
from dex_agents import (
    BUILT_IN_TOOL_NAMES,
    AgentSessionFlow,
    AgentSessionOptions,
    CompactionPolicy,
    ModelCallMetadata,
    ModelRequestParameters,
    ToolCallsRequested,
    ToolNamesRunner,
    ToolPolicy,
    ToolTaskHandler,
    ToolTaskHandlers,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskPollOutcome,
    TurnCompleted,
    build_plan_note,
    context_summary_text,
)
from dex_agents.compaction import is_compaction_runner
from dex_agents.testing import SessionSide
from dex_agents.values import (
    AgentPlan,
    AgentPlanTask,
    ContextSummary,
    InteractionMode,
    PlanStatus,
    PlanTaskStatus,
    ToolCallStatus,
    ToolEffect,
)
from openai import AsyncAzureOpenAI, AsyncOpenAI

from dex_agents_openai_agents import UNKNOWN_TOOL_POLICY, OpenAIAgentsRunner
from dex_agents_openai_agents._call_metadata import model_call_metadata
from dex_agents_openai_agents.testing import (
    ScriptedAnswer,
    ScriptedResponsesModel,
    call_item,
    scripted_stream_events,
    text_item,
)
from tests.specifics_agents import hosted_git_tool


@function_tool
async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


def _agent(model: Model | None, instructions: str | None = None) -> Agent[None]:
    return Agent(name="orders", instructions=instructions, model=model, tools=[lookup_order])


def _start(runner: OpenAIAgentsRunner[Any], text: str, **context: Any) -> tuple[SessionSide, Any]:
    session = SessionSide(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)})
    session.start_turn(runner.build_user_message(text))
    return session, dataclasses.replace(session.context(), **context)


async def test_enabled_built_ins_are_offered_to_the_model_and_their_calls_left_to_the_session() -> None:
    ask = {"question": "Which warehouse?", "choices": ["Berlin", "Lyon"], "allows_free_text": False}
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("ask_user", ask, "ask-1"), call_item("lookup_order", {"order_id": "A-1"}, "look-1")],
            "Lyon it is; A-1 shipped.",
        ]
    )
    runner = OpenAIAgentsRunner(_agent(model))
    session, context = _start(runner, "Return A-1", enabled_built_in_tools=("ask_user", "durable_wait"))

    requested = await runner.run_model_step(context)

    assert isinstance(requested, ToolCallsRequested)
    assert model.calls[0].offered_tools == ["lookup_order", "ask_user", "durable_wait"]
    assert [(call.tool_name, call.policy) for call in requested.tool_calls] == [
        # The session records every built-in call as a read without approval, whatever a runner says.
        ("ask_user", ToolPolicy(ToolEffect.READ, requires_approval=False)),
        ("lookup_order", ToolPolicy(ToolEffect.READ)),
    ]
    assert json.loads(requested.tool_calls[0].arguments) == ask
    # The session answers the built-in itself; only the agent's own tool runs in a tool Step.
    session.defer(requested)
    answer = '{"status":"answered","answer":"Lyon"}'
    session.finish("ask-1", ToolCallStatus.SUCCEEDED, output=answer)
    session.finish("look-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "look-1"))

    final = await runner.run_model_step(dataclasses.replace(session.context(), **_built_ins()))

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.calls[1].tool_outputs() == {"ask-1": answer, "look-1": "A-1 shipped"}


def _built_ins() -> dict[str, Any]:
    return {"enabled_built_in_tools": ("ask_user", "durable_wait")}


async def test_a_built_in_that_the_session_does_not_enable_is_an_unknown_tool() -> None:
    model = ScriptedResponsesModel.from_answers([[call_item("write_todos", {"todos": []}, "plan-1")]])
    runner = OpenAIAgentsRunner(_agent(model))
    _, context = _start(runner, "Plan it")

    requested = await runner.run_model_step(context)

    assert not set(BUILT_IN_TOOL_NAMES) & set(model.calls[0].offered_tools)
    assert isinstance(requested, ToolCallsRequested)
    assert [(call.tool_name, call.policy) for call in requested.tool_calls] == [
        ("write_todos", UNKNOWN_TOOL_POLICY)
    ]


def _named_model(name: str, calls: list[str]) -> ScriptedResponsesModel:
    async def answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
        del items, offered
        calls.append(name)
        return ScriptedAnswer([text_item(f"{name} here")])

    return ScriptedResponsesModel(answer, model_name=name)


async def test_session_settings_choose_the_turns_model_and_add_instructions() -> None:
    calls: list[str] = []
    models = {"small": _named_model("small", calls), "large": _named_model("large", calls)}

    def model_for(settings: Mapping[str, object]) -> Model | None:
        chosen = settings.get("model")
        return models[str(chosen)] if chosen is not None else None

    def instructions_for(settings: Mapping[str, object]) -> str | None:
        language = settings.get("language")
        return f"Answer in {language}." if language else None

    runner = OpenAIAgentsRunner(
        _agent(models["small"], instructions="You handle orders."),
        model_for_settings=model_for,
        instructions_for_settings=instructions_for,
    )

    _, plain = _start(runner, "Hi")
    assert isinstance(await runner.run_model_step(plain), TurnCompleted)
    _, chosen = _start(runner, "Hi", session_settings={"model": "large", "language": "French"})
    outcome = await runner.run_model_step(chosen)

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert calls == ["small", "large"]
    assert models["small"].calls[0].instructions == "You handle orders."
    assert models["large"].calls[0].instructions == "You handle orders.\n\nAnswer in French."
    assert outcome.model_call_metadata is not None
    assert outcome.model_call_metadata.request_model == "large"


async def test_settings_instructions_follow_the_users_own_model_input_filter() -> None:
    model = ScriptedResponsesModel.from_answers(["Hello!"])

    def shout(data: CallModelData[Any]) -> ModelInputData:
        return ModelInputData(input=data.model_data.input, instructions=f"{data.model_data.instructions}!")

    runner = OpenAIAgentsRunner(
        _agent(model, instructions="Be brief"),
        run_config=RunConfig(call_model_input_filter=shout),
        instructions_for_settings=lambda settings: str(settings["note"]),
    )
    _, context = _start(runner, "Hi", session_settings={"note": "Mention A-1."})
    assert isinstance(await runner.run_model_step(context), TurnCompleted)
    assert model.calls[0].instructions == "Be brief!\n\nMention A-1."


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"model": "unknown"}, "KeyError: 'unknown'"),
        ({"model": 7}, "model_for_settings returned 7; return a model name, an agents.Model or None"),
    ],
)
async def test_settings_that_choose_no_usable_model_end_the_turn_before_any_model_call(
    settings: dict[str, object], error: str
) -> None:
    model = ScriptedResponsesModel.from_answers(["Hello!"])
    models: dict[object, Any] = {7: 7}

    def model_for(values: Mapping[str, object]) -> Any:
        chosen = values.get("model")
        return models[chosen] if chosen is not None else None

    runner = OpenAIAgentsRunner(_agent(model), model_for_settings=model_for)
    _, bad = _start(runner, "Hi", session_settings=settings)
    failed = await runner.run_model_step(bad)

    assert isinstance(failed, TurnCompleted)
    assert failed.turn_error == f"the session settings chose no usable model or instructions: {error}"
    assert model.calls == [] and failed.model_call_metadata is None
    # Settings the hook accepts make a normal turn.
    _, good = _start(runner, "Hi")
    assert isinstance(await runner.run_model_step(good), TurnCompleted)
    assert len(model.calls) == 1


async def test_every_outcome_reports_the_scripted_models_call_and_its_request_for_tracing() -> None:
    model = ScriptedResponsesModel.from_answers(
        [[call_item("lookup_order", {"order_id": "A-1"}, "look-1")], "A-1 shipped."], model_name="desk-model"
    )
    agent = dataclasses.replace(
        _agent(model, instructions="You are the order desk."),
        model_settings=ModelSettings(temperature=0.3, top_p=0.8, max_tokens=100),
        # The model sees an enabled handoff as a tool; a disabled one is not offered.
        handoffs=[Agent(name="billing"), handoff(Agent(name="returns"), is_enabled=False)],
    )
    # The run configuration's settings go over the agent's, as the SDK resolves them.
    run_config = RunConfig(model_settings=ModelSettings(max_tokens=250, presence_penalty=0.5))
    runner = OpenAIAgentsRunner(agent, run_config=run_config)
    session, context = _start(runner, "Where is A-1?")

    requested = await runner.run_model_step(context)
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("look-1", ToolCallStatus.SUCCEEDED, output="A-1 shipped")
    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    assert requested.model_call_metadata is not None and final.model_call_metadata is not None
    first_chunk = requested.model_call_metadata.time_to_first_chunk_seconds
    assert first_chunk is not None and 0 <= first_chunk < 5
    offered, billing = requested.model_call_metadata.tool_definitions
    assert (offered.name, offered.description, offered.tool_type) == (
        "lookup_order",
        "Look up an order.",
        "function",
    )
    assert (billing.name, billing.tool_type) == ("transfer_to_billing", "function")
    assert json.loads(offered.parameters or "")["required"] == ["order_id"]
    expected = ModelCallMetadata(
        "desk-model",
        "desk-model",
        "dex.scripted",
        "resp",
        ("tool_calls",),
        request_parameters=ModelRequestParameters(
            max_tokens=250, temperature=0.3, top_p=0.8, presence_penalty=0.5
        ),
        is_streaming=True,
        system_instructions="You are the order desk.",
        tool_definitions=(offered, billing),
    )
    assert dataclasses.replace(requested.model_call_metadata, time_to_first_chunk_seconds=None) == expected
    assert dataclasses.replace(final.model_call_metadata, time_to_first_chunk_seconds=None) == (
        dataclasses.replace(expected, finish_reasons=("stop",))
    )


class _OfflineResponsesModel(OpenAIResponsesModel):
    """The SDK's OpenAI Responses model, streaming a scripted answer instead of calling the API."""

    def __init__(self, model: str, client: AsyncOpenAI, answered_by: str) -> None:
        super().__init__(model=model, openai_client=client)
        self._answered_by = answered_by

    async def stream_response(  # pyright: ignore[reportIncompatibleMethodOverride]
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any | None = None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        answer = ScriptedAnswer([text_item("Hello!")])
        for event in scripted_stream_events(answer, response_id="resp_42", model_name=self._answered_by):
            yield event


class _NamedModels(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return ScriptedResponsesModel.from_answers(["Hello!"], model_name=str(model_name))


def _openai_model() -> Model:
    return _OfflineResponsesModel("gpt-4.1", AsyncOpenAI(api_key="test"), "gpt-4.1-2025-04-14")


def _azure_model() -> Model:
    client = AsyncAzureOpenAI(api_key="test", api_version="2025-03-01", azure_endpoint="https://x.invalid")
    return _OfflineResponsesModel("gpt-4.1", client, "gpt-4.1-2025-04-14")


@pytest.mark.parametrize(
    ("agent_model", "run_config", "expected"),
    [
        (
            _openai_model,
            RunConfig,
            ("gpt-4.1", "gpt-4.1-2025-04-14", "openai", "api.openai.com", 443),
        ),
        (
            _azure_model,
            RunConfig,
            ("gpt-4.1", "gpt-4.1-2025-04-14", "azure.ai.openai", "x.invalid", 443),
        ),
        # A name a custom provider resolves: the name is known, the provider and its endpoint are not.
        (
            lambda: None,
            lambda: RunConfig(model="litellm/anthropic/claude", model_provider=_NamedModels()),
            ("anthropic/claude", "litellm/anthropic/claude", None, None, None),
        ),
    ],
)
async def test_the_request_model_provider_and_endpoint_come_from_what_the_sdk_resolves_the_call_from(
    agent_model: Callable[[], Model | None],
    run_config: Callable[[], RunConfig],
    expected: tuple[str, str, str | None, str | None, int | None],
) -> None:
    runner = OpenAIAgentsRunner(_agent(agent_model()), run_config=run_config())
    _, context = _start(runner, "Hi")

    outcome = await runner.run_model_step(context)

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None, outcome
    metadata = outcome.model_call_metadata
    assert metadata is not None
    assert (
        metadata.request_model,
        metadata.response_model,
        metadata.provider_name,
        metadata.server_address,
        metadata.server_port,
    ) == expected
    assert metadata.finish_reasons == ("stop",)


def test_a_model_name_the_openai_provider_resolves_reports_the_providers_endpoint() -> None:
    # The SDK resolves the name with the run's provider, whose client names the endpoint; nothing is sent.
    local = OpenAIProvider(api_key="test", base_url="http://localhost:8080/v1")
    metadata = model_call_metadata("gpt-4.1", local, None)
    assert (metadata.request_model, metadata.server_address, metadata.server_port) == (
        "gpt-4.1",
        "localhost",
        8080,
    )
    # Without the run hooks' request the call is not described as streamed.
    assert not metadata.is_streaming and metadata.request_parameters == ModelRequestParameters()


async def _poll(poll: ToolTaskPoll) -> ToolTaskPollOutcome:
    del poll
    return ToolTaskPending(5)


def test_the_runner_polls_tasks_only_when_something_can_poll_them() -> None:
    plain = OpenAIAgentsRunner(_agent(None))
    with_tasks = OpenAIAgentsRunner(
        _agent(None), tool_tasks=ToolTaskHandlers({"lookup_order": ToolTaskHandler(poll=_poll)})
    )
    # The session tells tools whether `start_tool_task` may be used from this attribute.
    assert plain.poll_tool_task is None
    assert callable(with_tasks.poll_tool_task)


def test_compaction_and_plan_mode_are_accepted_when_the_flow_is_built() -> None:
    runner = OpenAIAgentsRunner(_agent(None))
    assert is_compaction_runner(runner)
    AgentSessionFlow(
        runner, flow_type="Compacting", options=AgentSessionOptions(compaction=CompactionPolicy(100_000))
    )
    planning = AgentSessionOptions(plan_mode_enabled=True, built_in_tools=("write_todos",))
    AgentSessionFlow(runner, flow_type="Planning", options=planning)


async def test_a_compaction_between_two_model_calls_of_a_turn_keeps_the_turns_items() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            "Hello.",
            [call_item("lookup_order", {"order_id": "A-1"}, "look-1")],
            "Summary of the greeting.",
            "A-1 shipped.",
        ]
    )
    runner = OpenAIAgentsRunner(_agent(model))
    session, context = _start(runner, "Hi")
    first = await runner.run_model_step(context)
    assert isinstance(first, TurnCompleted)
    session.store(first.new_messages)
    session.start_turn(runner.build_user_message("Where is A-1?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("look-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "look-1"))

    # The cut falls at the end of turn 1, never inside the running turn.
    cutoff = runner.select_compaction_cutoff(session.context(), retained_token_budget=1)
    assert cutoff == 2
    result = await runner.summarize_context(session.summary_request(cutoff))
    assert result.text == "Summary of the greeting."
    assert model.calls[2].offered_tools == []
    assert model.calls[2].input_items == [
        {"role": "user", "content": "The conversation:\nuser: Hi\nassistant: Hello."}
    ]
    summary = ContextSummary(1, 1, cutoff, result.text, "2026-12-02T00:00:00Z")
    compacted = dataclasses.replace(
        session.context(),
        messages=tuple(m for m in session.messages if m.sequence > cutoff),
        context_summary=summary,
    )
    final = await runner.run_model_step(compacted)

    assert isinstance(final, TurnCompleted) and final.turn_error is None, final
    seen = model.calls[3].input_items
    assert seen[:2] == [
        {"role": "user", "content": context_summary_text(summary)},
        {"role": "user", "content": "Where is A-1?"},
    ]
    assert model.calls[3].tool_outputs() == {"look-1": "A-1 shipped"}
    assert [m.text for m in final.new_messages if m.text] == ["A-1 shipped."]


async def test_a_planning_turn_offers_only_write_todos_and_the_plan_note_precedes_the_next_turn() -> None:
    todos = {"todos": [{"content": "Look up A-1", "status": "pending"}]}
    model = ScriptedResponsesModel.from_answers(
        [[call_item("write_todos", todos, "plan-1")], "Planned.", "A-1 shipped."]
    )
    billing = Agent[None](name="billing", model=model)
    agent = Agent[None](
        name="orders",
        model=model,
        tools=[lookup_order, WebSearchTool()],
        handoffs=[billing],
    )
    runner = OpenAIAgentsRunner(agent)
    built_ins = ("ask_user", "write_todos")
    session, context = _start(
        runner, "Plan A-1", interaction_mode=InteractionMode.PLANNING, enabled_built_in_tools=built_ins
    )

    requested = await runner.run_model_step(context)

    assert isinstance(requested, ToolCallsRequested)
    # Nothing but write_todos: no tool of the agent, no hosted tool, no handoff, no other built-in.
    assert model.calls[0].offered_tools == ["write_todos"]
    assert model.calls[0].input_items[0] == {
        "role": "user",
        "content": build_plan_note(None, InteractionMode.PLANNING),
    }
    session.defer(requested)
    session.finish("plan-1", ToolCallStatus.SUCCEEDED, output="plan revision 1 written")
    plan = AgentPlan(
        revision=1,
        status=PlanStatus.DRAFT,
        tasks=(AgentPlanTask("Look up A-1", PlanTaskStatus.PENDING),),
        updated_at="2026-12-02T00:00:00Z",
    )
    planning = {"interaction_mode": InteractionMode.PLANNING, "enabled_built_in_tools": built_ins}
    final = await runner.run_model_step(dataclasses.replace(session.context(), plan=plan, **planning))
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    # The plan the call wrote shows at the next model call; the note is never stored.
    assert model.calls[1].input_items[0] == {
        "role": "user",
        "content": build_plan_note(plan, InteractionMode.PLANNING),
    }
    assert all("[Dex]" not in (m.text or "") for m in final.new_messages)
    session.store(final.new_messages)

    session.start_turn(runner.build_user_message("Go ahead"))
    chat = dataclasses.replace(session.context(), plan=plan, enabled_built_in_tools=built_ins)
    done = await runner.run_model_step(chat)

    assert isinstance(done, TurnCompleted) and done.turn_error is None
    assert model.calls[2].offered_tools == [
        "lookup_order",
        "web_search",
        "ask_user",
        "write_todos",
        "transfer_to_billing",
    ]
    note = {"role": "user", "content": build_plan_note(plan, InteractionMode.CHAT)}
    # Right before the turn's own message, after the earlier turn.
    assert model.calls[2].input_items[-2:] == [note, {"role": "user", "content": "Go ahead"}]
    assert [item for item in model.calls[2].input_items if item == note] == [note]


def test_agent_tool_names_lists_every_agents_function_tools_unless_some_are_known_only_at_run_time() -> None:
    @function_tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        return order_id

    billing = Agent[None](name="billing", tools=[refund])
    triage = Agent[None](name="triage", tools=[lookup_order, WebSearchTool()], handoffs=[handoff(billing)])
    runner = OpenAIAgentsRunner(triage)
    assert isinstance(runner, ToolNamesRunner)
    assert runner.agent_tool_names() == {"lookup_order", "refund"}

    hosted = Agent[None](name="git", tools=[hosted_git_tool()])
    assert OpenAIAgentsRunner(Agent[None](name="a", handoffs=[hosted])).agent_tool_names() is None
    with_servers = Agent[None](name="stock", mcp_servers=[cast(Any, object())])
    assert OpenAIAgentsRunner(with_servers).agent_tool_names() is None
