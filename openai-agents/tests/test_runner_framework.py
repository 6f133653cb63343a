"""Framework behaviour of `OpenAIAgentsRunner`, driven the way the session drives it, without a server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pytest
from agents import (
    Agent,
    ApplyPatchTool,
    AsyncComputer,
    ComputerProvider,
    ComputerTool,
    CustomTool,
    GuardrailFunctionOutput,
    LocalShellTool,
    RunConfig,
    RunContextWrapper,
    ShellTool,
    Tool,
    TResponseInputItem,
    WebSearchTool,
    function_tool,
    handoff,
    input_guardrail,
    output_guardrail,
    tool_input_guardrail,
)
from agents.editor import ApplyPatchOperation
from agents.items import TResponseStreamEvent
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolGuardrailFunctionOutput, ToolInputGuardrailData
from agents.tracing import Span, Trace, TracingProcessor, get_trace_provider, set_trace_processors
from agents.tracing.provider import DefaultTraceProvider
from dex_agents import current_tool_execution
from dex_agents.runner import (
    STEERED_REJECTION_MESSAGE,
    TURN_CANCELLED_REJECTION_MESSAGE,
    ToolCallsRequested,
    ToolExecutionError,
    ToolPolicy,
    TurnCompleted,
    describe_tool_call_outcome,
)
from dex_agents.testing import ProjectedCall, SessionSide, check_message_projection
from dex_agents.values import AgentUsage, CancellationReason, MessageRole, ToolCallStatus, ToolEffect
from openai.types.responses import ResponseFunctionToolCall

from dex_agents_openai_agents import (
    HANDOFF_EVENT_TYPE,
    UNKNOWN_TOOL_POLICY,
    OpenAIAgentsRunner,
    UndeferrableToolError,
)
from dex_agents_openai_agents.testing import (
    ScriptedAnswer,
    ScriptedResponsesModel,
    call_item,
    reasoning_item,
    scripted_stream_events,
    text_item,
)
from tests.specifics_agents import hosted_git_answer, hosted_git_tool


def build_agent(model: ScriptedResponsesModel, runs: list[str], name: str = "assistant") -> Agent[Any]:
    @function_tool
    async def get_weather(city: str) -> str:
        """Return the weather of a city."""
        assert current_tool_execution() is not None, "the tool ran outside a tool Step"
        runs.append(f"get_weather {city}")
        return f"{city}: 21C, sunny"

    @function_tool
    async def delete_file(path: str) -> str:
        """Delete a file."""
        assert current_tool_execution() is not None, "the tool ran outside a tool Step"
        runs.append(f"delete_file {path}")
        return f"deleted {path}"

    return Agent(name=name, model=model, tools=[get_weather, delete_file])


def event_payloads(session: SessionSide, event_type: str) -> list[dict[str, Any]]:
    return [json.loads(event.payload) for event in session.events if event.type == event_type]


async def test_a_response_with_an_unknown_and_a_known_tool_defers_both_and_runs_only_the_known_one() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("launch_rocket", {}, "call-1"), call_item("get_weather", {"city": "Oslo"}, "call-2")],
            [text_item("Sorry, I cannot launch rockets.")],
        ]
    )
    runs: list[str] = []
    runner = OpenAIAgentsRunner(build_agent(model, runs))
    session = SessionSide(tool_policies={"get_weather": ToolPolicy(ToolEffect.READ)})
    session.start_turn(runner.build_user_message("Launch"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert len(model.calls) == 1
    assert [(c.tool_name, c.policy) for c in requested.tool_calls] == [
        ("launch_rocket", UNKNOWN_TOOL_POLICY),
        ("get_weather", ToolPolicy(ToolEffect.READ)),
    ]
    session.defer(requested)
    with pytest.raises(ToolExecutionError, match="launch_rocket not found"):
        await session.execute(runner, "call-1")
    session.finish("call-1", ToolCallStatus.FAILED, error="Tool launch_rocket not found in agent assistant")
    session.finish("call-2", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-2"))

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.calls) == 2
    assert "launch_rocket not found" in model.calls[1].tool_outputs()["call-1"]
    assert model.calls[1].tool_outputs()["call-2"] == "Oslo: 21C, sunny"
    assert runs == ["get_weather Oslo"]


async def test_executing_a_call_runs_the_real_tool_once_and_invalid_arguments_reach_the_model() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [
                call_item("get_weather", {"city": "Rome"}, "call-1"),
                call_item("get_weather", {"town": "x"}, "call-2"),
            ]
        ]
    )
    runs: list[str] = []
    runner = OpenAIAgentsRunner(build_agent(model, runs))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Rome"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    assert await session.execute(runner, "call-1") == "Rome: 21C, sunny"
    with pytest.raises(ToolExecutionError, match="Invalid JSON input for tool get_weather"):
        await session.execute(runner, "call-2")
    assert runs == ["get_weather Rome"]


async def test_an_exception_in_a_tool_fails_the_step_instead_of_becoming_model_text() -> None:
    @function_tool
    async def flaky(order_id: str) -> str:
        """Fail."""
        raise ConnectionError(f"backend down for {order_id}")

    model = ScriptedResponsesModel.from_answers([[call_item("flaky", {"order_id": "A-1"}, "call-1")]])
    runner = OpenAIAgentsRunner(Agent(name="a", model=model, tools=[flaky]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    # The session retries the Step or records the call by its effect; the SDK would have hidden it.
    with pytest.raises(ConnectionError, match="backend down for A-1"):
        await session.execute(runner, "call-1")


async def test_a_tool_execution_error_a_tool_raises_reaches_the_session_unchanged() -> None:
    @function_tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        raise ToolExecutionError(f"order {order_id} was already refunded")

    model = ScriptedResponsesModel.from_answers([[call_item("refund", {"order_id": "A-1"}, "call-1")]])
    runner = OpenAIAgentsRunner(Agent(name="a", model=model, tools=[refund]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("refund"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    with pytest.raises(ToolExecutionError, match="order A-1 was already refunded"):
        await session.execute(runner, "call-1")


async def test_every_final_record_is_stored_as_describe_tool_call_outcome_says() -> None:
    calls = [call_item("get_weather", {"city": f"c{n}"}, f"call-{n}") for n in range(5)]
    model = ScriptedResponsesModel.from_answers([calls, "Done."])
    runner = OpenAIAgentsRunner(build_agent(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("call-0", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-0"))
    session.finish("call-1", ToolCallStatus.FAILED, error="the weather service is down")
    session.finish("call-2", ToolCallStatus.REJECTED, rejection_message="Not that city.")
    session.finish("call-3", ToolCallStatus.REJECTED)
    session.finish("call-4", ToolCallStatus.OUTCOME_UNKNOWN)

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    stored = {m.tool_call_id: m.tool_output for m in final.new_messages if m.role is MessageRole.TOOL}
    assert stored == {call_id: describe_tool_call_outcome(r) for call_id, r in session.records.items()}
    # An abandoned call (steered) keeps the structured rejection verbatim, as compact JSON text.
    session.store(final.new_messages)
    again = ScriptedResponsesModel.from_answers([[call_item("get_weather", {"city": "Oslo"}, "call-9")]])
    runner = OpenAIAgentsRunner(build_agent(again, []))
    session.start_turn(runner.build_user_message("And Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.abandon("call-9", CancellationReason.STEERED)
    [*_, kept] = await session.end_turn_early(runner)
    assert kept.tool_output == STEERED_REJECTION_MESSAGE


async def test_tool_arguments_nested_too_deeply_for_the_sdk_end_the_turn_without_retries() -> None:
    deep = "[" * 1000 + "]" * 1000
    call = ResponseFunctionToolCall(
        id="deep-1",
        call_id="deep-1",
        name="get_weather",
        arguments=f'{{"city": {deep}}}',
        type="function_call",
        status="completed",
    )
    model = ScriptedResponsesModel.from_answers([[call]])
    runner = OpenAIAgentsRunner(build_agent(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    # The SDK parses the arguments while it plans the calls, inside the model Step; a retry would repeat it.
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "nested too deeply" in outcome.turn_error


async def test_a_handoff_makes_one_model_call_per_agent_and_reports_each() -> None:
    triage_model = ScriptedResponsesModel.from_answers([[call_item("transfer_to_billing", {}, "handoff-1")]])
    billing_model = ScriptedResponsesModel.from_answers(
        [
            [text_item("Refunding."), call_item("refund", {"order_id": "A-1"}, "call-1")],
            [text_item("Refunded A-1.")],
        ]
    )
    refunds: list[str] = []

    @function_tool
    async def refund(order_id: str) -> str:
        """Refund an order."""
        refunds.append(order_id)
        return f"refunded {order_id}"

    billing = Agent(name="billing", model=billing_model, tools=[refund])
    triage = Agent(name="triage", model=triage_model, handoffs=[handoff(billing)])
    runner = OpenAIAgentsRunner(triage)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Refund A-1"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert (len(triage_model.calls), len(billing_model.calls)) == (1, 1)
    assert requested.usage == AgentUsage(model_calls=2, input_tokens=20, output_tokens=10)
    assert [c.tool_name for c in requested.tool_calls] == ["refund"]
    assert refunds == []
    [event] = event_payloads(session, HANDOFF_EVENT_TYPE)
    assert (event["source_agent"], event["target_agent"]) == ("triage", "billing")
    assert [c["agent"] for c in event["model_calls"]] == ["triage", "billing"]
    assert event["model_calls"][0]["input_tokens"] == 10

    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-1"))
    final = await runner.run_model_step(session.context())

    # The run state kept the current agent: the billing agent answers, and triage is not called again.
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert (len(triage_model.calls), len(billing_model.calls)) == (1, 2)
    assert final.usage.model_calls == 1
    assert refunds == ["A-1"]
    assert final.new_messages[-1].text == "Refunded A-1."


async def test_a_tripped_input_guardrail_ends_the_turn_with_a_clear_error() -> None:
    @input_guardrail
    async def no_secrets(
        context: RunContextWrapper[Any], agent: Agent[Any], items: str | list[TResponseInputItem]
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info="secret", tripwire_triggered="password" in str(items))

    model = ScriptedResponsesModel.from_answers([[text_item("Here it is.")]])
    agent = Agent(name="a", model=model, input_guardrails=[no_secrets])
    runner = OpenAIAgentsRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("What is the admin password?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error == "input guardrail 'no_secrets' tripped"


async def test_a_turn_resumes_more_often_than_the_sdks_turn_limit() -> None:
    rounds = 4
    answers: list[Sequence[Any]] = [
        [call_item("get_weather", {"city": f"C{n}"}, f"call-{n}")] for n in range(rounds)
    ]
    model = ScriptedResponsesModel.from_answers([*answers, [text_item("All done.")]])
    runner = OpenAIAgentsRunner(build_agent(model, []), max_turns=2)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go"))
    for n in range(rounds):
        outcome = await runner.run_model_step(session.context())
        assert isinstance(outcome, ToolCallsRequested), outcome
        session.defer(outcome)
        session.finish(f"call-{n}", ToolCallStatus.SUCCEEDED, output=f"weather {n}")

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.calls) == rounds + 1


async def test_a_repeated_tool_call_id_ends_the_turn_instead_of_a_hidden_second_call() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("get_weather", {"city": "Oslo"}, "call-1")],
            [call_item("get_weather", {"city": "Oslo"}, "call-1")],
            [text_item("never reached")],
        ]
    )
    runner = OpenAIAgentsRunner(build_agent(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="Oslo: sunny")

    second = await runner.run_model_step(session.context())

    assert isinstance(second, TurnCompleted) and second.turn_error
    assert "second model call" in second.turn_error
    assert len(model.calls) == 2, "the runner must stop the SDK before a third model call"


async def _never_run_shell(request: Any) -> str:
    raise AssertionError("a refused tool ran")


async def _never_create_computer(*, run_context: RunContextWrapper[Any]) -> AsyncComputer:
    raise AssertionError("a refused tool ran")


async def _never_run_custom(ctx: ToolContext[Any], text: str) -> str:
    raise AssertionError("a refused tool ran")


class _NeverEditor:
    """An `ApplyPatchEditor` that the refused tool never gets to use."""

    def create_file(self, operation: ApplyPatchOperation) -> str:
        raise AssertionError("a refused tool ran")

    def update_file(self, operation: ApplyPatchOperation) -> str:
        raise AssertionError("a refused tool ran")

    def delete_file(self, operation: ApplyPatchOperation) -> str:
        raise AssertionError("a refused tool ran")


# Every local tool kind the SDK runs in the Worker inside its run loop (the docs' limits page).
_UNDEFERRABLE_TOOLS: dict[str, Callable[[], Tool]] = {
    "LocalShellTool": lambda: LocalShellTool(executor=_never_run_shell),
    "ShellTool": lambda: ShellTool(executor=_never_run_shell),
    "ComputerTool": lambda: ComputerTool(
        computer=ComputerProvider[AsyncComputer](create=_never_create_computer)
    ),
    "ApplyPatchTool": lambda: ApplyPatchTool(editor=_NeverEditor()),
    "CustomTool": lambda: CustomTool(
        name="raw", description="Take raw text.", on_invoke_tool=_never_run_custom
    ),
}


@pytest.mark.parametrize("kind", sorted(_UNDEFERRABLE_TOOLS))
def test_a_local_tool_the_sdk_cannot_defer_is_refused_and_a_hosted_tool_is_accepted(kind: str) -> None:
    model = ScriptedResponsesModel.from_answers([])
    tool = _UNDEFERRABLE_TOOLS[kind]()
    assert type(tool).__name__ == kind

    with pytest.raises(UndeferrableToolError, match=kind):
        OpenAIAgentsRunner(Agent(name="a", model=model, tools=[tool]))
    # Also behind a handoff, where the runner gates the target agent.
    target = Agent(name="b", model=model, tools=[_UNDEFERRABLE_TOOLS[kind]()])
    with pytest.raises(UndeferrableToolError, match=kind):
        OpenAIAgentsRunner(Agent(name="a", model=model, handoffs=[target]))
    OpenAIAgentsRunner(Agent(name="a", model=model, tools=[WebSearchTool()]))


class _RecordingProcessor(TracingProcessor):
    """Records the names of the traces and the types of the spans the SDK starts."""

    def __init__(self) -> None:
        self.traces: list[str] = []
        self.spans: list[str] = []
        self.exported: list[dict[str, Any]] = []

    def on_trace_start(self, trace: Trace) -> None:
        self.traces.append(trace.name)
        self.exported.append(trace.export() or {})

    def on_trace_end(self, trace: Trace) -> None:
        pass

    def on_span_start(self, span: Span[Any]) -> None:
        self.spans.append(span.span_data.type)

    def on_span_end(self, span: Span[Any]) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


@pytest.fixture
def recorded_traces() -> Iterator[_RecordingProcessor]:
    """Swap the SDK's trace processors (its OpenAI exporter among them) for a recorder, then restore them."""
    provider = get_trace_provider()
    assert isinstance(provider, DefaultTraceProvider)
    # The SDK has no public getter for its processors.
    original = list(provider._multi_processor._processors)  # pyright: ignore[reportPrivateUsage]
    recorder = _RecordingProcessor()
    set_trace_processors([recorder])
    try:
        yield recorder
    finally:
        set_trace_processors(original)


async def _one_model_step(runner: OpenAIAgentsRunner[Any]) -> None:
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, TurnCompleted) and not outcome.turn_error, outcome


async def test_tracing_to_openai_is_disabled_unless_the_user_enables_it(
    recorded_traces: _RecordingProcessor,
) -> None:
    model = ScriptedResponsesModel.from_answers([[text_item("Hello!")], [text_item("Hello again!")]])
    # The user's RunConfig asks for tracing under its workflow name; the runner still keeps it off.
    user_config = RunConfig(workflow_name="orders", tracing_disabled=False)
    await _one_model_step(OpenAIAgentsRunner(build_agent(model, []), run_config=user_config))
    assert len(model.calls) == 1
    assert (recorded_traces.traces, recorded_traces.spans) == ([], [])

    enabled = OpenAIAgentsRunner(build_agent(model, []), run_config=user_config, enable_tracing=True)
    await _one_model_step(enabled)
    assert len(model.calls) == 2
    assert recorded_traces.traces == ["orders"]
    assert "agent" in recorded_traces.spans, recorded_traces.spans
    # Every Step is its own SDK trace: the session ID groups them, and the metadata names the Step.
    [exported] = recorded_traces.exported
    assert exported["group_id"] == SessionSide().flow_id, exported
    assert exported["metadata"] == {
        "dex.flow.id": SessionSide().flow_id,
        "dex.agent.turn.id": "turn-1",
        "dex.step.execution_id": "RunModel-1",
        "dex.step.attempt": "1",
    }


@dataclass
class Shop:
    """A non-mapping run context, which the SDK could not serialize without a serializer."""

    currency: str


async def test_a_non_mapping_context_reaches_tools_across_a_resume_without_a_serializer() -> None:
    seen: list[str] = []

    @function_tool
    async def price(ctx: ToolContext[Shop], item: str) -> str:
        """Price an item."""
        seen.append(ctx.context.currency)
        return f"{item}: 3 {ctx.context.currency}"

    model = ScriptedResponsesModel.from_answers(
        [[call_item("price", {"item": "tea"}, "call-1")], [text_item("Tea is 3 EUR.")]]
    )
    runner = OpenAIAgentsRunner(Agent[Shop](name="shop", model=model, tools=[price]), context=Shop("EUR"))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Price of tea?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-1"))

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert seen == ["EUR"]
    assert model.calls[1].tool_outputs() == {"call-1": "tea: 3 EUR"}


async def test_a_tripped_output_guardrail_ends_the_turn_with_a_clear_error() -> None:
    @output_guardrail
    async def no_refund_promises(
        context: RunContextWrapper[Any], agent: Agent[Any], output: str
    ) -> GuardrailFunctionOutput:
        return GuardrailFunctionOutput(output_info=None, tripwire_triggered="refund" in output)

    model = ScriptedResponsesModel.from_answers([[text_item("I promise a full refund.")]])
    agent = Agent(name="a", model=model, output_guardrails=[no_refund_promises])
    runner = OpenAIAgentsRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Can I get my money back?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error == "output guardrail 'no_refund_promises' tripped"
    assert outcome.new_messages == () and outcome.usage.model_calls == 1


async def test_an_agent_used_as_a_tool_is_gated_and_makes_its_model_calls_in_the_tool_step() -> None:
    inner_model = ScriptedResponsesModel.from_answers([[text_item("Bonjour")]])
    translator = Agent(name="translator", model=inner_model)
    outer_model = ScriptedResponsesModel.from_answers(
        [[call_item("translate", {"input": "Hello"}, "call-1")], [text_item("It is Bonjour.")]]
    )
    outer = Agent(
        name="outer",
        model=outer_model,
        tools=[translator.as_tool(tool_name="translate", tool_description="Translate to French.")],
    )
    runner = OpenAIAgentsRunner(outer)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Say hello in French"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert len(inner_model.calls) == 0, "the nested agent must not run inside the model Step"
    session.defer(requested)
    output = await session.execute(runner, "call-1")
    assert output == "Bonjour" and len(inner_model.calls) == 1
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=output)
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.new_messages[-1].text == "It is Bonjour."
    assert len(inner_model.calls) == 1


async def test_tool_guardrails_run_around_the_real_tool_in_its_step_not_on_the_recorded_result() -> None:
    checked: list[str] = []

    @tool_input_guardrail
    def no_admin(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        checked.append(data.context.tool_arguments)
        if "admin" in data.context.tool_arguments:
            return ToolGuardrailFunctionOutput.reject_content("Blocked: admin files are off limits.")
        return ToolGuardrailFunctionOutput.allow()

    deleted: list[str] = []

    @function_tool(tool_input_guardrails=[no_admin])
    async def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"deleted {path}"

    model = ScriptedResponsesModel.from_answers(
        [
            [
                call_item("delete_file", {"path": "/admin/x"}, "call-1"),
                call_item("delete_file", {"path": "/tmp/y"}, "call-2"),
            ],
            [text_item("One deleted, one blocked.")],
        ]
    )
    runner = OpenAIAgentsRunner(Agent(name="a", model=model, tools=[delete_file]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Delete both"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    assert checked == [], "no guardrail runs in the model Step"
    session.defer(requested)
    for call_id in ("call-1", "call-2"):
        session.finish(call_id, ToolCallStatus.SUCCEEDED, output=await session.execute(runner, call_id))

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert deleted == ["/tmp/y"]
    assert len(checked) == 2, "each guardrail ran once, in its tool Step"
    assert model.calls[1].tool_outputs() == {
        "call-1": "Blocked: admin files are off limits.",
        "call-2": "deleted /tmp/y",
    }


async def test_a_tool_call_id_of_an_earlier_turn_can_be_used_again() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("get_weather", {"city": "Oslo"}, "call-1")],
            [text_item("Sunny.")],
            [call_item("get_weather", {"city": "Oslo"}, "call-1")],
            [text_item("Still sunny.")],
        ]
    )
    runs: list[str] = []
    runner = OpenAIAgentsRunner(build_agent(model, runs))
    session = SessionSide()
    for question in ("Weather in Oslo?", "And now?"):
        session.start_turn(runner.build_user_message(question))
        requested = await runner.run_model_step(session.context())
        assert isinstance(requested, ToolCallsRequested), requested
        session.defer(requested)
        session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "call-1"))
        final = await runner.run_model_step(session.context())
        assert isinstance(final, TurnCompleted) and final.turn_error is None, final
        session.store(final.new_messages)

    assert runs == ["get_weather Oslo", "get_weather Oslo"]
    assert len(model.calls) == 4


async def test_a_tool_the_sdk_asks_approval_for_waits_for_approval_unless_a_policy_waives_it() -> None:
    async def over_limit(context: RunContextWrapper[Any], parameters: dict[str, Any], call_id: str) -> bool:
        return int(parameters.get("amount", 0)) > 100

    @function_tool(needs_approval=True)
    async def wipe_disk(disk: str) -> str:
        """Wipe a disk."""
        return f"wiped {disk}"

    @function_tool(needs_approval=over_limit)
    async def pay(amount: int) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    model = ScriptedResponsesModel.from_answers(
        [
            [
                call_item("wipe_disk", {"disk": "sda"}, "call-1"),
                call_item("pay", {"amount": 500}, "call-2"),
                call_item("pay", {"amount": 5}, "call-3"),
            ]
        ]
    )
    runner = OpenAIAgentsRunner(Agent(name="a", model=model, tools=[wipe_disk, pay]))
    session = SessionSide(
        tool_policies={"wipe_disk": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)},
        default_tool_effect=ToolEffect.READ,
    )
    session.start_turn(runner.build_user_message("Wipe sda, pay 500 and 5"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, ToolCallsRequested)
    # The session's explicit policy wins for wipe_disk; pay keeps the SDK's own approval rule per call.
    assert [(c.tool_call_id, c.policy) for c in outcome.tool_calls] == [
        ("call-1", ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)),
        ("call-2", ToolPolicy(ToolEffect.READ, requires_approval=True)),
        ("call-3", ToolPolicy(ToolEffect.READ)),
    ]


class _StreamUntilCancelled(ScriptedResponsesModel):
    """Streams one text delta, then waits for more of the response until its stream is closed."""

    def __init__(self) -> None:
        super().__init__(self._never_answer)
        self.started = asyncio.Event()
        self.closed: list[str] = []

    async def _never_answer(self, items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
        raise AssertionError("the stream never asks for a whole answer")

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        first = next(scripted_stream_events(ScriptedAnswer([text_item("Thinking")])))
        try:
            yield first
            self.started.set()
            await asyncio.Event().wait()
        finally:
            for _ in range(3):  # closing a network stream takes event-loop turns of its own
                await asyncio.sleep(0)
            self.closed.append("stream closed")


async def test_a_cancelled_model_step_has_closed_its_model_stream_when_the_cancellation_ends() -> None:
    model = _StreamUntilCancelled()
    runner = OpenAIAgentsRunner(Agent(name="a", model=model))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))
    step = asyncio.create_task(runner.run_model_step(session.context()))
    await asyncio.wait_for(model.started.wait(), timeout=10)

    step.cancel()
    with pytest.raises(asyncio.CancelledError):
        await step

    # No event-loop turn in between: the Step's cancellation ends only after the SDK's run task did.
    assert model.closed == ["stream closed"]
    assert asyncio.all_tasks() == {asyncio.current_task()}, "the SDK's run task is still going"
    assert session.text_deltas() == ["Thinking"]


@pytest.mark.parametrize("decision", ["approved", "rejected", "outcome_unknown"])
async def test_a_hosted_mcp_approval_request_is_a_deferred_approval_answered_the_sdks_way(
    decision: str,
) -> None:
    model = ScriptedResponsesModel(hosted_git_answer)
    runner = OpenAIAgentsRunner(Agent(name="a", model=model, tools=[hosted_git_tool()]))
    # A default that needs no approval: the provider's request still waits for one.
    session = SessionSide(default_tool_effect=ToolEffect.READ)
    session.start_turn(runner.build_user_message("Delete branch old"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested), requested
    [call] = requested.tool_calls
    assert (call.tool_call_id, call.tool_name, call.arguments) == (
        "mcpr-1",
        "delete_branch",
        '{"branch":"old"}',
    )
    assert call.policy == ToolPolicy(ToolEffect.READ, requires_approval=True)
    session.defer(requested)
    if decision == "approved":
        session.finish("mcpr-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "mcpr-1"))
    elif decision == "rejected":
        session.finish("mcpr-1", ToolCallStatus.REJECTED, rejection_message="Keep that branch.")
    else:
        session.finish("mcpr-1", ToolCallStatus.OUTCOME_UNKNOWN)

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None, final
    # The SDK answered the request with its own response item in the next model call's input.
    response = cast(Mapping[str, Any], model.calls[1].input_items[-1])
    record = session.records["mcpr-1"]
    assert response["type"] == "mcp_approval_response" and response["approval_request_id"] == "mcpr-1"
    assert response["approve"] is (decision == "approved")
    messages = final.new_messages
    tool = next(m for m in messages if m.role is MessageRole.TOOL)
    assert (tool.tool_call_id, tool.tool_name) == ("mcpr-1", "delete_branch")
    assert tool.tool_output == describe_tool_call_outcome(record)
    if decision == "approved":
        assert messages[-1].text == "Deleted branch old."
        assert json.loads(messages[-2].framework_item)["output"] == "branch old deleted"
    else:
        assert response["reason"] == describe_tool_call_outcome(record)
        assert messages[-1].text == f"Not deleted: {describe_tool_call_outcome(record)}"
    check_message_projection(
        messages[:-1] if decision != "approved" else messages[:-2],
        response_text="Asking first.",
        calls=[ProjectedCall("mcpr-1", "delete_branch", {"branch": "old"})],
        outputs={"mcpr-1": describe_tool_call_outcome(record)},
    )
    # The next turn hands the SDK the stored items as they are.
    session.store(final.new_messages)
    session.start_turn(runner.build_user_message("Thanks"))
    again = await runner.run_model_step(session.context())
    assert isinstance(again, ToolCallsRequested) and again.tool_calls[0].tool_call_id != "mcpr-1"


async def test_a_turn_that_ends_during_a_hosted_mcp_approval_keeps_a_rejection_for_the_request() -> None:
    model = ScriptedResponsesModel(hosted_git_answer)
    runner = OpenAIAgentsRunner(Agent(name="a", model=model, tools=[hosted_git_tool()]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Delete branch old"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.abandon("mcpr-1", CancellationReason.TURN_CANCELLED)

    kept = await session.end_turn_early(runner)

    record_text = TURN_CANCELLED_REJECTION_MESSAGE
    assert json.loads(kept[-1].framework_item) == {
        "type": "mcp_approval_response",
        "approval_request_id": "mcpr-1",
        "approve": False,
        "reason": record_text,
    }
    assert kept[-1].tool_output == record_text


async def test_reasoning_summaries_stream_as_reasoning_deltas_and_text_as_text_deltas() -> None:
    model = ScriptedResponsesModel.from_answers(
        [[reasoning_item("The user greets me. I greet back."), text_item("Hello there!")]]
    )
    runner = OpenAIAgentsRunner(Agent(name="a", model=model))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    reasoning_text = "".join(payload["text"] for payload in event_payloads(session, "reasoning_delta"))
    assert reasoning_text == "The user greets me. I greet back."
    assert "".join(session.text_deltas()) == "Hello there!"
    # The reasoning item is stored too, so the next turn hands it back to the SDK unchanged.
    assert [(m.role, m.text) for m in outcome.new_messages] == [
        (MessageRole.ASSISTANT, None),
        (MessageRole.ASSISTANT, "Hello there!"),
    ]
    assert json.loads(outcome.new_messages[0].framework_item)["type"] == "reasoning"


async def test_the_next_turn_starts_with_the_agent_the_conversation_was_handed_off_to() -> None:
    for resume_last_agent, expected in ((True, (1, 2)), (False, (2, 1))):
        triage_model = ScriptedResponsesModel.from_answers(
            [[call_item("transfer_to_billing", {}, "handoff-1")], "Triage again."]
        )
        billing_model = ScriptedResponsesModel.from_answers(["Billing here.", "Still billing."])
        billing = Agent(name="billing", model=billing_model)
        triage = Agent(name="triage", model=triage_model, handoffs=[billing])
        runner = OpenAIAgentsRunner(triage, resume_last_agent=resume_last_agent)
        session = SessionSide()
        session.start_turn(runner.build_user_message("Billing question"))
        first = await runner.run_model_step(session.context())
        assert isinstance(first, TurnCompleted) and first.new_messages[-1].text == "Billing here."
        session.store(first.new_messages)
        session.start_turn(runner.build_user_message("Another one"))

        second = await runner.run_model_step(session.context())

        assert isinstance(second, TurnCompleted) and second.turn_error is None
        assert (len(triage_model.calls), len(billing_model.calls)) == expected


async def test_the_run_state_does_not_repeat_the_stored_conversation() -> None:
    model = ScriptedResponsesModel.from_answers(
        [[call_item("get_weather", {"city": "Oslo"}, "call-1")], [text_item("Sunny.")]]
    )
    runner = OpenAIAgentsRunner(build_agent(model, []))
    session = SessionSide()
    for number in range(10):
        session.start_turn(runner.build_user_message(f"question {number} " + "x" * 2000))
        session.store([runner.build_user_message(f"answer {number}")])
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    history_bytes = sum(len(message.framework_item) for message in session.messages)

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert history_bytes > 20_000 and len(requested.framework_run_state) < 10_000
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="Oslo: sunny")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    # The model saw the whole conversation again, and only the turn's own items are new.
    assert len(model.calls[1].input_items) == len(session.messages) + 2
    assert [m.role for m in final.new_messages] == [
        MessageRole.ASSISTANT,
        MessageRole.TOOL,
        MessageRole.ASSISTANT,
    ]


async def test_an_unknown_tool_after_a_resume_keeps_the_whole_turn() -> None:
    model = ScriptedResponsesModel.from_answers(
        [
            [call_item("get_weather", {"city": "Oslo"}, "call-1")],
            [call_item("launch_rocket", {}, "call-2")],
            [text_item("Oslo is sunny; no rockets.")],
        ]
    )
    runner = OpenAIAgentsRunner(build_agent(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather, then a rocket"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="Oslo: sunny")

    second = await runner.run_model_step(session.context())

    assert isinstance(second, ToolCallsRequested)
    assert [(c.tool_call_id, c.policy) for c in second.tool_calls] == [("call-2", UNKNOWN_TOOL_POLICY)]
    session.defer(second)
    session.finish("call-2", ToolCallStatus.FAILED, error="Tool launch_rocket not found in agent assistant")
    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.calls) == 3
    assert model.calls[2].tool_outputs() == {
        "call-1": "Oslo: sunny",
        "call-2": "The tool call failed: Tool launch_rocket not found in agent assistant",
    }
    assert [(m.role, m.tool_call_id) for m in final.new_messages] == [
        (MessageRole.ASSISTANT, "call-1"),
        (MessageRole.TOOL, "call-1"),
        (MessageRole.ASSISTANT, "call-2"),
        (MessageRole.TOOL, "call-2"),
        (MessageRole.ASSISTANT, None),
    ]
