"""A scripted model in ADK's own model slot, answering from `dex_agents.testing`'s script store.

`ScriptedLlm` is an ordinary ADK `BaseLlm`, so the agent under test is a real `LlmAgent` and every call goes
through ADK's real agent loop. On each call the model renders what it sees as texts (user messages,
answers, tool calls, tool results), hands them to `scripted_model_response` (which logs the call with its
session, turn, Step execution and attempt), and answers as Gemini does: its text in streamed chunks, then
one complete response with the text, the tool calls (with the scripted IDs) and usage. A response with a
`turn_error` is a prompt the provider blocks: Gemini's `prompt_feedback` with `PROHIBITED_CONTENT` and the
scripted text as its message, turned into ADK's `LlmResponse` as ADK's Gemini model does.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Sequence

from dex_agents.testing import ScriptedResponse, scripted_model_response
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

# Each chunk keeps its trailing whitespace, so the chunks add up to the scripted text exactly.
_CHUNK = re.compile(r"\S+\s*|\s+")


def _render_value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_model_input(contents: Sequence[types.Content]) -> list[str]:
    """Render the contents a model call receives as one text per part."""
    texts: list[str] = []
    for content in contents:
        for part in content.parts or ():
            if part.text:
                texts.append(f"{'assistant' if content.role == 'model' else 'user'}: {part.text}")
            elif part.function_call is not None:
                call = part.function_call
                texts.append(
                    f"assistant calls {call.name} {json.dumps(call.args or {}, sort_keys=True)} [{call.id}]"
                )
            elif part.function_response is not None:
                response = part.function_response
                rendered = "; ".join(
                    f"{key}: {_render_value(value)}" for key, value in (response.response or {}).items()
                )
                texts.append(f"tool {response.name} [{response.id}]: {rendered}")
    return texts


def response_parts(response: ScriptedResponse) -> list[types.Part]:
    """The parts of the complete model response for a scripted response."""
    parts = [types.Part(text=response.text)] if response.text else []
    parts.extend(
        types.Part(
            function_call=types.FunctionCall(
                id=call.tool_call_id, name=call.tool_name, args=dict(call.arguments)
            )
        )
        for call in response.tool_calls
    )
    return parts


def llm_responses(response: ScriptedResponse, *, stream: bool) -> list[LlmResponse]:
    """The responses ADK receives for one scripted response: streamed chunks, then the complete one."""
    chunks = (
        [
            LlmResponse(content=types.Content(role="model", parts=[types.Part(text=chunk)]), partial=True)
            for chunk in _CHUNK.findall(response.text)
        ]
        if stream
        else []
    )
    complete = LlmResponse(
        content=types.Content(role="model", parts=response_parts(response)),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=response.input_tokens,
            candidates_token_count=response.output_tokens,
            total_token_count=response.input_tokens + response.output_tokens,
        ),
        partial=False,
        turn_complete=True,
        finish_reason=types.FinishReason.STOP,
    )
    return [*chunks, complete]


class ScriptedLlm(BaseLlm):
    """Answers every call from the session's script (see the module docstring)."""

    model: str = "dex-scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        response = await scripted_model_response(render_model_input(llm_request.contents))
        if response.turn_error is not None:
            feedback = types.GenerateContentResponsePromptFeedback(
                block_reason=types.BlockedReason.PROHIBITED_CONTENT, block_reason_message=response.turn_error
            )
            usage = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=response.input_tokens, total_token_count=response.input_tokens
            )
            yield LlmResponse.create(
                types.GenerateContentResponse(prompt_feedback=feedback, usage_metadata=usage)
            )
            return
        for llm_response in llm_responses(response, stream=stream):
            yield llm_response
