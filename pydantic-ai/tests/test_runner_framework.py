"""The runner against Pydantic AI's real agent loop with a scripted model, without a server.

Each test plays the session's side of the runner contract (`dex_agents.testing.SessionSide`) and asserts
what a user of the session would notice: which calls become Steps, what the model sees, what is stored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from dex_agents import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentEventWriter,
    DeferredToolCall,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionError,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.testing import SessionSide
from pydantic import BaseModel
from pydantic_ai import (
    Agent,
    AgentRun,
    ApprovalRequired,
    CallDeferred,
    ModelRequestNode,
    ModelRetry,
    RunContext,
)
from pydantic_ai.capabilities import AbstractCapability, ValidatedToolArgs, WebSearch, WrapToolExecuteHandler
from pydantic_ai.messages import (
    BaseToolReturnPart,
    ModelMessage,
    ModelRequest,
    NativeToolCallPart,
    NativeToolReturnPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import (
    AgentInfo,
    BuiltinToolCallsReturns,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)
from pydantic_ai.tools import ToolDefinition
from pydantic_graph import End

from dex_agents_pydantic_ai import PydanticAiRunner, _runner
from dex_agents_pydantic_ai._system_prompts import (
    _first_request_system_prompts,  # pyright: ignore[reportPrivateUsage]
    system_prompt_request,
)
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.support import respond, tool_call


def build_agent(model: ScriptedModel, runs: list[str]) -> Agent[None, str]:
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        runs.append(f"get_weather {city}")
        return f"sunny in {city}"

    def delete_file(path: str) -> str:
        """Delete a file."""
        runs.append(f"delete_file {path}")
        return f"deleted {path}"

    def flaky(attempt: int) -> str:
        """Ask the model to try again."""
        raise ModelRetry(f"attempt {attempt} was too early")

    def crash() -> str:
        """Fail like a broken dependency."""
        raise ConnectionError("backend unreachable")

    return Agent(
        model,
        instructions="You help with the weather and with files.",
        tools=[get_weather, delete_file, flaky, crash],
    )


async def test_resuming_shows_the_model_every_recorded_result_through_pydantic_ais_own_results() -> None:
    model = ScriptedModel(
        [
            respond(
                tool_call("get_weather", {"city": "Paris"}, "call-1"),
                tool_call("delete_file", {"path": "/a"}, "call-2"),
                tool_call("delete_file", {"path": "/b"}, "call-3"),
                tool_call("delete_file", {"path": "/c"}, "call-4"),
            ),
            respond(TextPart("Paris is sunny; I deleted nothing for sure.")),
        ]
    )
    runs: list[str] = []
    runner = PydanticAiRunner(build_agent(model, runs))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather, then delete three files"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny in Paris")
    session.finish("call-2", ToolCallStatus.REJECTED, rejection_message="Never delete /a.")
    session.finish("call-3", ToolCallStatus.FAILED, error="disk is read-only")
    session.finish("call-4", ToolCallStatus.OUTCOME_UNKNOWN, error="Worker lost")

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    assert final.turn_error is None
    assert len(model.calls) == 2
    seen = {
        part.tool_call_id: (part.outcome, part.model_response_str()) for part in model.calls[1].tool_returns
    }
    assert seen["call-1"] == ("success", "sunny in Paris")
    # A rejection reaches the model as a denial carrying the user's message, not as a tool result.
    assert seen["call-2"][0] == "denied"
    assert "Never delete /a." in seen["call-2"][1]
    assert seen["call-3"][0] == "failed"
    assert "The tool call failed: disk is read-only" in seen["call-3"][1]
    assert seen["call-4"][0] == "failed"
    assert OUTCOME_UNKNOWN_TOOL_RESULT in seen["call-4"][1]
    assert runs == []

    # Every message of the turn is stored after the user message: one per call, one per result, the answer.
    roles = [message.role for message in final.new_messages]
    assert roles == [*[MessageRole.ASSISTANT] * 4, *[MessageRole.TOOL] * 4, MessageRole.ASSISTANT]
    tool_messages = final.new_messages[4:8]
    assert [message.tool_call_id for message in tool_messages] == ["call-1", "call-2", "call-3", "call-4"]
    assert tool_messages[0].tool_name == "get_weather"
    assert json.loads(tool_messages[0].tool_arguments or "") == {"city": "Paris"}
    assert tool_messages[0].tool_output == "sunny in Paris"
    assert final.new_messages[-1].text == "Paris is sunny; I deleted nothing for sure."
    assert final.usage.model_calls == 1


async def test_executing_a_call_runs_the_real_tool_once_through_pydantic_ai() -> None:
    model = ScriptedModel(
        [
            respond(
                tool_call("get_weather", {"city": "Rome"}, "ok"),
                tool_call("get_weather", {"town": "Rome"}, "invalid"),
                tool_call("flaky", {"attempt": 1}, "retry"),
                tool_call("crash", {}, "crash"),
            )
        ]
    )
    runs: list[str] = []
    runner = PydanticAiRunner(build_agent(model, runs))
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)

    assert await session.execute(runner, "ok") == "sunny in Rome"
    assert runs == ["get_weather Rome"]
    # Pydantic AI validates the arguments: the model sees the validation error, the tool does not run.
    with pytest.raises(ToolExecutionError, match="city"):
        await session.execute(runner, "invalid")
    with pytest.raises(ToolExecutionError, match="attempt 1 was too early"):
        await session.execute(runner, "retry")
    # Any other exception is a Step failure, which the session retries or records by the tool's effect.
    with pytest.raises(ConnectionError):
        await session.execute(runner, "crash")
    assert runs == ["get_weather Rome"]
    assert len(model.calls) == 1, "running a tool never calls the model"


class Forecast(BaseModel):
    city: str
    temperature_c: int


async def test_structured_output_next_to_a_function_call_defers_only_the_function_call() -> None:
    model = ScriptedModel(
        [
            respond(
                TextPart("Here is the forecast."),
                tool_call("get_weather", {"city": "Lima"}, "call-1"),
                tool_call("final_result", {"city": "Lima", "temperature_c": 21}, "output-1"),
            )
        ]
    )
    runs: list[str] = []

    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        runs.append(city)
        return "21C"

    agent = Agent(model, output_type=Forecast, tools=[get_weather])
    runner = PydanticAiRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Forecast for Lima"))

    first = await runner.run_model_step(session.context())

    assert isinstance(first, ToolCallsRequested)
    assert [call.tool_name for call in first.tool_calls] == ["get_weather"], (
        "the output tool is never deferred"
    )
    session.defer(first)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="21C")

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    assert final.turn_error is None
    assert len(model.calls) == 1, (
        "Pydantic AI ends the run with the output tool's result after the tool results"
    )
    assert final.usage.model_calls == 0
    answer = final.new_messages[0]
    assert answer.role is MessageRole.ASSISTANT and answer.tool_call_id is None
    preamble, output = (answer.text or "").split("\n\n")
    assert preamble == "Here is the forecast."
    assert json.loads(output) == {"city": "Lima", "temperature_c": 21}
    # The output tool call is a call of the response like any other, and its result is stored with it.
    assert [(message.role, message.tool_call_id) for message in final.new_messages[1:]] == [
        (MessageRole.ASSISTANT, "call-1"),
        (MessageRole.ASSISTANT, "output-1"),
        (MessageRole.TOOL, "call-1"),
        (MessageRole.TOOL, "output-1"),
    ]
    assert runs == []


async def test_output_that_needs_a_retry_ends_the_turn_with_turn_error_after_one_model_call() -> None:
    model = ScriptedModel([respond(TextPart("it is warm"))])
    agent = Agent(model, output_type=Forecast)
    runner = PydanticAiRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Forecast for Lima"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert len(model.calls) == 1
    assert outcome.turn_error is not None
    assert "could not be used as the agent's output" in outcome.turn_error
    # The answer and Pydantic AI's feedback are kept, so the next turn's model knows what went wrong.
    assert [message.role for message in outcome.new_messages] == [MessageRole.ASSISTANT, MessageRole.USER]


async def test_text_arrives_as_live_deltas_that_add_up_to_the_stored_text() -> None:
    model = ScriptedModel([respond(TextPart("It is sunny and warm today."))])
    runner = PydanticAiRunner(Agent(model))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    deltas = session.text_deltas()
    assert deltas == ["It ", "is ", "sunny ", "and ", "warm ", "today."]
    assert "".join(deltas) == outcome.new_messages[-1].text
    assert all(event.step_execution_id == "RunModel-1" and event.attempt == 1 for event in session.events)


async def test_a_turn_failure_note_and_queued_messages_reach_the_model_as_user_text() -> None:
    model = ScriptedModel([respond(TextPart("Understood."))])
    runner = PydanticAiRunner(Agent(model))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Refund order 7"))
    note = "[Dex] The previous turn failed after these tool calls ran:\n- refund {} -> succeeded: done"
    session.store([runner.build_user_message(note)])
    session.start_turn(runner.build_user_message("Did it work?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert model.calls[0].user_prompts == ["Refund order 7", note, "Did it work?"]


async def test_a_tool_the_agent_requires_approval_for_waits_for_approval_unless_a_policy_waives_it() -> None:
    model = ScriptedModel(
        [
            respond(
                tool_call("wire_money", {"amount": 5}, "call-1"),
                tool_call("wire_money", {"amount": 6}, "call-2"),
            )
        ]
    )
    agent = Agent(model)

    @agent.tool_plain(requires_approval=True)
    def wire_money(amount: int) -> str:  # pyright: ignore[reportUnusedFunction]
        """Wire money."""
        return f"wired {amount}"

    runner = PydanticAiRunner(agent)
    session = SessionSide(tool_policies={})
    session.start_turn(runner.build_user_message("wire"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    assert all(call.policy.is_approval_required for call in outcome.tool_calls)

    waived = SessionSide(tool_policies={"wire_money": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE)})
    waived.start_turn(runner.build_user_message("wire"))
    outcome = await runner.run_model_step(waived.context())
    assert isinstance(outcome, ToolCallsRequested)
    assert not any(call.policy.is_approval_required for call in outcome.tool_calls)


def test_end_strategy_early_is_refused_because_the_model_would_be_told_a_step_never_ran() -> None:
    with pytest.raises(ValueError, match="end_strategy='early'"):
        PydanticAiRunner(Agent(ScriptedModel([]), end_strategy="early"))


async def test_thinking_streams_as_reasoning_deltas() -> None:
    async def think_then_answer(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaThinkingCalls]:
        del messages, info
        yield {0: DeltaThinkingPart(content="The user wants ")}
        yield {0: DeltaThinkingPart(content="the weather.")}
        yield "Sunny."

    runner = PydanticAiRunner(Agent(FunctionModel(stream_function=think_then_answer)))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    reasoning = [
        json.loads(event.payload)["text"] for event in session.events if event.type == "reasoning_delta"
    ]
    assert reasoning == ["The user wants ", "the weather."]
    assert session.text_deltas() == ["Sunny."]


async def test_messages_another_runner_stored_end_the_turn_with_a_clear_error() -> None:
    model = ScriptedModel([])
    runner = PydanticAiRunner(Agent(model))
    session = SessionSide()
    session.start_turn(
        FrameworkMessage(role=MessageRole.USER, framework_item='{"role": "user", "text": "hi"}', text="hi")
    )

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "not a Pydantic AI message" in outcome.turn_error
    assert len(model.calls) == 0


async def test_a_tool_step_runs_a_tool_that_requires_approval_and_refuses_one_that_defers_itself() -> None:
    model = ScriptedModel([respond(tool_call("guarded", {}, "call-1"), tool_call("defers", {}, "call-2"))])
    agent = Agent(model)

    @agent.tool
    def guarded(context: RunContext[object]) -> str:  # pyright: ignore[reportUnusedFunction]
        """Run only when approved."""
        if not context.tool_call_approved:
            raise ApprovalRequired()
        return "ran after approval"

    @agent.tool_plain
    def defers() -> str:  # pyright: ignore[reportUnusedFunction]
        """Defer itself."""
        raise CallDeferred()

    runner = PydanticAiRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)

    assert await session.execute(runner, "call-1") == "ran after approval"
    with pytest.raises(ToolExecutionError, match="could not run tool 'defers'"):
        await session.execute(runner, "call-2")


async def test_system_prompts_reach_every_model_call_once_without_being_stored() -> None:
    model = ScriptedModel([respond(TextPart("Hi.")), respond(TextPart("Still here."))])
    agent = Agent(model, system_prompt="You are terse.")

    @agent.system_prompt
    def today() -> str:  # pyright: ignore[reportUnusedFunction]
        return "Today is Sunday."

    runner = PydanticAiRunner(agent)
    session = SessionSide()
    for text in ("Hello", "Are you there?"):
        session.start_turn(runner.build_user_message(text))
        outcome = await runner.run_model_step(session.context())
        assert isinstance(outcome, TurnCompleted)
        session.store(outcome.new_messages)

    for call_number in (1, 2):
        system_prompts = [
            part.content
            for message in model.calls[call_number - 1].messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, SystemPromptPart)
        ]
        assert system_prompts == ["You are terse.", "Today is Sunday."]
    assert [message.role for message in session.messages] == [MessageRole.USER, MessageRole.ASSISTANT] * 2
    assert all("You are terse." not in message.framework_item for message in session.messages)


def _system_parts(request: ModelRequest) -> list[tuple[str, str | None]]:
    return [(part.content, part.dynamic_ref) for part in request.parts if isinstance(part, SystemPromptPart)]


async def test_static_system_prompts_are_the_parts_a_fresh_run_makes_without_entering_one() -> None:
    agent = Agent(ScriptedModel([]), system_prompt=["You are terse.", "Answer in English."])
    entered: list[object] = []
    iterate = agent.iter

    def counting_iter(*args: Any, **kwargs: Any) -> Any:
        entered.append(args)
        return iterate(*args, **kwargs)

    agent.iter = counting_iter  # type: ignore[method-assign]
    fast = await system_prompt_request(agent, deps=None, model=None)
    assert entered == []
    slow = await _first_request_system_prompts(agent, deps=None, model=None)
    assert fast is not None and slow is not None
    assert (
        _system_parts(fast)
        == _system_parts(slow)
        == [
            ("You are terse.", None),
            ("Answer in English.", None),
        ]
    )
    assert len(fast.parts) == len(slow.parts)
    assert await system_prompt_request(Agent(ScriptedModel([])), deps=None, model=None) is None

    @agent.system_prompt
    def today() -> str:  # pyright: ignore[reportUnusedFunction]
        return "Today is Sunday."

    with_function = await system_prompt_request(agent, deps=None, model=None)
    assert with_function is not None and _system_parts(with_function)[-1] == ("Today is Sunday.", None)
    assert len(entered) == 2  # a prompt function needs the run


async def test_a_model_pydantic_ai_cannot_set_up_ends_the_turn_instead_of_being_retried() -> None:
    runner = PydanticAiRunner(Agent(), model="openai:gpt-4.1")
    session = SessionSide()
    session.start_turn(runner.build_user_message("hi"))

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "OPENAI_API_KEY" in outcome.turn_error
    assert outcome.usage.model_calls == 0


@dataclass
class NoteToolExecution(AbstractCapability[Any]):
    """An application capability that notes every tool execution it wraps."""

    notes: list[str]

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> object:
        self.notes.append(call.tool_name)
        return await handler(args)


async def run_like_agent_run(run: AgentRun[None, str], events: AgentEventWriter, watch: object) -> object:
    """What a regression (in Pydantic AI or in the runner) would look like: the loop runs to its end."""
    del events, watch
    node = run.next_node
    while not isinstance(node, End):
        if isinstance(node, ModelRequestNode):
            async with node.stream(run.ctx) as stream:
                async for _ in stream:
                    pass
        node = await run.next(node)
    return _runner._Stop(_runner._Boundary.END, output=node.data.output)  # pyright: ignore[reportPrivateUsage]


async def test_a_tool_pydantic_ai_reaches_in_a_model_step_is_stopped_before_its_body_runs() -> None:
    model = ScriptedModel([respond(tool_call("get_weather", {"city": "Oslo"}, "call-1"))])
    runs: list[str] = []
    hooks: list[str] = []

    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        runs.append(f"get_weather {city}")
        return f"sunny in {city}"

    agent = Agent(model, tools=[get_weather], capabilities=[NoteToolExecution(hooks)])
    runner = PydanticAiRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_runner, "_run_to_boundary", run_like_agent_run)
        outcome = await runner.run_model_step(session.context())

    assert runs == [], "the tool's body never runs in a model Step, so a retry cannot repeat it"
    assert hooks == [], "nor does the agent's own tool hook"
    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is not None
    assert "'get_weather' (call 'call-1') inside the model Step" in outcome.turn_error
    assert list(outcome.new_messages) == [] and outcome.usage.model_calls == 1
    # The session stays usable: the next turn's model call asks again, and the call is deferred this time.
    session.start_turn(runner.build_user_message("Please try again"))
    after = await runner.run_model_step(session.context())
    assert isinstance(after, ToolCallsRequested) and [call.tool_call_id for call in after.tool_calls] == [
        "call-1"
    ]
    assert runs == []


async def test_a_tool_step_needs_no_model_credentials() -> None:
    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        return f"sunny in {city}"

    runner = PydanticAiRunner(Agent(tools=[get_weather]), model="openai:gpt-4.1")
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    call = DeferredToolCall("call-1", "get_weather", '{"city": "Oslo"}', ToolPolicy(ToolEffect.READ))
    session.defer(ToolCallsRequested(framework_run_state="{}", tool_calls=[call]))

    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("OPENAI_API_KEY", raising=False)
        assert await session.execute(runner, "call-1") == "sunny in Oslo"


async def test_a_provider_side_native_tool_runs_inside_the_model_call_and_again_on_a_retry() -> None:
    searches: list[str] = []

    async def search_then_call(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls | BuiltinToolCallsReturns]:
        del info
        if any(isinstance(part, BaseToolReturnPart) for message in messages for part in message.parts):
            yield "Oslo is sunny."
            return
        # What a provider streams when it ran its own web search inside the model request.
        searches.append("weather oslo")
        yield {
            0: NativeToolCallPart("web_search", {"query": "weather oslo"}, "ws-1", provider_name="function")
        }
        yield {1: NativeToolReturnPart("web_search", "sunny", "ws-1", provider_name="function")}
        yield {2: DeltaToolCall("get_weather", '{"city": "Oslo"}', tool_call_id="call-1")}

    def get_weather(city: str) -> str:
        """Return the weather of a city."""
        return f"sunny in {city}"

    model = FunctionModel(stream_function=search_then_call)
    runner = PydanticAiRunner(Agent(model, tools=[get_weather], capabilities=[WebSearch()]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))

    first = await runner.run_model_step(session.context())
    session.attempt = 2
    retried = await runner.run_model_step(session.context())

    assert searches == ["weather oslo", "weather oslo"], "a RunModel retry repeats the provider's search"
    assert isinstance(first, ToolCallsRequested) and isinstance(retried, ToolCallsRequested)
    assert [c.tool_name for c in retried.tool_calls] == ["get_weather"], "the search is not a deferred call"
    session.defer(retried)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny in Oslo")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and len(searches) == 2
    assert '"web_search"' in final.new_messages[0].framework_item, "the search stays in the stored history"
