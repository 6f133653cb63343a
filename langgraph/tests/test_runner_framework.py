"""The runner against LangChain's real `create_agent` loop with a scripted chat model, without a server.

Each test plays the session's side of the runner contract (`dex_agents.testing.SessionSide`) and asserts
what a user of the session would notice: which calls become Steps, what the model sees, what is stored.
What every adapter must do (defer in model order, replay the history, refuse another runner's state, an
unknown tool) is `tests/test_runner_contract.py`; these are LangChain's specifics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, cast

import pytest
from dex_agents import (
    QuestionAnswer,
    ToolEffect,
    ToolInputRequested,
    ToolPolicy,
    current_tool_execution,
)
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    ToolCallsRequested,
    ToolExecutionError,
    TurnCompleted,
)
from dex_agents.testing import SessionSide
from dex_agents.values import MessageRole, ToolCallStatus
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, after_model
from langchain.agents.structured_output import ToolStrategy
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException, tool
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolRuntime
from langgraph.store.memory import InMemoryStore
from langgraph.types import interrupt
from pydantic import BaseModel

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call


class Tools:
    """The agent's tools, recording every real run."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.keys: list[str | None] = []

    def all(self) -> list[Any]:
        runs = self.runs
        keys = self.keys

        @tool
        def get_weather(city: str) -> str:
            """Return the weather of a city."""
            runs.append(f"get_weather {city}")
            execution = current_tool_execution()
            keys.append(execution.idempotency_key if execution is not None else None)
            return f"sunny in {city}"

        @tool
        async def delete_file(path: str) -> str:
            """Delete a file."""
            runs.append(f"delete_file {path}")
            return f"deleted {path}"

        def flaky_body(attempt: int) -> str:
            raise ToolException(f"attempt {attempt} was too early")

        flaky = StructuredTool.from_function(
            flaky_body,
            name="flaky",
            description="Fail in a way the model should see.",
            handle_tool_error=True,
        )

        @tool
        def crash() -> str:
            """Fail like a broken dependency."""
            raise ConnectionError("backend unreachable")

        return [get_weather, delete_file, flaky, crash]


def agent_runner(model: ScriptedChatModel, tools: Tools, **options: Any) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model,
            tools=tools.all(),
            system_prompt="You help with the weather and with files.",
            middleware=[DexToolGate()],
            checkpointer=checkpointer,
        )

    return LangGraphRunner(build, **options)


async def test_resume_feeds_every_recorded_outcome_to_the_model_in_a_fresh_runner() -> None:
    script = [
        respond(
            "",
            tool_call("get_weather", {"city": "Paris"}, "call-1"),
            tool_call("delete_file", {"path": "/a"}, "call-2"),
            tool_call("delete_file", {"path": "/b"}, "call-3"),
            tool_call("delete_file", {"path": "/c"}, "call-4"),
        ),
        respond("Paris is sunny; I did not delete anything.", input_tokens=70, output_tokens=9),
    ]
    tools = Tools()
    first_model = ScriptedChatModel(responses=script)
    first = agent_runner(first_model, tools)
    session = SessionSide()
    session.start_turn(first.build_user_message("Weather, and clean up."))
    requested = await first.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output=await session.execute(first, "call-1"))
    session.finish("call-2", ToolCallStatus.REJECTED, rejection_message="Deleting files is not allowed.")
    session.finish("call-3", ToolCallStatus.FAILED, error="disk is read-only")
    session.finish("call-4", ToolCallStatus.OUTCOME_UNKNOWN, error="Worker lost")

    # A fresh runner (another Worker process in production) resumes from the stored text alone.
    second_model = ScriptedChatModel(responses=script)
    second = agent_runner(second_model, tools)
    final = await second.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(second_model.inputs) == 1
    assert second_model.input_texts(1)[-4:] == [
        "tool get_weather [call-1] success: sunny in Paris",
        "tool delete_file [call-2] error: Deleting files is not allowed.",
        "tool delete_file [call-3] error: The tool call failed: disk is read-only",
        f"tool delete_file [call-4] error: {OUTCOME_UNKNOWN_TOOL_RESULT}",
    ]
    assert tools.runs == ["get_weather Paris"]
    # `get_weather` is a plain `def`, which LangChain runs on a worker thread; it still sees its call.
    assert tools.keys == ["session-1/turn-1/call-1"]
    # The response had no text: one assistant message per call, no empty text message before them.
    assert [(message.role, message.tool_call_id) for message in final.new_messages] == [
        (MessageRole.ASSISTANT, "call-1"),
        (MessageRole.ASSISTANT, "call-2"),
        (MessageRole.ASSISTANT, "call-3"),
        (MessageRole.ASSISTANT, "call-4"),
        (MessageRole.TOOL, "call-1"),
        (MessageRole.TOOL, "call-2"),
        (MessageRole.TOOL, "call-3"),
        (MessageRole.TOOL, "call-4"),
        (MessageRole.ASSISTANT, None),
    ]
    tool_message = final.new_messages[4]
    assert (tool_message.tool_name, tool_message.tool_arguments, tool_message.tool_output) == (
        "get_weather",
        '{"city":"Paris"}',
        "sunny in Paris",
    )
    assert final.new_messages[-1].text == "Paris is sunny; I did not delete anything."
    assert (final.usage.model_calls, final.usage.input_tokens, final.usage.output_tokens) == (1, 70, 9)


async def test_tool_execution_maps_tool_errors_for_the_model_and_lets_crashes_fail_the_step() -> None:
    model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("flaky", {"attempt": 1}, "call-1"),
                tool_call("crash", {}, "call-2"),
                tool_call("get_weather", {"town": "Paris"}, "call-3"),
            )
        ]
    )
    runner = agent_runner(model, Tools())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go."))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    with pytest.raises(ToolExecutionError, match="attempt 1 was too early"):
        await session.execute(runner, "call-1")
    with pytest.raises(ConnectionError, match="backend unreachable"):
        await session.execute(runner, "call-2")
    with pytest.raises(ToolExecutionError, match="city"):
        await session.execute(runner, "call-3")
    assert len(model.inputs) == 1


async def test_a_graph_without_the_tool_gate_ends_the_turn_before_any_tool_runs() -> None:
    model = ScriptedChatModel(responses=[respond("", tool_call("get_weather", {"city": "Paris"}, "call-1"))])
    tools = Tools()

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=tools.all(), checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "DexToolGate" in outcome.turn_error
    assert tools.runs == []
    assert len(model.inputs) == 1


_HAS_PER_CALL_REVIEWS = "interrupt_mode" in inspect.signature(HumanInTheLoopMiddleware.__init__).parameters


@pytest.mark.parametrize(
    ("mode", "gate_first"), [("batched", False), ("per_call", False), ("per_call", True)]
)
async def test_human_in_the_loop_middleware_asks_through_the_sessions_approvals(
    mode: Literal["batched", "per_call"], gate_first: bool
) -> None:
    """Its interrupt_on tools require the session's approval; an approved call runs, a rejected one never
    runs and the model sees the user's text; the middleware's own interrupts never reach the session."""
    model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("get_weather", {"city": "Paris"}, "call-1"),
                tool_call("delete_file", {"path": "/a"}, "call-2"),
                tool_call("delete_file", {"path": "/b"}, "call-3"),
            ),
            respond("Done."),
        ]
    )
    tools = Tools()
    if mode == "batched":
        review = HumanInTheLoopMiddleware(interrupt_on={"delete_file": True})
    elif _HAS_PER_CALL_REVIEWS:
        review = HumanInTheLoopMiddleware(interrupt_on={"delete_file": True}, interrupt_mode=mode)
    else:
        pytest.skip("langchain before 1.5 has no per-call reviews")

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        middleware = [DexToolGate(), review] if gate_first else [review, DexToolGate()]
        return create_agent(model, tools=tools.all(), middleware=middleware, checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather, and clean up"))
    read_only = ToolPolicy(ToolEffect.READ, requires_approval=False)
    context = dataclasses.replace(
        session.context(), tool_policies={"get_weather": read_only, "delete_file": read_only}
    )

    requested = await runner.run_model_step(context)

    assert isinstance(requested, ToolCallsRequested)
    assert [(call.tool_call_id, call.policy.is_approval_required) for call in requested.tool_calls] == [
        ("call-1", False),
        ("call-2", True),
        ("call-3", True),
    ]
    assert len(model.inputs) == 1 and tools.runs == []
    session.defer(requested)
    assert await session.execute(runner, "call-1") == "sunny in Paris"
    assert await session.execute(runner, "call-2") == "deleted /a"
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny in Paris")
    session.finish("call-2", ToolCallStatus.SUCCEEDED, output="deleted /a")
    session.finish("call-3", ToolCallStatus.REJECTED, rejection_message="Keep /b, it is the backup.")

    ended = await runner.run_model_step(session.context())

    assert isinstance(ended, TurnCompleted) and ended.turn_error is None
    assert tools.runs == ["get_weather Paris", "delete_file /a"]
    results = [message for message in model.inputs[-1] if isinstance(message, ToolMessage)]
    assert [(result.tool_call_id, result.status, result.text) for result in results] == [
        ("call-1", "success", "sunny in Paris"),
        ("call-2", "success", "deleted /a"),
        ("call-3", "error", "Keep /b, it is the backup."),
    ]


async def test_an_interrupt_in_a_graph_node_is_a_question_whose_answer_resumes_the_node() -> None:
    model = ScriptedChatModel(
        responses=[respond("", tool_call("get_weather", {"city": "Paris"}, "call-1")), respond("Sunny.")]
    )
    tools = Tools()
    answers: list[object] = []

    @after_model
    def confirm(state: Any, runtime: Any) -> None:
        if any(isinstance(message, ToolMessage) for message in state["messages"]):
            return
        answers.append(interrupt({"question": "Look the weather up?", "choices": ["yes", "no"]}))

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model, tools=tools.all(), middleware=[confirm, DexToolGate()], checkpointer=checkpointer
        )

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    asked = await runner.run_model_step(session.context())

    # The node's interrupt is deferred as a call whose tool Step asks the session's question.
    assert isinstance(asked, ToolCallsRequested)
    [question] = asked.tool_calls
    assert (question.tool_name, question.policy.is_approval_required) == ("langgraph_interrupt", False)
    session.defer(asked)
    assert await session.execute_outcome(runner, question.tool_call_id) == ToolInputRequested(
        "Look the weather up?", ("yes", "no")
    )
    answer = QuestionAnswer(f"{question.tool_call_id}-input-1", "Look the weather up?", "yes")
    session.records[question.tool_call_id] = dataclasses.replace(
        session.records[question.tool_call_id], input_answers=(answer,)
    )
    assert await session.execute(runner, question.tool_call_id) == "yes"
    session.finish(question.tool_call_id, ToolCallStatus.SUCCEEDED, output="yes")

    # Resumed in a fresh runner: interrupt() returns the answer, and the model's call reaches the gate
    # without another model call.
    resumed_runner = LangGraphRunner(build)
    requested = await resumed_runner.run_model_step(session.context())

    assert answers == ["yes"] and len(model.inputs) == 1
    assert isinstance(requested, ToolCallsRequested)
    assert [call.tool_call_id for call in requested.tool_calls] == ["call-1"]
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny in Paris")
    ended = await resumed_runner.run_model_step(session.context())
    assert isinstance(ended, TurnCompleted) and ended.turn_error is None
    assert [message.text for message in ended.new_messages][-1] == "Sunny."


def test_the_factory_must_compile_with_the_given_checkpointer_and_have_tools() -> None:
    model = ScriptedChatModel(responses=[])
    with pytest.raises(TypeError, match="checkpointer it receives"):
        LangGraphRunner(
            lambda checkpointer: create_agent(model, tools=Tools().all(), middleware=[DexToolGate()])
        )
    with pytest.raises(TypeError, match="exactly one ToolNode"):
        LangGraphRunner(lambda checkpointer: create_agent(model, tools=[], checkpointer=checkpointer))
    with pytest.raises(TypeError, match="compiled graph"):
        LangGraphRunner(lambda checkpointer: model)  # pyright: ignore[reportArgumentType, reportReturnType]
    with pytest.raises(TypeError, match="interrupt_before"):
        LangGraphRunner(
            lambda checkpointer: create_agent(
                model,
                tools=Tools().all(),
                middleware=[DexToolGate()],
                checkpointer=checkpointer,
                interrupt_before=["tools"],
            )
        )


async def test_the_run_state_grows_with_the_turn_not_with_the_conversation() -> None:
    script: list[Any] = []
    for number in range(8):
        script += [
            respond("", tool_call("get_weather", {"city": f"City {number}"}, f"call-{number}")),
            respond("ok"),
        ]
    model = ScriptedChatModel(responses=script)
    runner = agent_runner(model, Tools())
    session = SessionSide()
    sizes: list[int] = []
    for number in range(8):
        session.start_turn(
            runner.build_user_message(f"Weather in city {number}? " + "Please be thorough. " * 20)
        )
        requested = await runner.run_model_step(session.context())
        assert isinstance(requested, ToolCallsRequested)
        sizes.append(len(requested.framework_run_state))
        session.defer(requested)
        session.finish(f"call-{number}", ToolCallStatus.SUCCEEDED, output="sunny " * 50)
        final = await runner.run_model_step(session.context())
        assert isinstance(final, TurnCompleted) and final.turn_error is None
        session.store(final.new_messages)

    assert len(session.messages) == 32
    # Stored messages stay out of the checkpoint (a count and a digest stand for them), so eight turns
    # and 28 stored messages in, the run state is as large as in the first turn.
    assert max(sizes) - min(sizes) < 100, sizes
    # The stored history still reaches the model when the turn resumes.
    assert "user: Weather in city 0? " in "\n".join(model.input_texts(16))


async def test_a_run_state_whose_history_is_no_longer_stored_ends_the_turn() -> None:
    model = ScriptedChatModel(responses=[respond("", tool_call("get_weather", {"city": "Oslo"}, "call-1"))])
    runner = agent_runner(model, Tools())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny")
    session.messages.clear()

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "does not match the stored messages" in outcome.turn_error


class Forecast(BaseModel):
    city: str
    sunny: bool


def structured_runner(model: ScriptedChatModel) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model,
            tools=Tools().all(),
            middleware=[DexToolGate()],
            response_format=ToolStrategy(Forecast),
            checkpointer=checkpointer,
        )

    return LangGraphRunner(build, allowed_msgpack_modules=[(__name__, "Forecast")])


async def test_structured_output_completes_the_turn_with_the_response_as_its_text() -> None:
    model = ScriptedChatModel(
        responses=[respond("", tool_call("Forecast", {"city": "Oslo", "sunny": True}, "out-1"))]
    )
    runner = structured_runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Is it sunny in Oslo?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert [(message.role, message.tool_call_id) for message in outcome.new_messages] == [
        (MessageRole.ASSISTANT, None),
        (MessageRole.ASSISTANT, "out-1"),
        (MessageRole.TOOL, "out-1"),
    ]
    # The answer has no text of its own, so its display text is the structured response.
    assert json.loads(outcome.new_messages[0].text or "") == {"city": "Oslo", "sunny": True}
    assert len(model.inputs) == 1


async def test_a_structured_output_retry_ends_the_turn_instead_of_calling_the_model_again() -> None:
    model = ScriptedChatModel(
        responses=[respond("", tool_call("Forecast", {"city": "Oslo"}, "out-1")), respond("never sent")]
    )
    runner = structured_runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Is it sunny in Oslo?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "second model call" in outcome.turn_error
    assert len(model.inputs) == 1, "the guard stops the retry before it reaches the model"


async def test_an_output_call_beside_a_tool_call_ends_the_turn_after_the_tool_without_a_model_call() -> None:
    model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("Forecast", {"city": "Oslo", "sunny": True}, "out-1"),
                tool_call("get_weather", {"city": "Oslo"}, "call-1"),
            )
        ]
    )
    runner = structured_runner(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Is it sunny in Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    assert [call.tool_call_id for call in requested.tool_calls] == ["call-1"], "the output call is no Step"
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny in Oslo")

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.inputs) == 1 and final.usage.model_calls == 0
    assert json.loads(final.new_messages[0].text or "") == {"city": "Oslo", "sunny": True}
    assert [message.tool_output for message in final.new_messages if message.role is MessageRole.TOOL] == [
        "Returning structured response: city='Oslo' sunny=True",
        "sunny in Oslo",
    ]


@pytest.mark.parametrize(
    ("tool_call_ids", "problem"),
    [(["", "call-2"], "without an ID"), (["call/1"], "containing '/'"), (["call-1", "call-1"], "twice")],
)
async def test_tool_call_ids_that_cannot_name_steps_end_the_turn_before_any_tool_runs(
    tool_call_ids: list[str], problem: str
) -> None:
    calls = [
        tool_call("get_weather", {"city": f"City {index}"}, tool_call_id)
        for index, tool_call_id in enumerate(tool_call_ids)
    ]
    model = ScriptedChatModel(responses=[respond("", *calls)])
    tools = Tools()
    runner = agent_runner(model, tools)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and problem in outcome.turn_error
    assert tools.runs == [] and len(model.inputs) == 1


async def test_reasoning_streams_as_reasoning_deltas_apart_from_the_text() -> None:
    blocks: list[str | dict[str, Any]] = [
        {"type": "reasoning", "reasoning": "The user wants the weather."},
        {"type": "text", "text": "It is sunny."},
    ]
    model = ScriptedChatModel(responses=[AIMessage(content=blocks)])
    runner = agent_runner(model, Tools())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    reasoning = [
        json.loads(event.payload)["text"] for event in session.events if event.type == "reasoning_delta"
    ]
    assert reasoning == ["The user wants the weather."]
    assert "".join(session.text_deltas()) == "It is sunny."


@dataclass(frozen=True)
class Shop:
    """The runtime context of the shop agent."""

    currency: str


async def test_a_tool_step_gets_the_runtime_context_and_the_graphs_store() -> None:
    store = InMemoryStore()
    store.put(("prices",), "A-1", {"amount": 40})

    @tool
    def price(order_id: str, runtime: ToolRuntime[Shop, Any]) -> str:
        """Return an order's price."""
        assert runtime.store is not None
        item = runtime.store.get(("prices",), order_id)
        assert item is not None
        return f"{item.value['amount']} {runtime.context.currency}"

    model = ScriptedChatModel(responses=[respond("", tool_call("price", {"order_id": "A-1"}, "call-1"))])

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model,
            tools=[price],
            middleware=[DexToolGate()],
            context_schema=Shop,
            store=store,
            checkpointer=checkpointer,
        )

    runner = LangGraphRunner(build, context=Shop(currency="EUR"))
    session = SessionSide()
    session.start_turn(runner.build_user_message("What did A-1 cost?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    assert [json.loads(call.arguments) for call in requested.tool_calls] == [{"order_id": "A-1"}]
    session.defer(requested)

    assert await session.execute(runner, "call-1") == "40 EUR"


async def test_a_tools_interrupts_are_the_sessions_questions_and_their_answers_resume_it_in_order() -> None:
    runs: list[tuple[str, str]] = []

    @tool
    async def ship(order_id: str) -> str:
        """Ship an order where the user says."""
        city = interrupt({"question": "Ship to which city?", "choices": ["Berlin", "Lyon"]})
        floor = interrupt("Which floor?")
        runs.append((city, floor))
        return f"{order_id} ships to {city}, floor {floor}"

    model = ScriptedChatModel(responses=[respond("", tool_call("ship", {"order_id": "A-1"}, "call-1"))])

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=[ship], middleware=[DexToolGate()], checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)

    assert await session.execute_outcome(runner, "call-1") == ToolInputRequested(
        "Ship to which city?", ("Berlin", "Lyon")
    )
    city = QuestionAnswer("call-1-input-1", "Ship to which city?", "Lyon")
    session.records["call-1"] = dataclasses.replace(session.records["call-1"], input_answers=(city,))
    assert await session.execute_outcome(runner, "call-1") == ToolInputRequested("Which floor?")
    floor = QuestionAnswer("call-1-input-2", "Which floor?", "3")
    session.records["call-1"] = dataclasses.replace(session.records["call-1"], input_answers=(city, floor))
    assert await session.execute(runner, "call-1") == "A-1 ships to Lyon, floor 3"
    # interrupt() returned each answer; the tool body past its questions ran once.
    assert runs == [("Lyon", "3")]


async def test_a_turn_with_two_tool_rounds_stores_every_message_once_in_order() -> None:
    model = ScriptedChatModel(
        responses=[
            respond("First Paris.", tool_call("get_weather", {"city": "Paris"}, "call-1")),
            respond("Now Rome.", tool_call("get_weather", {"city": "Rome"}, "call-2")),
            respond("Both are sunny."),
        ]
    )
    tools = Tools()
    runner = agent_runner(model, tools)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Paris, then Rome?"))
    for tool_call_id in ("call-1", "call-2"):
        requested = await runner.run_model_step(session.context())
        assert isinstance(requested, ToolCallsRequested)
        assert [call.tool_call_id for call in requested.tool_calls] == [tool_call_id]
        session.defer(requested)
        session.finish(
            tool_call_id, ToolCallStatus.SUCCEEDED, output=await session.execute(runner, tool_call_id)
        )

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert [
        (message.role, message.text or message.tool_output or message.tool_call_id)
        for message in final.new_messages
    ] == [
        (MessageRole.ASSISTANT, "First Paris."),
        (MessageRole.ASSISTANT, "call-1"),
        (MessageRole.TOOL, "sunny in Paris"),
        (MessageRole.ASSISTANT, "Now Rome."),
        (MessageRole.ASSISTANT, "call-2"),
        (MessageRole.TOOL, "sunny in Rome"),
        (MessageRole.ASSISTANT, "Both are sunny."),
    ]
    assert tools.runs == ["get_weather Paris", "get_weather Rome"] and len(model.inputs) == 3
    # The third model call sees both rounds, the first one rebuilt from the run state of the second.
    assert model.input_texts(3)[-7:] == [
        "user: Paris, then Rome?",
        "assistant: First Paris.",
        'assistant calls get_weather {"city": "Paris"} [call-1]',
        "tool get_weather [call-1] success: sunny in Paris",
        "assistant: Now Rome.",
        'assistant calls get_weather {"city": "Rome"} [call-2]',
        "tool get_weather [call-2] success: sunny in Rome",
    ]


async def test_the_saver_keeps_nothing_between_steps() -> None:
    savers: list[DexCheckpointSaver] = []
    model = ScriptedChatModel(
        responses=[respond("", tool_call("get_weather", {"city": "Oslo"}, "call-1")), respond("Sunny.")]
    )
    tools = Tools()

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        savers.append(checkpointer)
        return create_agent(model, tools=tools.all(), middleware=[DexToolGate()], checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Oslo?"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    [saver] = savers
    assert not saver.storage and not saver.writes and not saver.blobs, "a Worker's memory does not grow"
    session.defer(requested)
    session.finish("call-1", ToolCallStatus.SUCCEEDED, output="sunny")
    assert isinstance(await runner.run_model_step(session.context()), TurnCompleted)
    assert not saver.storage and not saver.writes and not saver.blobs


async def test_deeply_nested_json_in_arguments_or_a_result_is_a_tool_error_the_model_sees() -> None:
    runs: list[str] = []

    @tool
    def store(data: Any) -> str:
        """Store data."""
        runs.append("store")
        return "stored"

    @tool
    def nest(depth: int) -> Any:
        """Return a nested list."""
        runs.append("nest")
        nested: list[Any] = []
        for _ in range(depth):
            nested = [nested]
        return nested

    model = ScriptedChatModel(
        responses=[
            respond(
                "",
                tool_call("store", {"data": 1}, "store-1"),
                tool_call("nest", {"depth": 1000}, "nest-1"),
            )
        ]
    )

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=[store, nest], middleware=[DexToolGate()], checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Go"))
    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    # About 1,000 levels in 2 KB, as a provider's argument text can hold them.
    deep = '{"data": ' + "[" * 1000 + "]" * 1000 + "}"
    session.records["store-1"] = dataclasses.replace(session.records["store-1"], arguments=deep)

    with pytest.raises(ToolExecutionError, match=r"nest.* too deeply"):
        await session.execute(runner, "store-1")
    with pytest.raises(ToolExecutionError, match="nested too deeply"):
        await session.execute(runner, "nest-1")
    assert runs == ["nest"], "the store tool never ran"


class _CallbackCountingExecutor(ThreadPoolExecutor):
    """The event loop's default executor, counting the callback handler events handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.callback_events: list[str] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        # LangChain hands it `functools.partial(context.run, handler.on_<event>, ...)`.
        handed: object = fn
        target: object = None
        if isinstance(handed, functools.partial) and handed.args:
            target = cast(tuple[object, ...], handed.args)[0]
        if isinstance(getattr(target, "__self__", None), BaseCallbackHandler):
            self.callback_events.append(str(getattr(target, "__name__", "")))
        return super().submit(fn, *args, **kwargs)


async def test_a_streamed_answer_costs_the_guard_one_thread_hop_per_model_call_not_one_per_chunk() -> None:
    # LangChain runs a synchronous callback handler that is not inline on the loop's default executor,
    # once per event. The guard takes only the model call's start there; the chunks, the end and the graph's
    # node events stay on the loop.
    words = " ".join(f"word{index}" for index in range(40))
    model = ScriptedChatModel(responses=[respond(words)])
    runner = agent_runner(model, Tools())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Say forty words."))
    executor = _CallbackCountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert outcome.new_messages[-1].text == words
    assert executor.callback_events == ["on_chat_model_start"]
