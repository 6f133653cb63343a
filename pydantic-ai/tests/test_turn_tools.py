"""In process: the session's built-ins offered beside the agent's tools, task polling, and call metadata."""

from __future__ import annotations

import dataclasses

from dex_agents import (
    AgentTurnContext,
    ModelCallMetadata,
    ModelRequestParameters,
    ModelToolDescription,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolPolicy,
    ToolTaskHandlers,
    ToolTaskPoller,
    TurnCompleted,
)
from dex_agents.testing import SessionSide, with_model_call_scope
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.usage import RequestUsage

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai._call_metadata import genai_provider_name, model_call_metadata
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.support import respond, tool_call

ANSWER = '{"status":"answered","answer":"M"}'


async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id} shipped"


def with_built_ins(context: AgentTurnContext) -> AgentTurnContext:
    return dataclasses.replace(context, enabled_built_in_tools=("ask_user", "durable_wait"))


async def test_enabled_built_ins_are_offered_beside_the_agents_tools_and_their_calls_deferred() -> None:
    model = ScriptedModel(
        [
            respond(
                tool_call("ask_user", {"question": "Which size?"}, "ask-1"),
                tool_call("lookup_order", {"order_id": "A-1"}, "lookup-1"),
            ),
            respond(TextPart("Size M, and A-1 shipped.")),
        ]
    )
    runner = PydanticAiRunner(Agent(model, tools=[lookup_order]))
    session = SessionSide(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)})
    session.start_turn(runner.build_user_message("Order a shirt"))

    requested = await runner.run_model_step(with_built_ins(session.context()))

    assert isinstance(requested, ToolCallsRequested)
    assert model.calls[0].tool_names == ("lookup_order", "ask_user", "durable_wait")
    assert [(call.tool_name, call.arguments, call.policy) for call in requested.tool_calls] == [
        ("ask_user", '{"question":"Which size?"}', ToolPolicy(ToolEffect.READ, requires_approval=False)),
        ("lookup_order", '{"order_id":"A-1"}', ToolPolicy(ToolEffect.READ)),
    ]
    # The session carries out the built-in call; the runner resumes with its record like any other.
    session.defer(requested)
    session.finish("ask-1", ToolCallStatus.SUCCEEDED, output=ANSWER)
    session.finish("lookup-1", ToolCallStatus.SUCCEEDED, output=await session.execute(runner, "lookup-1"))

    final = await runner.run_model_step(with_built_ins(session.context()))

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert [part.model_response_str() for part in model.calls[1].tool_returns] == [ANSWER, "A-1 shipped"]


async def test_an_agent_tool_named_like_an_enabled_built_in_ends_the_turn_naming_both() -> None:
    async def ask_user(question: str) -> str:
        """The application's own question tool."""
        return question

    runner = PydanticAiRunner(Agent(ScriptedModel(["Hello."]), tools=[ask_user]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    outcome = await runner.run_model_step(with_built_ins(session.context()))

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is not None
    assert "dex-built-in-tools" in outcome.turn_error and "'ask_user'" in outcome.turn_error
    # Without the built-in, the same agent answers.
    assert isinstance(await runner.run_model_step(session.context()), TurnCompleted)


def test_the_session_polls_tasks_only_when_the_runner_has_handlers_or_an_mcp_source() -> None:
    agent = Agent(ScriptedModel(["Hello."]))
    plain = PydanticAiRunner(agent)
    with_handlers = PydanticAiRunner(agent, tool_tasks=ToolTaskHandlers({}))

    # The session reads a runner without a poller as "tasks are not polled", and tells tools so.
    assert plain.poll_tool_task is None and plain.cancel_tool_task is None
    assert not isinstance(plain, ToolTaskPoller) and not isinstance(
        with_model_call_scope(plain), ToolTaskPoller
    )
    assert isinstance(with_handlers, ToolTaskPoller) and isinstance(
        with_model_call_scope(with_handlers), ToolTaskPoller
    )


async def test_every_model_call_reports_its_model_provider_response_id_finish_reason_and_request() -> None:
    model = ScriptedModel(
        [respond(tool_call("lookup_order", {"order_id": "A-1"}, "lookup-1")), "A-1 shipped."],
        model_name="shop-model",
    )
    agent = Agent(
        model,
        tools=[lookup_order],
        system_prompt="You are the order desk.",
        instructions="Answer in one sentence.",
        model_settings={"top_p": 0.9},
    )
    # The runner's settings go over the agent's, as in `Agent.run(model_settings=...)`.
    runner = PydanticAiRunner(
        agent, model_settings={"temperature": 0.2, "max_tokens": 300, "stop_sequences": ["END"]}
    )
    session = SessionSide(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)})
    session.start_turn(runner.build_user_message("Where is A-1?"))

    requested = await runner.run_model_step(session.context())
    assert isinstance(requested, ToolCallsRequested)
    session.defer(requested)
    session.finish("lookup-1", ToolCallStatus.SUCCEEDED, output="A-1 shipped")
    completed = await runner.run_model_step(session.context())

    assert requested.model_call_metadata is not None
    first_chunk = requested.model_call_metadata.time_to_first_chunk_seconds
    assert first_chunk is not None and 0 <= first_chunk < 5
    offered = ModelToolDescription(
        name="lookup_order",
        description="Look up an order.",
        parameters=(
            '{"additionalProperties":false,"properties":{"order_id":{"type":"string"}},'
            '"required":["order_id"],"type":"object"}'
        ),
    )
    assert dataclasses.replace(requested.model_call_metadata, time_to_first_chunk_seconds=None) == (
        ModelCallMetadata(
            request_model="shop-model",
            response_model="shop-model",
            provider_name="dex.scripted",
            response_id="shop-model-1",
            finish_reasons=("tool_calls",),
            request_parameters=ModelRequestParameters(
                max_tokens=300, temperature=0.2, top_p=0.9, stop_sequences=("END",)
            ),
            is_streaming=True,
            system_instructions="You are the order desk.\n\nAnswer in one sentence.",
            tool_definitions=(offered,),
        )
    )
    assert isinstance(completed, TurnCompleted)
    assert completed.model_call_metadata is not None
    assert (completed.model_call_metadata.response_id, completed.model_call_metadata.finish_reasons) == (
        "shop-model-2",
        ("stop",),
    )
    # The answering call was offered the same tools, under the same settings and instructions.
    assert completed.model_call_metadata.tool_definitions == (offered,)
    assert completed.model_call_metadata.request_parameters.temperature == 0.2
    assert (
        completed.model_call_metadata.system_instructions == requested.model_call_metadata.system_instructions
    )


def test_metadata_uses_the_providers_own_finish_reason_and_the_conventions_provider_names() -> None:
    raw = ModelResponse(
        parts=[TextPart("Hi")],
        model_name="gemini-2.5-flash-001",
        provider_name="google",
        provider_response_id="resp-7",
        provider_details={"finish_reason": "STOP"},
        finish_reason="stop",
    )
    metadata = model_call_metadata(raw, ScriptedModel(["Hi"], model_name="gemini-2.5-flash"))
    assert metadata == ModelCallMetadata(
        request_model="gemini-2.5-flash",
        response_model="gemini-2.5-flash-001",
        provider_name="gcp.gemini",
        response_id="resp-7",
        finish_reasons=("STOP",),
    )
    normalized_only = dataclasses.replace(raw, provider_details=None, finish_reason="length")
    assert model_call_metadata(normalized_only, None).finish_reasons == ("length",)
    assert model_call_metadata(normalized_only, None).request_model is None
    # The endpoint the provider's client called, and the prompt cache writes the provider reported.
    called = dataclasses.replace(
        raw,
        provider_url="https://generativelanguage.googleapis.com/v1beta/",
        usage=RequestUsage(input_tokens=900, cache_write_tokens=800),
    )
    metadata = model_call_metadata(called, None)
    assert (metadata.server_address, metadata.server_port, metadata.cache_creation_input_tokens) == (
        "generativelanguage.googleapis.com",
        443,
        800,
    )
    local = model_call_metadata(dataclasses.replace(raw, provider_url="http://localhost:11434/v1"), None)
    assert (local.server_address, local.server_port) == ("localhost", 11434)
    assert [genai_provider_name(name) for name in ("bedrock", "mistral", "xai", "openai", "anthropic")] == [
        "aws.bedrock",
        "mistral_ai",
        "x_ai",
        "openai",
        "anthropic",
    ]
