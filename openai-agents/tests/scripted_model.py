"""The matrix agent's scripted model, in the OpenAI Agents SDK's own model slot, no network.

`matrix_model()` is a `dex_agents_openai_agents.testing.ScriptedResponsesModel` that answers from the
`dex_agents.testing` script store, which logs every call with its Step execution and attempt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agents import TResponseInputItem
from agents.items import TResponseOutputItem
from dex_agents.testing import scripted_model_response

from dex_agents_openai_agents.testing import ScriptedAnswer, ScriptedResponsesModel, call_item, text_item


def render_model_input(items: Sequence[TResponseInputItem]) -> list[str]:
    """Render what a model call sees as one text per input item."""
    texts: list[str] = []
    for raw in items:
        item = cast(Mapping[str, Any], raw)
        kind = item.get("type")
        if kind == "function_call":
            texts.append(f"assistant calls {item['name']} {item['arguments']} [{item['call_id']}]")
        elif kind == "function_call_output":
            texts.append(f"tool [{item['call_id']}]: {item['output']}")
        elif kind in (None, "message"):
            content = item.get("content")
            if isinstance(content, list):
                content = "".join(
                    str(cast(Mapping[str, Any], part).get("text", "")) for part in cast(list[object], content)
                )
            texts.append(f"{item.get('role')}: {content}")
        else:
            texts.append(f"{kind}: {json.dumps(item, sort_keys=True)}")
    return texts


async def _matrix_answer(items: list[TResponseInputItem], offered: Sequence[str]) -> ScriptedAnswer:
    del offered
    response = await scripted_model_response(render_model_input(items))
    output: list[TResponseOutputItem] = []
    if response.text:
        output.append(text_item(response.text))
    output.extend(
        call_item(scripted.tool_name, scripted.arguments, scripted.tool_call_id)
        for scripted in response.tool_calls
    )
    return ScriptedAnswer(output, response.input_tokens, response.output_tokens)


def matrix_model() -> ScriptedResponsesModel:
    """Return the scripted model of the matrix agent."""
    return ScriptedResponsesModel(_matrix_answer)
