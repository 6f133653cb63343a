"""Deeply nested JSON in tool arguments and outputs reaches the model as a tool error, never a crash."""

from __future__ import annotations

import pytest
from dex_agents import ToolCallsRequested, ToolCallStatus, ToolExecutionError, TurnCompleted
from dex_agents.limits import MAX_JSON_NESTING_DEPTH
from dex_agents.testing import SessionSide
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, ToolCallPart

from dex_agents_pydantic_ai import PydanticAiRunner, _runner
from dex_agents_pydantic_ai._messages import encode_message
from dex_agents_pydantic_ai._tool_execution import json_nesting_depth
from dex_agents_pydantic_ai.testing import ScriptedModel

DEEP = 1000
tagged: list[object] = []


def tag_order(tags: object = None) -> str:
    """Tag an order; every parameter has a default."""
    tagged.append(tags)
    return "tagged"


def export_tree() -> str:
    """Export a tree as deeply nested JSON."""
    return "[" * DEEP + "]" * DEEP


def nested_text(depth: int) -> str:
    """Arguments whose arrays and objects nest ``depth`` levels deep."""
    return '{"tags": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


async def test_deep_arguments_fail_the_call_before_the_tool_runs_and_a_deep_output_reaches_the_model() -> (
    None
):
    asks = ModelResponse(
        parts=[
            ToolCallPart("tag_order", nested_text(DEEP), tool_call_id="tag-1"),
            ToolCallPart("tag_order", nested_text(MAX_JSON_NESTING_DEPTH + 1), tool_call_id="tag-2"),
            ToolCallPart("export_tree", "{}", tool_call_id="tree-1"),
        ]
    )
    model = ScriptedModel([asks, "Tagging failed; here is the tree."])
    runner = PydanticAiRunner(Agent(model, tools=[tag_order, export_tree]))
    session = SessionSide()
    session.start_turn(runner.build_user_message("Tag it and export the tree"))

    deferred = await runner.run_model_step(session.context())
    assert isinstance(deferred, ToolCallsRequested)
    session.defer(deferred)
    errors: dict[str, str] = {}
    for tool_call_id in ("tag-1", "tag-2"):
        with pytest.raises(ToolExecutionError) as raised:
            await session.execute(runner, tool_call_id)
        errors[tool_call_id] = str(raised.value)
        session.finish(tool_call_id, ToolCallStatus.FAILED, error=errors[tool_call_id])
    # Past Pydantic AI's parser, its validator refuses the stand-in it parses instead; one level deeper
    # than the core allows, which Pydantic AI still parses, the runner refuses with the core's text.
    assert '"INVALID_JSON"' in errors["tag-1"] and "Extra inputs are not permitted" in errors["tag-1"]
    assert errors["tag-2"] == (
        "the arguments of 'tag_order' nest too deeply: arrays and objects nest more than "
        f"{MAX_JSON_NESTING_DEPTH} levels deep"
    )
    assert tagged == [], "the tool never ran"
    tree = await session.execute(runner, "tree-1")
    session.finish("tree-1", ToolCallStatus.SUCCEEDED, output=tree)
    done = await runner.run_model_step(session.context())

    assert isinstance(done, TurnCompleted) and done.turn_error is None
    shown = {
        part.tool_call_id: part.model_response_str(wrap_if_error=False)
        for part in model.calls[-1].tool_returns
    }
    assert shown == {
        "tag-1": f"The tool call failed: {errors['tag-1']}",
        "tag-2": f"The tool call failed: {errors['tag-2']}",
        "tree-1": export_tree(),
    }
    session.store(done.new_messages)
    session.start_turn(runner.build_user_message("Thanks"))
    answers_again = ScriptedModel(lambda messages: "You are welcome.")
    again = await PydanticAiRunner(Agent(answers_again, tools=[tag_order])).run_model_step(session.context())
    assert isinstance(again, TurnCompleted) and again.turn_error is None, "the deep history replays"


@pytest.mark.parametrize("depth", [300, 995])
def test_parsed_arguments_too_deep_for_pydantic_ai_to_serialize_become_text_as_deep(depth: int) -> None:
    arguments: dict[str, object] = {"tags": _nested(depth)}
    call = ToolCallPart("tag_order", arguments, tool_call_id="tag-1")
    response = ModelResponse(parts=[call])

    _runner._keep_arguments_serializable(response)  # pyright: ignore[reportPrivateUsage]

    assert isinstance(call.args, str) and json_nesting_depth(call.args) > MAX_JSON_NESTING_DEPTH
    # Deferring reads the arguments as text and storing encodes the response; neither raises now.
    assert call.args_as_json_str().startswith('{"INVALID_JSON":')
    assert encode_message(response)


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value
