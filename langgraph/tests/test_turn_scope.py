"""What a model Step adds to the graph, in process: built-in tools, the turn's model and instructions from its
session settings, the same for a graph of your own, and each outcome's `ModelCallMetadata`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from dex_agents import BUILT_IN_TOOL_NAMES, ModelCallMetadata, ModelRequestParameters
from dex_agents.runner import AgentTurnContext, ToolCallsRequested, TurnCompleted
from dex_agents.testing import SessionSide
from dex_agents.values import ToolCallStatus
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import (
    DexCheckpointSaver,
    DexToolGate,
    LangGraphRunner,
    current_session_settings,
    dex_session_tools,
    dex_tool_node,
    route_tool_calls,
)
from dex_agents_langgraph._call_metadata import ModelCallStart, model_call_metadata
from dex_agents_langgraph.testing import ScriptedChatModel
from tests.support import respond, tool_call


@tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id}: shipped"


def _agent(model: ScriptedChatModel, **runner_options: Any) -> LangGraphRunner:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(
            model,
            tools=[lookup_order],
            system_prompt="You handle orders.",
            middleware=[DexToolGate()],
            checkpointer=checkpointer,
        )

    return LangGraphRunner(build, **runner_options)


def _context(session: SessionSide, **changes: Any) -> AgentTurnContext:
    return dataclasses.replace(session.context(), **changes)


async def test_enabled_built_ins_are_offered_beside_the_agents_tools_and_their_calls_deferred() -> None:
    ask = tool_call("ask_user", {"question": "Which order?"}, "ask-1")
    model = ScriptedChatModel(responses=[respond("", ask), respond("Order 7 then.")])
    runner = _agent(model)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Where is my order?"))

    requested = await runner.run_model_step(_context(session, enabled_built_in_tools=BUILT_IN_TOOL_NAMES))

    assert isinstance(requested, ToolCallsRequested)
    assert model.offered_tools[0] == ["lookup_order", *BUILT_IN_TOOL_NAMES]
    [call] = requested.tool_calls
    assert (call.tool_name, call.arguments) == ("ask_user", '{"question":"Which order?"}')
    session.defer(requested)
    # The session carries the call out; the model reads its recorded result like any other tool's.
    session.finish("ask-1", ToolCallStatus.SUCCEEDED, output='{"status":"answered","answer":"7"}')
    final = await runner.run_model_step(_context(session, enabled_built_in_tools=BUILT_IN_TOOL_NAMES))
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.input_texts(2)[-1] == 'tool ask_user [ask-1] success: {"status":"answered","answer":"7"}'


async def test_a_graph_tool_named_like_an_enabled_built_in_ends_the_turn_with_a_clear_error() -> None:
    @tool
    def ask_user(question: str) -> str:
        """My own question tool."""
        return question

    model = ScriptedChatModel(responses=["Hello."])

    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        return create_agent(model, tools=[ask_user], middleware=[DexToolGate()], checkpointer=checkpointer)

    runner = LangGraphRunner(build)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    refused = await runner.run_model_step(_context(session, enabled_built_in_tools=("ask_user",)))

    assert isinstance(refused, TurnCompleted)
    assert refused.turn_error is not None and "reserves for its built-in tool" in refused.turn_error
    assert model.inputs == [], "no model call"
    # Without the built-in the same tool is the graph's own, and the turn runs.
    done = await runner.run_model_step(session.context())
    assert isinstance(done, TurnCompleted) and done.turn_error is None


def _model_choice(**models: ScriptedChatModel) -> Any:
    def model_for_settings(settings: Mapping[str, object]) -> ScriptedChatModel | None:
        name = settings.get("model")
        return None if name is None else models[str(name)]

    return model_for_settings


def _tone_instructions(settings: Mapping[str, object]) -> str | None:
    return f"Be {settings['tone']}." if "tone" in settings else None


async def test_the_turns_settings_choose_its_model_and_add_instructions() -> None:
    default = ScriptedChatModel(responses=["Default answer."], model_name="default")
    large = ScriptedChatModel(responses=["Large answer."], model_name="large")
    runner = _agent(
        default,
        model_for_settings=_model_choice(large=large),
        instructions_for_settings=_tone_instructions,
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    plain = await runner.run_model_step(session.context())
    chosen = await runner.run_model_step(
        _context(session, session_settings={"model": "large", "tone": "brief"})
    )

    assert isinstance(plain, TurnCompleted) and isinstance(chosen, TurnCompleted)
    assert [message.text for message in plain.new_messages] == ["Default answer."]
    assert [message.text for message in chosen.new_messages] == ["Large answer."]
    assert default.input_texts(1)[0] == "system: You handle orders."
    assert large.input_texts(1)[0] == "system: You handle orders.\n\nBe brief."
    assert chosen.model_call_metadata is not None and chosen.model_call_metadata.request_model == "large"
    assert plain.model_call_metadata is not None and plain.model_call_metadata.response_model == "default"


async def test_settings_that_choose_no_usable_model_end_the_turn_and_the_next_turn_runs() -> None:
    model = ScriptedChatModel(responses=["Fine."])
    runner = _agent(model, model_for_settings=_model_choice())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    refused = await runner.run_model_step(_context(session, session_settings={"model": "huge"}))

    assert isinstance(refused, TurnCompleted) and refused.new_messages == ()
    assert refused.turn_error == (
        "the session settings chose no usable model or instructions: KeyError: 'huge'"
    )
    assert model.inputs == []
    done = await runner.run_model_step(session.context())
    assert isinstance(done, TurnCompleted) and [m.text for m in done.new_messages] == ["Fine."]


def _own_graph(model: ScriptedChatModel, *, reads_settings: bool) -> Any:
    def build(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
        async def call_model(state: MessagesState) -> dict[str, list[Any]]:
            tools: list[Any] = [lookup_order]
            messages: list[Any] = list(state["messages"])
            if reads_settings:
                tools += dex_session_tools()
                tone = current_session_settings().get("tone")
                if tone:
                    messages.insert(0, SystemMessage(f"Be {tone}."))
            return {"messages": [await model.bind_tools(tools).ainvoke(messages)]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        graph.add_node("tools", dex_tool_node([lookup_order]))
        graph.add_edge(START, "model")
        graph.add_conditional_edges("model", route_tool_calls, ["tools", "__end__"])
        graph.add_edge("tools", "model")
        return graph.compile(checkpointer=checkpointer)

    return build


async def test_your_own_graph_binds_the_session_tools_and_reads_the_settings() -> None:
    ask = tool_call("ask_user", {"question": "Which?"}, "ask-1")
    model = ScriptedChatModel(responses=[respond("", ask)])
    runner = LangGraphRunner(_own_graph(model, reads_settings=True))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    requested = await runner.run_model_step(
        _context(session, enabled_built_in_tools=("ask_user",), session_settings={"tone": "brief"})
    )

    assert isinstance(requested, ToolCallsRequested)
    assert model.offered_tools[0] == ["lookup_order", "ask_user"]
    assert model.input_texts(1)[0] == "system: Be brief."
    assert current_session_settings() == {} and dex_session_tools() == [], "nothing outside a model Step"


async def test_your_own_graph_without_the_session_tools_or_hooks_ends_the_turn_before_the_model_call() -> (
    None
):
    model = ScriptedChatModel(responses=["Hello."])
    runner = LangGraphRunner(_own_graph(model, reads_settings=False))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    refused = await runner.run_model_step(_context(session, enabled_built_in_tools=("ask_user",)))

    assert isinstance(refused, TurnCompleted) and refused.turn_error is not None
    assert "did not take them" in refused.turn_error and "dex_session_tools()" in refused.turn_error
    hooked = LangGraphRunner(
        _own_graph(model, reads_settings=False), instructions_for_settings=lambda _: "Be brief."
    )
    refused = await hooked.run_model_step(session.context())
    assert isinstance(refused, TurnCompleted) and refused.turn_error is not None
    assert "no DexToolGate model hook" in refused.turn_error
    assert model.inputs == [], "refused before the model call"
    done = await runner.run_model_step(session.context())
    assert isinstance(done, TurnCompleted) and done.turn_error is None


def test_model_call_metadata_reads_langchains_records_in_the_conventions_spelling() -> None:
    openai_answer = AIMessage(
        "Hi",
        id="chatcmpl-1",
        response_metadata={"model_name": "gpt-5-2026", "model_provider": "openai", "finish_reason": "stop"},
    )
    started = ModelCallStart(metadata={"ls_model_name": "gpt-5", "ls_provider": "openai"})
    assert model_call_metadata(started, openai_answer) == (
        ModelCallMetadata("gpt-5", "gpt-5-2026", "openai", "chatcmpl-1", ("stop",))
    )
    anthropic_answer = AIMessage(
        "Hi", id="msg_1", response_metadata={"model_name": "claude-x", "stop_reason": "end_turn"}
    )
    assert model_call_metadata(ModelCallStart(metadata={"ls_provider": "anthropic"}), anthropic_answer) == (
        ModelCallMetadata(None, "claude-x", "anthropic", "msg_1", ("end_turn",))
    )
    gemini = model_call_metadata(
        ModelCallStart(metadata={"ls_provider": "google_genai"}), AIMessage("Hi", id="lc_run--1")
    )
    assert gemini == ModelCallMetadata(provider_name="gcp.gemini"), "LangChain's own ID names no response"
    assert model_call_metadata(None, None) is None


def test_model_call_metadata_reports_the_request_a_chat_model_described_at_its_start() -> None:
    # As ChatAnthropic reports a call: LangSmith parameters, invocation parameters with its own tool format,
    # and the serialized constructor arguments naming a proxy.
    started = ModelCallStart(
        metadata={
            "ls_provider": "anthropic",
            "ls_temperature": 0.5,
            "ls_max_tokens": 1024,
            "ls_stop": ["END"],
        },
        invocation_parameters={
            "top_p": 0.9,
            "tools": [
                {
                    "name": "lookup_order",
                    "description": "Look up an order.",
                    "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                },
                {"type": "web_search_20250305", "name": "web_search"},
            ],
        },
        constructor_arguments={"anthropic_api_url": "https://proxy.example:8443/anthropic"},
        messages=(SystemMessage("Be brief."), SystemMessage("Answer in French.")),
        started_at=10.0,
        first_chunk_at=10.25,
    )
    answer = AIMessage(
        "Salut",
        usage_metadata={
            "input_tokens": 40,
            "output_tokens": 2,
            "total_tokens": 42,
            "input_token_details": {"cache_creation": 30},
        },
    )
    metadata = model_call_metadata(started, answer)
    assert metadata is not None
    assert metadata.request_parameters == ModelRequestParameters(
        max_tokens=1024, temperature=0.5, top_p=0.9, stop_sequences=("END",)
    )
    assert (metadata.server_address, metadata.server_port) == ("proxy.example", 8443)
    assert metadata.is_streaming and metadata.time_to_first_chunk_seconds == 0.25
    assert metadata.cache_creation_input_tokens == 30
    assert metadata.system_instructions == "Be brief.\n\nAnswer in French."
    # The provider's built-in tool is not a function the session runs.
    assert [(tool.name, tool.description) for tool in metadata.tool_definitions] == [
        ("lookup_order", "Look up an order.")
    ]
    assert json.loads(str(metadata.tool_definitions[0].parameters))["properties"] == {
        "order_id": {"type": "string"}
    }
    # A call that did not stream, with no endpoint of its own, reports neither.
    plain = model_call_metadata(ModelCallStart(invocation_parameters={"max_tokens": 64}), None)
    assert plain is not None and plain.request_parameters.max_tokens == 64
    assert not plain.is_streaming and plain.time_to_first_chunk_seconds is None
    assert plain.server_address is None and plain.tool_definitions == ()
