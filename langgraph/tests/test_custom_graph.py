"""Your own LangGraph graph: the documented pattern works, other shapes are refused; the run state is safe."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from dex_agents.runner import ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import ToolCallStatus
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import tools_condition

from dex_agents_langgraph import DexCheckpointSaver, LangGraphRunner, dex_tool_node, route_tool_calls
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call


@dataclass
class Receipt:
    """A custom value the graph keeps in its state."""

    number: int


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    receipts: Annotated[list[Any], operator.add]


runs: list[str] = []


@tool
def get_weather(city: str) -> str:
    """Return the weather of a city."""
    runs.append(city)
    return f"sunny in {city}"


def build_graph(
    model: ScriptedChatModel, router: Callable[..., Any]
) -> Callable[[DexCheckpointSaver], CompiledStateGraph[Any, Any, Any, Any]]:
    bound = model.bind_tools([get_weather])

    async def call_model(state: State) -> dict[str, Sequence[object]]:
        answer = await bound.ainvoke(state["messages"])
        return {"messages": [answer], "receipts": [Receipt(len(state["messages"]))]}

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        graph = StateGraph(State)
        graph.add_node("model", call_model)
        graph.add_node("tools", dex_tool_node([get_weather]))
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", router, ["tools", "__end__"])
        graph.add_edge("tools", "model")
        return graph.compile(checkpointer=checkpointer)

    return build


def two_cities() -> list[Any]:
    return [
        respond(
            "Checking.",
            tool_call("get_weather", {"city": "Paris"}, "call-1"),
            tool_call("get_weather", {"city": "Rome"}, "call-2"),
        ),
        respond("Both are sunny."),
    ]


async def test_a_graph_with_dex_tool_node_and_route_tool_calls_runs_one_model_call_per_step() -> None:
    runs.clear()
    model = ScriptedChatModel(responses=two_cities())
    runner = LangGraphRunner(
        build_graph(model, route_tool_calls), allowed_msgpack_modules=[(__name__, "Receipt")]
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Paris and Rome?"))

    requested = await runner.run_model_step(session.context())

    assert isinstance(requested, ToolCallsRequested)
    assert [call.tool_call_id for call in requested.tool_calls] == ["call-1", "call-2"]
    assert runs == [] and len(model.inputs) == 1
    session.defer(requested)
    for tool_call_id in ("call-1", "call-2"):
        session.finish(
            tool_call_id, ToolCallStatus.SUCCEEDED, output=await session.execute(runner, tool_call_id)
        )
    assert runs == ["Paris", "Rome"]

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert len(model.inputs) == 2
    assert model.input_texts(2)[-2:] == [
        "tool get_weather [call-1] success: sunny in Paris",
        "tool get_weather [call-2] success: sunny in Rome",
    ]
    assert final.new_messages[-1].text == "Both are sunny."


async def test_tools_condition_sends_all_calls_in_one_task_and_is_refused() -> None:
    runs.clear()
    model = ScriptedChatModel(responses=two_cities())
    runner = LangGraphRunner(build_graph(model, tools_condition))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather in Paris and Rome?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "route_tool_calls" in outcome.turn_error
    assert runs == []


@pytest.mark.parametrize("synchronous", [False, True])
async def test_a_completion_models_second_call_in_one_model_step_is_refused_before_it_runs(
    synchronous: bool,
) -> None:
    # LangChain reports a completion model's call only to `on_llm_start`, not `on_chat_model_start`.
    llm = FakeListLLM(responses=["draft", "final"])

    def call_model_sync(state: State) -> dict[str, Sequence[object]]:
        draft = llm.invoke("draft an answer")
        return {"messages": [AIMessage(llm.invoke(f"improve: {draft}"))], "receipts": []}

    async def call_model(state: State) -> dict[str, Sequence[object]]:
        draft = await llm.ainvoke("draft an answer")
        return {"messages": [AIMessage(await llm.ainvoke(f"improve: {draft}"))], "receipts": []}

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        graph = StateGraph(State)
        graph.add_node("model", call_model_sync if synchronous else call_model)
        graph.add_node("tools", dex_tool_node([get_weather]))
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", route_tool_calls, ["tools", "__end__"])
        graph.add_edge("tools", "model")
        return graph.compile(checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "second model call" in outcome.turn_error
    assert llm.i == 1, "only the first call reached the model"


def test_the_run_state_rebuilds_only_allowlisted_types() -> None:
    exported = _exported_thread_with_a_receipt()

    strict = DexCheckpointSaver()
    strict.import_thread("strict", exported)
    allowing = DexCheckpointSaver(allowed_msgpack_modules=[(__name__, "Receipt")])
    allowing.import_thread("allowing", exported)

    # By default a type outside LangGraph's safe list comes back as plain data, never as its class.
    assert _receipts(strict, "strict") == [{"number": 1}]
    assert _receipts(allowing, "allowing") == [Receipt(1)]


def _exported_thread_with_a_receipt() -> dict[str, Any]:
    saver = DexCheckpointSaver(allowed_msgpack_modules=[(__name__, "Receipt")])
    graph = StateGraph(State)
    graph.add_node("note", lambda state: {"receipts": [Receipt(1)]})  # pyright: ignore[reportUnknownLambdaType, reportUnknownArgumentType]
    graph.add_edge(START, "note")
    compiled = graph.compile(checkpointer=saver)
    compiled.invoke({"messages": [], "receipts": []}, {"configurable": {"thread_id": "source"}})
    return saver.export_thread("source")


def _receipts(saver: DexCheckpointSaver, thread_id: str) -> list[Any]:
    saved = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    assert saved is not None
    return list(saved.checkpoint["channel_values"]["receipts"])
