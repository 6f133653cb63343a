"""The runner against ADK's real agent loop with a canned model, without a server.

Each test plays the session's side of the runner contract (`tests/support.py`) and asserts what a user
of the session would notice: which calls become Steps, what the model sees, what is stored.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, cast

import pytest
from dex_agents import WRITE_TODOS, ModelRequestParameters, build_plan_note, current_tool_execution
from dex_agents.runner import (
    OUTCOME_UNKNOWN_TOOL_RESULT,
    ToolCallsRequested,
    ToolExecutionError,
    ToolPolicy,
    TurnCompleted,
    TurnContinued,
)
from dex_agents.testing import SessionSide
from dex_agents.values import (
    AgentPlan,
    AgentPlanTask,
    FrameworkMessage,
    InteractionMode,
    MessageRole,
    PlanStatus,
    PlanTaskStatus,
    ToolCallStatus,
    ToolEffect,
)
from google.adk.agents import (
    LlmAgent,
    LoopAgent,  # pyright: ignore[reportDeprecated]
    ParallelAgent,  # pyright: ignore[reportDeprecated]
    SequentialAgent,  # pyright: ignore[reportDeprecated]
)
from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.artifacts import InMemoryArtifactService
from google.adk.code_executors import UnsafeLocalCodeExecutor
from google.adk.code_executors.built_in_code_executor import BuiltInCodeExecutor
from google.adk.events import Event
from google.adk.models.google_llm import Gemini
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from dex_agents_google_adk import (
    AGENT_TRANSFER_EVENT_TYPE,
    DEFAULT_USER_ID,
    UNKNOWN_TOOL_POLICY,
    AdkServices,
    GoogleAdkRunner,
)
from dex_agents_google_adk._call_metadata import ModelCallTiming, model_call_metadata
from dex_agents_google_adk._gate import DEFERRED_PLACEHOLDER
from tests.specifics_agents import OneAfterAnother
from tests.support import CannedLlm, call, inventory_toolset, respond


def adk_message(role: MessageRole, event: Event) -> FrameworkMessage:
    """A stored message holding an ADK event as it is, as a session brought over from plain ADK has it."""
    return FrameworkMessage(role=role, framework_item=event.model_dump_json(exclude_none=True), text="")


def build_app(model: CannedLlm, runs: list[str], callbacks: list[str] | None = None) -> App:
    def get_weather(city: str, tool_context: ToolContext) -> dict[str, Any]:
        """Return the weather of a city."""
        execution = current_tool_execution()
        key = execution.idempotency_key if execution is not None else None
        runs.append(f"get_weather {city} id={tool_context.function_call_id} key={key}")
        return {"forecast": f"sunny in {city}"}

    def delete_file(path: str) -> str:
        """Delete a file."""
        runs.append(f"delete_file {path}")
        return f"deleted {path}"

    def crash() -> str:
        """Fail like a broken dependency."""
        raise ConnectionError("backend unreachable")

    def refuse() -> str:
        """Fail in a way the model should read."""
        raise ToolExecutionError("the vault is closed")

    def note_tool(tool: BaseTool, args: dict[str, Any], tool_context: ToolContext) -> dict[str, Any] | None:
        del args, tool_context
        if callbacks is not None:
            callbacks.append(f"before {tool.name}")
        return None

    def note_result(
        tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, tool_response: dict[str, Any]
    ) -> dict[str, Any] | None:
        del args, tool_context
        if callbacks is not None:
            callbacks.append(f"after {tool.name}")
        # A callback that rewrites results must rewrite each real result once, not a recorded one again.
        # ADK hands a string result over as it is, whatever the annotation says.
        response = cast(object, tool_response)
        return {**response, "checked": True} if isinstance(response, dict) else None

    agent = LlmAgent(
        name="assistant",
        model=model,
        instruction="You help with the weather and with files.",
        tools=[get_weather, FunctionTool(delete_file, require_confirmation=True), crash, refuse],
        before_tool_callback=note_tool,
        after_tool_callback=note_result,
    )
    return App(name="weather_desk", root_agent=agent)


async def test_recorded_results_reach_the_model_as_adk_function_responses_and_no_bookkeeping_is_stored() -> (
    None
):
    model = CannedLlm(
        responses=[
            respond(
                call("get_weather", {"city": "Paris"}, "ok"),
                call("get_weather", {"city": "Oslo"}, "failed"),
                call("delete_file", {"path": "/etc"}, "rejected"),
                call("delete_file", {"path": "/tmp"}, "unknown"),
            ),
            respond("Paris is sunny; the rest did not work."),
        ]
    )
    runs: list[str] = []
    session = SessionSide()
    session.start_turn(GoogleAdkRunner(build_app(model, runs)).build_user_message("Do it all"))
    first = await GoogleAdkRunner(build_app(model, runs)).run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("ok", ToolCallStatus.SUCCEEDED, output=json.dumps({"forecast": "sunny in Paris"}))
    session.finish("failed", ToolCallStatus.FAILED, error="weather service down")
    session.finish("rejected", ToolCallStatus.REJECTED, rejection_message="Never touch /etc.")
    session.finish("unknown", ToolCallStatus.OUTCOME_UNKNOWN, error="Worker lost")

    # A different runner object, as in another Worker process: everything comes from the arguments.
    final = await GoogleAdkRunner(build_app(model, runs)).run_model_step(session.context())

    assert model.calls == 2 and runs == []
    assert model.responses_seen(2) == [
        {"forecast": "sunny in Paris"},
        {"error": "The tool call failed: weather service down"},
        {"error": "Never touch /etc."},
        {"error": OUTCOME_UNKNOWN_TOOL_RESULT},
    ], "a JSON object result as itself, anything else as ADK's error response, the user's own rejection text"
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    # What a UI reads is the session's own text for each record, verbatim, without ADK's envelope.
    assert [m.tool_output for m in final.new_messages if m.role is MessageRole.TOOL] == [
        json.dumps({"forecast": "sunny in Paris"}),
        "The tool call failed: weather service down",
        "Never touch /etc.",
        OUTCOME_UNKNOWN_TOOL_RESULT,
    ]
    for message in final.new_messages:
        assert "adk_request_confirmation" not in message.framework_item
        assert DEFERRED_PLACEHOLDER["status"] not in message.framework_item
        assert Event.model_validate_json(message.framework_item).content is not None


async def test_an_unknown_tool_next_to_a_real_one_is_failed_and_the_real_one_is_confirmed() -> None:
    model = CannedLlm(
        responses=[
            respond(call("get_weather", {"city": "Rome"}, "real"), call("teleport", {}, "fake")),
            respond("Done."),
        ]
    )
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    session.finish("real", ToolCallStatus.SUCCEEDED, output="sunny")
    session.finish("fake", ToolCallStatus.FAILED, error="no teleport")

    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted)
    assert model.calls == 2
    assert model.responses_seen(2) == [{"result": "sunny"}, {"error": "The tool call failed: no teleport"}]


async def test_tool_call_ids_are_non_empty_free_of_slashes_and_unique_within_the_turn() -> None:
    model = CannedLlm(
        responses=[
            respond(call("get_weather", {"city": "A"}), call("get_weather", {"city": "B"}, "x/y")),
            respond(call("get_weather", {"city": "C"}, "same"), call("get_weather", {"city": "D"}, "same")),
            respond("Done."),
        ]
    )
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    for tool_call_id in session.records:
        session.finish(tool_call_id, ToolCallStatus.SUCCEEDED, output=f"out {tool_call_id}")
    second = await runner.run_model_step(session.context())
    assert isinstance(second, ToolCallsRequested)
    session.defer(second)
    for deferred in second.tool_calls:
        session.finish(deferred.tool_call_id, ToolCallStatus.SUCCEEDED, output=f"out {deferred.tool_call_id}")

    final = await runner.run_model_step(session.context())

    ids = [c.tool_call_id for c in (*first.tool_calls, *second.tool_calls)]
    assert len(set(ids)) == 4 and all(ids) and not any("/" in i for i in ids)
    assert ids[2] == "same", "a model's own valid ID is kept"
    assert isinstance(final, TurnCompleted)
    assert model.responses_seen(3) == [{"result": f"out {i}"} for i in ids]


async def test_executing_a_call_runs_the_real_tool_once_through_adks_tool_pipeline() -> None:
    model = CannedLlm(
        responses=[
            respond(
                call("get_weather", {"city": "Rome"}, "ok"),
                call("delete_file", {"path": "/tmp/a"}, "confirmed"),
                call("crash", {}, "crash"),
                call("refuse", {}, "refuse"),
            )
        ]
    )
    runs: list[str] = []
    callbacks: list[str] = []
    runner = GoogleAdkRunner(build_app(model, runs, callbacks))
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)

    assert await session.execute(runner, "ok") == '{"forecast": "sunny in Rome", "checked": true}'
    assert runs == ["get_weather Rome id=ok key=session-1/turn-1/ok"]
    assert callbacks == ["before get_weather", "after get_weather"], (
        "the agent's tool callbacks run once, in the tool Step, and none ran in the model Step"
    )
    # The session's approval stands for ADK's confirmation: the tool runs without asking again.
    assert await session.execute(runner, "confirmed") == "deleted /tmp/a"
    # Any other exception is a Step failure, which the session retries or records by the tool's effect.
    with pytest.raises(ConnectionError):
        await session.execute(runner, "crash")
    with pytest.raises(ToolExecutionError, match="the vault is closed"):
        await session.execute(runner, "refuse")
    assert model.calls == 1, "running a tool never calls the model"


async def test_arguments_that_are_not_a_json_object_fail_the_call_with_a_message_the_model_reads() -> None:
    model = CannedLlm(responses=[respond(call("get_weather", {"city": "Rome"}, "w"))])
    runs: list[str] = []
    runner = GoogleAdkRunner(build_app(model, runs))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)
    session.records["w"] = dataclasses.replace(session.records["w"], arguments='["Rome"]')

    with pytest.raises(
        ToolExecutionError, match="arguments must be a JSON object; the arguments of 'get_weather'"
    ):
        await session.execute(runner, "w")
    assert runs == []


async def test_text_arrives_as_live_deltas_that_add_up_to_the_stored_text() -> None:
    model = CannedLlm(responses=[respond("It is sunny in Rome today.")])
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert len(session.text_deltas()) > 1
    assert "".join(session.text_deltas()) == "It is sunny in Rome today."
    assert [m.text for m in outcome.new_messages] == ["It is sunny in Rome today."]
    assert outcome.usage.model_calls == 1 and outcome.usage.input_tokens == 10


async def test_a_second_model_call_within_one_step_ends_the_turn_instead_of_running() -> None:
    model = CannedLlm(responses=[respond("First agent done."), respond("Second agent.")])
    pipeline = OneAfterAnother(
        name="pipeline",
        sub_agents=[
            LlmAgent(name="first", model=model, instruction="one"),
            LlmAgent(name="second", model=model, instruction="two"),
        ],
    )
    runner = GoogleAdkRunner(pipeline)
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))

    outcome = await runner.run_model_step(session.context())

    assert model.calls == 1
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error is not None and "second model call" in outcome.turn_error


async def test_a_turn_failure_note_reaches_the_model_as_user_text() -> None:
    model = CannedLlm(responses=[respond("Understood.")])
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.store(
        [runner.build_user_message("[Dex] The previous turn failed after these tool calls ran: ...")]
    )
    session.start_turn(runner.build_user_message("Did it work?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert model.texts_seen(1) == [
        "[Dex] The previous turn failed after these tool calls ran: ...",
        "Did it work?",
    ]


async def test_adks_require_confirmation_becomes_a_durable_approval_unless_a_policy_decides() -> None:
    def respond_twice() -> CannedLlm:
        return CannedLlm(
            responses=[
                respond(call("delete_file", {"path": "/a"}, "d"), call("get_weather", {"city": "X"}, "w"))
            ]
        )

    async def policies(session: SessionSide) -> list[bool]:
        runner = GoogleAdkRunner(build_app(respond_twice(), []))
        session.start_turn(runner.build_user_message("go"))
        outcome = await runner.run_model_step(session.context())
        assert isinstance(outcome, ToolCallsRequested)
        return [deferred.policy.is_approval_required for deferred in outcome.tool_calls]

    read_everything = {
        "delete_file": ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
        "get_weather": ToolPolicy(ToolEffect.READ),
    }
    assert await policies(SessionSide(tool_policies={"get_weather": ToolPolicy(ToolEffect.READ)})) == [
        True,
        False,
    ]
    assert await policies(SessionSide(tool_policies=read_everything)) == [False, False]


async def test_a_confirmation_without_the_sessions_result_never_runs_the_tool_in_a_model_step() -> None:
    # History brought over from a plain ADK session: a confirmed write waits for ADK's confirmation, and
    # the client answers it as ADK's own clients do, with no result the session recorded.
    model = CannedLlm(responses=[respond("Hello.")])
    runs: list[str] = []
    runner = GoogleAdkRunner(build_app(model, runs))
    original = types.FunctionCall(id="call-1", name="delete_file", args={"path": "/tmp/x"})
    confirmation_request = types.FunctionCall(
        id="confirm-1",
        name="adk_request_confirmation",
        args={"originalFunctionCall": original.model_dump(exclude_none=True), "toolConfirmation": {}},
    )
    session = SessionSide()
    session.store(
        [
            runner.build_user_message("Delete /tmp/x"),
            adk_message(
                MessageRole.ASSISTANT,
                Event(author="assistant", content=respond(types.Part(function_call=original))),
            ),
            adk_message(
                MessageRole.ASSISTANT,
                Event(
                    author="assistant",
                    long_running_tool_ids={"confirm-1"},
                    content=respond(types.Part(function_call=confirmation_request)),
                ),
            ),
        ]
    )
    adk_confirmation = types.FunctionResponse(
        id="confirm-1", name="adk_request_confirmation", response={"confirmed": True}
    )
    session.start_turn(
        adk_message(
            MessageRole.USER,
            Event(
                author="user",
                content=types.Content(role="user", parts=[types.Part(function_response=adk_confirmation)]),
            ),
        )
    )

    outcome = await runner.run_model_step(session.context())

    assert runs == [], "no tool runs inside a model Step, confirmed or not"
    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is not None
    assert "'delete_file'" in outcome.turn_error and "resolve_interrupt" in outcome.turn_error
    assert model.calls == 0
    session.start_turn(runner.build_user_message("Hi"))
    after = await runner.run_model_step(session.context())
    assert isinstance(after, TurnCompleted) and after.turn_error is None, "the session stays usable"
    assert [m.text for m in after.new_messages] == ["Hello."] and runs == []


async def test_tools_save_artifacts_in_the_services_the_runner_is_given() -> None:
    async def write_report(title: str, tool_context: ToolContext) -> str:
        """Save a report."""
        version = await tool_context.save_artifact(f"{title}.txt", types.Part(text=f"report {title}"))
        return f"saved version {version}"

    model = CannedLlm(responses=[respond(call("write_report", {"title": "q3"}, "call-1"))])
    artifacts = InMemoryArtifactService()
    agent = LlmAgent(name="writer", model=model, instruction="Write reports.", tools=[write_report])
    runner = GoogleAdkRunner(agent, services=AdkServices(artifact_service=artifacts))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Write the q3 report"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    session.defer(outcome)

    assert await session.execute(runner, "call-1") == "saved version 0"

    saved = await artifacts.load_artifact(
        app_name="writer", user_id=DEFAULT_USER_ID, session_id="session-1", filename="q3.txt"
    )
    assert saved is not None and saved.text == "report q3"


async def test_state_written_with_a_model_response_survives_into_the_next_turn() -> None:
    model = CannedLlm(responses=[respond("Blue."), respond("You said blue before.")])
    agent = LlmAgent(
        name="memory",
        model=model,
        instruction="Earlier answer: {last_answer?}",
        output_key="last_answer",
    )
    runner = GoogleAdkRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Pick a colour"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, TurnCompleted)
    session.store(first.new_messages)
    session.start_turn(runner.build_user_message("What did you pick?"))

    await runner.run_model_step(session.context())

    # `output_key` writes the answer into session state on the model's event, which the session stored.
    assert "Earlier answer: Blue." in model.instructions_seen[1]


async def test_state_an_agent_callback_writes_survives_into_the_next_turn() -> None:
    def count_visit(callback_context: CallbackContext) -> None:
        visits = callback_context.state.get("visits", 0)
        callback_context.state["visits"] = int(visits) + 1

    model = CannedLlm(responses=[respond("Hello."), respond("Hello again.")])
    agent = LlmAgent(
        name="greeter", model=model, instruction="Visits so far: {visits?}", after_agent_callback=count_visit
    )
    runner = GoogleAdkRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, TurnCompleted)
    assert [m.text for m in first.new_messages] == ["Hello."], "a state-only event is not a message"
    session.store(first.new_messages)
    session.start_turn(runner.build_user_message("Hi again"))

    await runner.run_model_step(session.context())

    assert "Visits so far: 1" in model.instructions_seen[1]


# ADK's own AgentTool builds its inner Runner with the deprecated `plugins` argument.
@pytest.mark.filterwarnings("ignore:The `plugins` argument is deprecated:DeprecationWarning")
async def test_an_agent_tool_runs_its_sub_agent_inside_the_tool_step() -> None:
    sub_model = CannedLlm(responses=[respond("The capital is Paris.")])
    geographer = LlmAgent(name="geographer", model=sub_model, instruction="Answer.", description="Capitals.")
    model = CannedLlm(
        responses=[respond(call("geographer", {"request": "capital of France?"}, "g-1")), respond("Paris.")]
    )
    runner = GoogleAdkRunner(
        LlmAgent(name="router", model=model, instruction="Route.", tools=[AgentTool(geographer)])
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("What is the capital of France?"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    assert sub_model.calls == 0, "the sub-agent is a tool: it does not run in the model Step"
    session.defer(outcome)

    output = await session.execute(runner, "g-1")

    assert output == "The capital is Paris." and sub_model.calls == 1
    session.finish("g-1", ToolCallStatus.SUCCEEDED, output=output)
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted)
    assert model.responses_seen(2) == [{"result": "The capital is Paris."}]


async def test_a_transfer_continues_the_turn_with_the_target_agent_one_model_call_per_step() -> None:
    model = CannedLlm(
        responses=[
            respond("Let me pass you on.", call("transfer_to_agent", {"agent_name": "billing"}, "t-1")),
            respond(call("refund", {"invoice": "I-9"}, "r-1")),
            respond("Refunded I-9."),
        ]
    )
    runs: list[str] = []

    def refund(invoice: str) -> str:
        """Refund an invoice."""
        runs.append(invoice)
        return f"refunded {invoice}"

    def build_runner() -> GoogleAdkRunner:
        billing = LlmAgent(
            name="billing", model=model, instruction="Bill.", description="Handles billing.", tools=[refund]
        )
        return GoogleAdkRunner(
            LlmAgent(name="front", model=model, instruction="Route.", sub_agents=[billing])
        )

    session = SessionSide()
    session.start_turn(build_runner().build_user_message("Refund invoice I-9"))
    first = await build_runner().run_model_step(session.context())
    assert isinstance(first, TurnContinued), first
    assert model.calls == 1, "the target agent's model call is the next Step's"
    session.framework_run_state = first.framework_run_state

    # Each Step on a fresh runner, as in another Worker: the run state says which agent is active.
    second = await build_runner().run_model_step(session.context())
    assert isinstance(second, ToolCallsRequested)
    assert [(c.tool_name, json.loads(c.tool_source_reference or "{}")) for c in second.tool_calls] == [
        ("refund", {"agent": "billing"})
    ]
    session.defer(second)
    result = await session.execute(build_runner(), "r-1")
    session.finish("r-1", ToolCallStatus.SUCCEEDED, output=result)
    final = await build_runner().run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert runs == ["I-9"] and model.calls == 3
    assert "Refund an invoice." not in model.instructions_seen[0] and "Bill." in model.instructions_seen[1]
    stored = [(m.role, m.text or m.tool_output or m.tool_name) for m in final.new_messages]
    assert stored == [
        (MessageRole.ASSISTANT, "Let me pass you on."),
        (MessageRole.ASSISTANT, "transfer_to_agent"),
        (MessageRole.TOOL, "Transferred to agent billing."),
        (MessageRole.ASSISTANT, "refund"),
        (MessageRole.TOOL, "refunded I-9"),
        (MessageRole.ASSISTANT, "Refunded I-9."),
    ]
    authors = [Event.model_validate_json(m.framework_item).author for m in final.new_messages]
    assert authors == ["front", "front", "front", "billing", "billing", "billing"], "each names who spoke"
    assert [json.loads(e.payload) for e in session.events if e.type == AGENT_TRANSFER_EVENT_TYPE] == [
        {"source_agent": "front", "target_agent": "billing"}
    ]


async def test_a_transfer_next_to_another_call_is_not_carried_out_and_the_model_reads_why() -> None:
    model = CannedLlm(
        responses=[
            respond(call("transfer_to_agent", {"agent_name": "billing"}, "t-1"), call("note", {}, "n-1")),
            respond("I keep it."),
        ]
    )

    def note() -> str:
        """Take a note."""
        return "noted"

    billing = LlmAgent(name="billing", model=model, instruction="Bill.", description="Handles billing.")
    runner = GoogleAdkRunner(
        LlmAgent(name="front", model=model, instruction="Route.", sub_agents=[billing], tools=[note])
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("I have a billing question"))
    outcome = await runner.run_model_step(session.context())
    assert isinstance(outcome, ToolCallsRequested)
    assert outcome.tool_calls[0].policy == UNKNOWN_TOOL_POLICY, "nothing to approve"
    session.defer(outcome)

    with pytest.raises(
        ToolExecutionError, match="was not carried out: call transfer_to_agent alone"
    ) as error:
        await session.execute(runner, "t-1")
    assert "billing" in error.value.message
    session.finish("t-1", ToolCallStatus.FAILED, error=error.value.message)
    session.finish("n-1", ToolCallStatus.SUCCEEDED, output="noted")
    final = await runner.run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.responses_seen(2) == [
        {"error": f"The tool call failed: {error.value.message}"},
        {"result": "noted"},
    ]


async def test_without_streaming_the_answer_arrives_as_one_delta() -> None:
    model = CannedLlm(responses=[respond("It is sunny in Rome today.")])
    runner = GoogleAdkRunner(build_app(model, []), run_config=RunConfig())
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert session.text_deltas() == ["It is sunny in Rome today."]
    # A call ADK made without stream=True is not a streaming request on its chat span.
    metadata = outcome.model_call_metadata
    assert metadata is not None and not metadata.is_streaming
    assert metadata.time_to_first_chunk_seconds is None


async def test_thoughts_stream_as_reasoning_deltas_and_are_not_the_stored_answer() -> None:
    model = CannedLlm(responses=[respond(types.Part(text="Checking the forecast.", thought=True), "Sunny.")])
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather?"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted)
    assert "".join(session.reasoning_deltas()).strip() == "Checking the forecast."
    assert "".join(session.text_deltas()).strip() == "Sunny."
    assert [m.text for m in outcome.new_messages] == ["Sunny."]


async def test_a_before_model_callback_may_answer_instead_of_the_model() -> None:
    def answer_from_cache(callback_context: CallbackContext, llm_request: LlmRequest) -> LlmResponse | None:
        del callback_context, llm_request
        return LlmResponse(content=respond("From the cache."))

    model = CannedLlm(responses=[])
    runner = GoogleAdkRunner(
        LlmAgent(name="cached", model=model, instruction="Answer.", before_model_callback=answer_from_cache)
    )
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert [m.text for m in outcome.new_messages] == ["From the cache."]
    assert model.calls == 0 and outcome.usage.model_calls == 0
    assert session.text_deltas() == ["From the cache."]


async def test_an_after_model_callback_that_changes_the_response_decides_the_deferred_calls() -> None:
    def drop_deletes(callback_context: CallbackContext, llm_response: LlmResponse) -> LlmResponse | None:
        del callback_context
        if llm_response.partial or llm_response.content is None:
            return None
        kept = [
            part
            for part in llm_response.content.parts or ()
            if part.function_call is None or part.function_call.name != "delete_file"
        ]
        return LlmResponse(
            content=types.Content(role="model", parts=kept), usage_metadata=llm_response.usage_metadata
        )

    model = CannedLlm(
        responses=[
            respond(call("get_weather", {"city": "Rome"}, "w"), call("delete_file", {"path": "/"}, "d")),
            respond("Rome is sunny."),
        ]
    )
    agent = build_app(model, []).root_agent
    assert isinstance(agent, LlmAgent)
    agent.after_model_callback = drop_deletes
    runner = GoogleAdkRunner(agent)
    session = SessionSide()
    session.start_turn(runner.build_user_message("Weather, and wipe the disk"))

    outcome = await runner.run_model_step(session.context())

    assert isinstance(outcome, ToolCallsRequested)
    assert [deferred.tool_call_id for deferred in outcome.tool_calls] == ["w"]
    session.defer(outcome)
    session.finish("w", ToolCallStatus.SUCCEEDED, output="sunny")
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted)
    assert model.responses_seen(2) == [{"result": "sunny"}]


_PROMPT_USAGE = types.GenerateContentResponseUsageMetadata(prompt_token_count=30, total_token_count=30)


def blocked_prompt(reason: types.BlockedReason, message: str | None = None) -> LlmResponse:
    """What ADK's Gemini model makes of a response whose prompt the provider blocked."""
    feedback = types.GenerateContentResponsePromptFeedback(block_reason=reason, block_reason_message=message)
    response = types.GenerateContentResponse(prompt_feedback=feedback, usage_metadata=_PROMPT_USAGE)
    return LlmResponse.create(response)


def stopped_without_content(reason: types.FinishReason, message: str | None = None) -> LlmResponse:
    """What ADK's Gemini model makes of a candidate that stopped for ``reason`` with no content."""
    candidate = types.Candidate(finish_reason=reason, finish_message=message)
    response = types.GenerateContentResponse(candidates=[candidate], usage_metadata=_PROMPT_USAGE)
    return LlmResponse.create(response)


@pytest.mark.parametrize(
    ("response", "turn_error"),
    [
        pytest.param(
            blocked_prompt(types.BlockedReason.SAFETY, "The prompt was blocked."),
            "the model provider blocked the prompt (SAFETY): The prompt was blocked.",
            id="prompt-safety",
        ),
        pytest.param(
            blocked_prompt(types.BlockedReason.OTHER),
            "the model provider blocked the prompt (OTHER)",
            id="prompt-other",
        ),
        pytest.param(
            stopped_without_content(types.FinishReason.PROHIBITED_CONTENT, "Prohibited."),
            "the model call ended without a usable answer (PROHIBITED_CONTENT): Prohibited.",
            id="finish-prohibited",
        ),
        pytest.param(
            stopped_without_content(types.FinishReason.RECITATION),
            "the model call ended without a usable answer (RECITATION)",
            id="finish-recitation",
        ),
        pytest.param(
            stopped_without_content(types.FinishReason.MAX_TOKENS),
            "the model call ended without a usable answer (MAX_TOKENS): the answer reached the output "
            "token limit (max_output_tokens)",
            id="finish-max-tokens",
        ),
    ],
)
async def test_a_model_call_the_provider_refuses_ends_the_turn_instead_of_being_retried(
    response: LlmResponse, turn_error: str
) -> None:
    model = CannedLlm(responses=[response])
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Something the provider refuses"))

    outcome = await runner.run_model_step(session.context())

    assert model.calls == 1
    assert isinstance(outcome, TurnCompleted) and outcome.turn_error == turn_error
    assert list(outcome.new_messages) == []
    assert outcome.usage.model_calls == 1 and outcome.usage.input_tokens == 30, "the refused call was paid"


@pytest.mark.parametrize(
    ("response", "error"),
    [
        pytest.param(
            stopped_without_content(types.FinishReason.MALFORMED_FUNCTION_CALL, "Bad call."),
            "the model call failed: MALFORMED_FUNCTION_CALL: Bad call.",
            id="finish-malformed-call",
        ),
        pytest.param(
            stopped_without_content(types.FinishReason.OTHER),
            "the model call failed: OTHER",
            id="finish-other",
        ),
        pytest.param(
            blocked_prompt(types.BlockedReason.BLOCKED_REASON_UNSPECIFIED),
            "the model call failed: BLOCKED_REASON_UNSPECIFIED",
            id="prompt-unspecified",
        ),
    ],
)
async def test_a_model_error_a_new_attempt_may_cure_fails_the_step_so_run_model_retries(
    response: LlmResponse, error: str
) -> None:
    model = CannedLlm(responses=[response])
    runner = GoogleAdkRunner(build_app(model, []))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Hi"))

    with pytest.raises(RuntimeError) as raised:
        await runner.run_model_step(session.context())

    assert str(raised.value) == error
    assert model.calls == 1


async def test_a_refused_first_call_of_a_pipeline_names_the_refusal_not_a_second_call() -> None:
    model = CannedLlm(responses=[blocked_prompt(types.BlockedReason.BLOCKLIST), respond("Second agent.")])
    pipeline = OneAfterAnother(
        name="pipeline",
        sub_agents=[
            LlmAgent(name="first", model=model, instruction="one"),
            LlmAgent(name="second", model=model, instruction="two"),
        ],
    )
    runner = GoogleAdkRunner(pipeline)
    session = SessionSide()
    session.start_turn(runner.build_user_message("go"))

    outcome = await runner.run_model_step(session.context())

    assert model.calls == 1
    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error == "the model provider blocked the prompt (BLOCKLIST)"


def test_an_agent_whose_code_executor_runs_model_written_code_itself_is_refused() -> None:
    analyst = LlmAgent(name="analyst", model=CannedLlm(), code_executor=UnsafeLocalCodeExecutor())
    desk = LlmAgent(name="desk", model=CannedLlm(), sub_agents=[analyst])

    with pytest.raises(TypeError, match="agent 'analyst' has code_executor=UnsafeLocalCodeExecutor") as error:
        GoogleAdkRunner(App(name="desk", root_agent=desk))
    assert "BuiltInCodeExecutor" in str(error.value), "the error names the fix"
    with pytest.raises(TypeError, match="agent 'solo'"):
        GoogleAdkRunner(LlmAgent(name="solo", model=CannedLlm(), code_executor=UnsafeLocalCodeExecutor()))

    # The provider runs BuiltInCodeExecutor's code inside the model call: allowed, and a documented limit.
    GoogleAdkRunner(LlmAgent(name="builtin", model=CannedLlm(), code_executor=BuiltInCodeExecutor()))


def test_model_call_metadata_reads_the_requests_config_and_the_models_endpoint() -> None:
    lookup = types.FunctionDeclaration(
        name="lookup_order",
        description="Look up an order.",
        parameters_json_schema={"type": "object", "properties": {"order_id": {"type": "string"}}},
    )
    request = LlmRequest(
        model="gemini-2.5-flash",
        config=types.GenerateContentConfig(
            system_instruction=types.Content(
                role="system", parts=[types.Part(text="You handle orders."), types.Part(text="Be brief.")]
            ),
            temperature=0.5,
            top_p=0.9,
            max_output_tokens=256,
            stop_sequences=["END"],
            presence_penalty=0.1,
            frequency_penalty=0.2,
            tools=[
                types.Tool(function_declarations=[lookup]),
                types.Tool(google_search=types.GoogleSearch()),
            ],
        ),
    )
    model = Gemini(model="gemini-2.5-flash", base_url="https://gateway.example:8443/gemini")

    metadata = model_call_metadata(request, None, model, ModelCallTiming(True, 0.125))

    assert metadata.request_model == "gemini-2.5-flash" and metadata.provider_name == "gcp.gemini"
    assert metadata.request_parameters == ModelRequestParameters(
        max_tokens=256,
        temperature=0.5,
        top_p=0.9,
        stop_sequences=("END",),
        frequency_penalty=0.2,
        presence_penalty=0.1,
    )
    assert (metadata.server_address, metadata.server_port) == ("gateway.example", 8443)
    assert metadata.is_streaming and metadata.time_to_first_chunk_seconds == 0.125
    assert metadata.system_instructions == "You handle orders.\n\nBe brief."
    # Google Search is Google's own tool, not a function declaration the session runs.
    [described] = metadata.tool_definitions
    assert (described.name, described.description) == ("lookup_order", "Look up an order.")
    assert json.loads(str(described.parameters))["properties"] == {"order_id": {"type": "string"}}
    # Gemini's default endpoint is not named by the model object, so it stays unset.
    plain = model_call_metadata(LlmRequest(model="gemini-2.5-flash"), None, Gemini(model="gemini-2.5-flash"))
    assert plain.server_address is None and plain.server_port is None and not plain.is_streaming


def test_the_runner_lists_every_agents_own_tools_and_none_when_a_toolset_lists_them_at_run_time(
    tmp_path: Path,
) -> None:
    model = CannedLlm()
    helper = LlmAgent(name="helper", model=model, tools=[FunctionTool(find_slots)])
    root = LlmAgent(name="desk", model=model, tools=[book_slot, AgentTool(helper)], sub_agents=[])
    assert GoogleAdkRunner(root).agent_tool_names() == {"book_slot", "helper"}
    with_sub_agent = LlmAgent(name="desk", model=model, tools=[book_slot], sub_agents=[helper])
    assert GoogleAdkRunner(with_sub_agent).agent_tool_names() == {"book_slot", "find_slots"}
    # Listing an MCP toolset would contact its server; the session checks the policies later.
    with_toolset = LlmAgent(name="desk", model=model, tools=[book_slot, inventory_toolset(tmp_path / "log")])
    assert GoogleAdkRunner(with_toolset).agent_tool_names() is None


def find_slots(day: str) -> str:
    """Find free slots on a day."""
    return f"09:00 on {day}"


def book_slot(slot: str) -> str:
    """Book a slot."""
    return f"booked {slot}"


# ADK 2 deprecates its workflow agents in favour of Workflow; applications still compose with them.
WORKFLOW_AGENT_DEPRECATION = "ignore:.*is deprecated in favor of Workflow:DeprecationWarning"


@pytest.mark.filterwarnings(WORKFLOW_AGENT_DEPRECATION)
async def test_a_sequential_agent_runs_each_sub_agents_model_call_in_a_step_of_its_own() -> None:
    model = CannedLlm(
        responses=[
            respond("Draft: refund I-9."),
            respond(call("refund", {"invoice": "I-9"}, "r-1")),
            respond("Reviewed and refunded."),
        ]
    )

    def refund(invoice: str) -> str:
        """Refund an invoice."""
        return f"refunded {invoice}"

    def build_runner() -> GoogleAdkRunner:
        return GoogleAdkRunner(
            SequentialAgent(  # pyright: ignore[reportDeprecated]
                name="pipeline",
                sub_agents=[
                    LlmAgent(name="drafter", model=model, instruction="Draft."),
                    LlmAgent(name="reviewer", model=model, instruction="Review.", tools=[refund]),
                ],
            )
        )

    session = SessionSide()
    session.start_turn(build_runner().build_user_message("Refund I-9"))
    first = await build_runner().run_model_step(session.context())
    assert isinstance(first, TurnContinued) and model.calls == 1, "the reviewer's call is the next Step's"
    session.framework_run_state = first.framework_run_state
    second = await build_runner().run_model_step(session.context())
    assert isinstance(second, ToolCallsRequested) and model.calls == 2
    assert json.loads(second.tool_calls[0].tool_source_reference or "{}") == {"agent": "reviewer"}
    session.defer(second)
    session.finish("r-1", ToolCallStatus.SUCCEEDED, output=await session.execute(build_runner(), "r-1"))
    final = await build_runner().run_model_step(session.context())

    assert isinstance(final, TurnCompleted) and final.turn_error is None and model.calls == 3
    assert "Draft." in model.instructions_seen[0] and "Review." in model.instructions_seen[1]
    assert [
        (Event.model_validate_json(m.framework_item).author, m.text or m.tool_output)
        for m in final.new_messages
    ] == [
        ("drafter", "Draft: refund I-9."),
        ("reviewer", None),
        ("reviewer", "refunded I-9"),
        ("reviewer", "Reviewed and refunded."),
    ]


@pytest.mark.filterwarnings(WORKFLOW_AGENT_DEPRECATION)
@pytest.mark.parametrize("kind", ["ParallelAgent", "LoopAgent"])
def test_parallel_and_loop_agents_are_refused_when_the_runner_is_built(kind: str) -> None:
    agent_class = ParallelAgent if kind == "ParallelAgent" else LoopAgent  # pyright: ignore[reportDeprecated]
    leaf = LlmAgent(name="leaf", model=CannedLlm())
    with pytest.raises(
        TypeError, match=f"agent 'team' is a {kind}, which a durable Dex session does not run"
    ):
        GoogleAdkRunner(
            LlmAgent(
                name="front", model=CannedLlm(), sub_agents=[agent_class(name="team", sub_agents=[leaf])]
            )
        )


async def test_a_planning_turn_offers_only_write_todos_and_a_plan_is_shown_before_the_turns_message() -> None:
    model = CannedLlm(responses=[respond("Here is my plan."), respond("Doing it.")])
    root = LlmAgent(
        name="front", model=model, tools=[book_slot], sub_agents=[LlmAgent(name="helper", model=model)]
    )
    runner = GoogleAdkRunner(root)
    assert runner.supports_plan_mode is True
    session = SessionSide()
    session.start_turn(runner.build_user_message("Plan my week"))
    planning = dataclasses.replace(
        session.context(),
        interaction_mode=InteractionMode.PLANNING,
        enabled_built_in_tools=(WRITE_TODOS,),
    )
    await runner.run_model_step(planning)
    assert model.offered_tools[0] == [WRITE_TODOS], "no own tool, no transfer: only write_todos"
    assert model.texts_seen(1) == [build_plan_note(None, InteractionMode.PLANNING), "Plan my week"]

    plan = AgentPlan(
        revision=1,
        status=PlanStatus.ACTIVE,
        tasks=(AgentPlanTask("Book Monday", PlanTaskStatus.PENDING),),
        updated_at="2026-12-02T15:00:00Z",
    )
    session.start_turn(runner.build_user_message("Go"))
    executing = dataclasses.replace(
        session.context(),
        interaction_mode=InteractionMode.EXECUTING,
        plan=plan,
        enabled_built_in_tools=(WRITE_TODOS,),
    )
    await runner.run_model_step(executing)
    assert {"book_slot", "transfer_to_agent", WRITE_TODOS} <= set(model.offered_tools[1])
    note = build_plan_note(plan, InteractionMode.EXECUTING)
    assert model.texts_seen(2)[-2:] == [note, "Go"], model.texts_seen(2)


def _nested(depth: int) -> object:
    value: object = "x"
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_deeply_nested_arguments_and_results_reach_the_model_as_tool_errors() -> None:
    model = CannedLlm(
        responses=[
            respond(
                call("deep_echo", {"payload": _nested(250)}, "args-1"), call("deep_echo", {}, "result-1")
            ),
            respond("Both failed."),
        ]
    )
    runs: list[str] = []

    def deep_echo(payload: object = None) -> object:
        """Echo a payload, or return a very deep one."""
        runs.append("ran")
        return _nested(1000)

    runner = GoogleAdkRunner(LlmAgent(name="echo", model=model, tools=[deep_echo]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Echo"))
    first = await runner.run_model_step(session.context())
    assert isinstance(first, ToolCallsRequested)
    session.defer(first)
    errors: dict[str, str] = {}
    for call_id in ("args-1", "result-1"):
        with pytest.raises(ToolExecutionError) as error:
            await session.execute(runner, call_id)
        errors[call_id] = error.value.message
        session.finish(call_id, ToolCallStatus.FAILED, error=error.value.message)
    assert runs == ["ran"], "a call whose arguments nest too deeply never runs"
    too_deep = "arrays and objects nest more than 200 levels deep"
    assert errors == {
        "args-1": f"the arguments of 'deep_echo' nest too deeply: {too_deep}",
        "result-1": f"the result of 'deep_echo' nests too deeply: {too_deep}",
    }
    final = await runner.run_model_step(session.context())
    assert isinstance(final, TurnCompleted) and final.turn_error is None
    assert model.responses_seen(2) == [{"error": f"The tool call failed: {errors[key]}"} for key in errors]
