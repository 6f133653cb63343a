"""The public scripted model: its standalone mode, and the docs page's example run as written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import cast

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from dex_agents.testing import ScriptedResponse, ScriptedToolCall
from openai.types.responses import ResponseFunctionToolCall

from dex_agents_openai_agents.testing import ScriptedResponsesModel, call_item, text_item

# The docs site's page on models holds the example (it moved there from the README).
MODELS_PAGE = (
    Path(__file__).resolve().parents[2] / "docs" / "pages" / "frameworks" / "openai-agents" / "models.md"
)


def _page_example() -> str:
    match = re.search(
        r"<!-- scripted-model-example -->\n```python\n(.*?)```", MODELS_PAGE.read_text(), re.DOTALL
    )
    assert match is not None, "the models page lost its scripted model example"
    return match.group(1)


def test_the_models_page_example_runs_as_written() -> None:
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(compile(_page_example(), str(MODELS_PAGE), "exec"), namespace)

    model = namespace["model"]
    assert isinstance(model, ScriptedResponsesModel) and len(model.calls) == 2


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return f"{order_id}: shipped Monday"


async def test_answers_come_in_order_and_a_call_past_the_last_fails_clearly() -> None:
    model = ScriptedResponsesModel.from_answers(
        [[text_item("Looking."), call_item("lookup_order", {"order_id": "A-1"}, "call-1")], "Shipped."]
    )
    agent = Agent(name="orders", model=model, tools=[lookup_order])
    quiet = RunConfig(tracing_disabled=True)

    result = await Runner.run(agent, "Where is A-1?", run_config=quiet)

    assert result.final_output == "Shipped."
    assert result.context_wrapper.usage.input_tokens == 20, "each answer reports 10 input tokens"
    assert [call.offered_tools for call in model.calls] == [["lookup_order"], ["lookup_order"]]
    assert model.calls[1].tool_outputs() == {"call-1": "A-1: shipped Monday"}
    with pytest.raises(RuntimeError, match="no answer for model call 3: it was given 2 answer"):
        await Runner.run(agent, "And now?", run_config=quiet)
    assert model.calls[2].input_items[-1] == {"role": "user", "content": "And now?"}


async def test_the_kits_scripted_responses_are_answers_too_and_call_ids_are_generated_when_left_out() -> None:
    # The core's own shape, as every adapter's scripted model takes it; an empty ID is left out.
    first = ScriptedResponse(
        text="Looking.", tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-1"}, ""),)
    )
    model = ScriptedResponsesModel.from_answers([first, ScriptedResponse(text="Shipped.")])
    agent = Agent(name="orders", model=model, tools=[lookup_order])

    result = await Runner.run(agent, "Where is A-1?", run_config=RunConfig(tracing_disabled=True))

    assert result.final_output == "Shipped."
    assert model.calls[1].tool_outputs() == {"call-1-1": "A-1: shipped Monday"}
    generated = cast(ResponseFunctionToolCall, call_item("lookup_order"))
    assert re.fullmatch(r"call-[0-9a-f]{12}", generated.call_id) and generated.arguments == "{}"
