"""A scripted ADK model for offline development and tests: `ScriptedLlm`, in any `LlmAgent`'s `model` slot.

`ScriptedLlm` is an ordinary ADK `BaseLlm`, so the agent around it is a real `LlmAgent` and every call
goes through ADK's real agent loop, with no key and no network. It answers each model call with a
`ScriptedResponse` (text, then tool calls, with usage), streaming the text in word chunks when ADK asks
for streaming (`StreamingMode.SSE`, the runner's default) and then giving the complete response, as Gemini
does. A response with `turn_error` is a prompt the provider blocks (`PROHIBITED_CONTENT`, with that text
as its message).

It has two modes:

- **A list of responses** (``ScriptedLlm(responses=[...])``), for trying an agent offline or testing it
  without Dex's test kit. A model call answers with ``responses[n]``, where ``n`` is the number of model
  responses its input already holds, so the answer depends only on the conversation: a retried or
  resumed call, in any process, gets the same one. ADK's own model event that repeats a valid
  structured answer (`set_model_response`) is not counted.
- **The session's script** (``ScriptedLlm()``), for tests on Dex's test kit: each call asks
  `dex_agents.testing.scripted_model_response` for its answer, which logs the call with its session,
  turn and attempt, honours the script's gates and failures, and logs a call that is cancelled while it
  waits (``ScriptedResponse(block_until_cancelled=True)``). It needs the `RunModel` scope that
  `dex_agents.testing.with_model_call_scope` (and the matrix harness) gives the runner. It does not
  stream ``partial_text`` (nor ``thread_text`` or ``late_text``, which only `ScriptedRunner` uses); a list
  of responses refuses every such script-only field.

What the model reads is rendered as one text per part (`render_model_input`): ``user: <text>``,
``assistant: <text>``, ``assistant calls <tool> <arguments> [<id>]`` and ``tool <tool> [<id>]:
{"<key>":<value>,...}``, the function response as compact JSON whose strings are left unescaped (so a
recorded text is found as it was written); the script store logs these texts, with the names of the tools
ADK offered. A model that decides from the conversation overrides `ScriptedLlm.choose_response`.

Each complete response reports the model's name as its ``model_version`` and a fresh ``interaction_id``,
and the class names its provider (``dex.scripted``) for tracing, so the session's ``chat`` spans show what
a real provider's would.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import ClassVar

from dex_agents.testing import ScriptedResponse, scripted_model_response, text_chunks
from dex_agents.testing import ScriptedToolCall as _KitScriptedToolCall
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import model_validator

from dex_agents_google_adk._structured_answer import SET_MODEL_RESPONSE

__all__ = ["ScriptedAnswer", "ScriptedLlm", "ScriptedResponse", "ScriptedToolCall", "render_model_input"]


@dataclasses.dataclass(frozen=True)
class ScriptedToolCall(_KitScriptedToolCall):
    """A tool call of a scripted response: the test kit's `ScriptedToolCall` with the ID optional.

    ``ScriptedToolCall(tool_name, arguments)`` leaves the ID out: the model sends the call without one,
    as Gemini does, and an ID is generated for it (``adk-<uuid4>``, by the Dex runner in a durable session
    or by ADK's own `Runner`), so the call still gets its result. Give ``tool_call_id`` when a test
    looks the call up by its ID.

    Attributes:
        tool_call_id: The call's ID, unique within the turn; empty to have one generated.
    """

    tool_call_id: str = ""


_PLAIN = ScriptedResponse()
_SCRIPT_STORE_FIELDS = (
    "gate",
    "gate_attempts",
    "fail_attempts",
    "failure_type",
    "block_until_cancelled",
    "partial_text",
    "thread_text",
    "late_text",
    "run_state_padding",
)

ScriptedAnswer = ScriptedResponse | types.Content | LlmResponse
"""One answer: a `ScriptedResponse`; ADK's own `types.Content` (any parts, such as thoughts), streamed
and completed like a scripted response with its default usage; or an `LlmResponse`, given as it is (a
provider's error, say)."""


def _render_response(response: Mapping[str, object] | None) -> str:
    # Compact JSON, except that strings stay unescaped, so a test finds a recorded text (a rejection that
    # holds JSON, say) in what the model read exactly as it was written.
    fields = (
        f'"{key}":"{value}"' if isinstance(value, str) else f'"{key}":{_compact_json(value)}'
        for key, value in (response or {}).items()
    )
    return "{" + ",".join(fields) + "}"


def _compact_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render_model_input(contents: Sequence[types.Content]) -> list[str]:
    """Render the contents of one model call as one text per part, as the script store logs them.

    Args:
        contents: `LlmRequest.contents`.

    Returns:
        The texts in order; thoughts and parts without text, call or result are left out.
    """
    texts: list[str] = []
    for content in contents:
        for part in content.parts or ():
            if part.text and not part.thought:
                texts.append(f"{'assistant' if content.role == 'model' else 'user'}: {part.text}")
            elif part.function_call is not None:
                call = part.function_call
                arguments = json.dumps(call.args or {}, sort_keys=True)
                texts.append(f"assistant calls {call.name} {arguments} [{call.id}]")
            elif part.function_response is not None:
                response = part.function_response
                texts.append(f"tool {response.name} [{response.id}]: {_render_response(response.response)}")
    return texts


def _is_valid_structured_answer(response: types.FunctionResponse | None) -> bool:
    if response is None or response.name != SET_MODEL_RESPONSE:
        return False
    # ADK answers a structured answer that fails its schema with {"error": "Validation Error found: ..."}.
    error = (response.response or {}).get("error")
    return not (isinstance(error, str) and error.startswith("Validation Error found"))


def _model_responses_in(contents: Sequence[types.Content]) -> int:
    """Count the model responses in a call's input, leaving out ADK's echo of a valid structured answer."""
    count = 0
    after_structured_answer = False
    for content in contents:
        if content.role == "model" and not after_structured_answer:
            count += 1
        after_structured_answer = any(
            _is_valid_structured_answer(part.function_response) for part in content.parts or ()
        )
    return count


def _response_content(response: ScriptedResponse) -> types.Content:
    parts = [types.Part(text=response.text)] if response.text else []
    parts.extend(
        types.Part(
            # No ID, as Gemini sends none: the runner (or ADK's own `Runner`) gives the call one.
            function_call=types.FunctionCall(
                id=call.tool_call_id or None, name=call.tool_name, args=dict(call.arguments)
            )
        )
        for call in response.tool_calls
    )
    return types.Content(role="model", parts=parts)


def _blocked_prompt(response: ScriptedResponse, model: str) -> LlmResponse:
    """A prompt the provider blocks, turned into ADK's `LlmResponse` as ADK's Gemini model does."""
    feedback = types.GenerateContentResponsePromptFeedback(
        block_reason=types.BlockedReason.PROHIBITED_CONTENT, block_reason_message=response.turn_error
    )
    usage = types.GenerateContentResponseUsageMetadata(
        prompt_token_count=response.input_tokens, total_token_count=response.input_tokens
    )
    return LlmResponse.create(
        types.GenerateContentResponse(prompt_feedback=feedback, usage_metadata=usage, model_version=model)
    )


def _streamed(
    content: types.Content, input_tokens: int, output_tokens: int, *, stream: bool, model: str
) -> list[LlmResponse]:
    chunks = (
        [
            LlmResponse(
                content=types.Content(role="model", parts=[types.Part(text=chunk, thought=part.thought)]),
                partial=True,
            )
            for part in content.parts or ()
            if part.text
            for chunk in text_chunks(part.text)
        ]
        if stream
        else []
    )
    complete = LlmResponse(
        content=content,
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=input_tokens,
            candidates_token_count=output_tokens,
            total_token_count=input_tokens + output_tokens,
        ),
        partial=False,
        turn_complete=True,
        finish_reason=types.FinishReason.STOP,
        model_version=model,
        # ADK keeps no `response_id`; the Interactions API's ID stands for the provider's response ID.
        interaction_id=f"scripted-{uuid.uuid4().hex}",
    )
    return [*chunks, complete]


def _llm_responses(answer: ScriptedAnswer, *, stream: bool, model: str) -> list[LlmResponse]:
    """Return what ADK receives for one answer: the streamed chunks, then the complete response.

    Args:
        answer: The answer.
        stream: Whether ADK asked for streaming.
        model: The model's name, reported as each response's ``model_version``.

    Returns:
        Fresh objects on every call: ADK gives function calls their IDs in place.
    """
    if isinstance(answer, LlmResponse):
        return [answer.model_copy(deep=True)]
    if isinstance(answer, types.Content):
        defaults = ScriptedResponse()
        return _streamed(
            answer.model_copy(deep=True),
            defaults.input_tokens,
            defaults.output_tokens,
            stream=stream,
            model=model,
        )
    if answer.turn_error is not None:
        return [_blocked_prompt(answer, model)]
    return _streamed(
        _response_content(answer), answer.input_tokens, answer.output_tokens, stream=stream, model=model
    )


class ScriptedLlm(BaseLlm):
    """An ADK model that answers from a list of responses or from the session's script.

    ::

        agent = LlmAgent(
            name="orders",
            model=ScriptedLlm(
                responses=[
                    ScriptedResponse(
                        text="Let me look.",
                        tool_calls=(ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "call-1"),),
                    ),
                    ScriptedResponse(text="Order A-1 has shipped."),
                ]
            ),
            tools=[lookup_order],
        )

    Attributes:
        model: The model's name, as ADK reports it.
        responses: The answers in conversation order; `None` answers from the session's script instead
            (see the module docstring).
        gen_ai_provider_name: The provider tracing reports for this model (a class attribute).
    """

    gen_ai_provider_name: ClassVar[str] = "dex.scripted"
    model: str = "dex-scripted"
    responses: list[ScriptedAnswer] | None = None

    @model_validator(mode="after")
    def _refuse_script_store_fields(self) -> ScriptedLlm:
        """Refuse fields only the session's script honours, instead of ignoring them."""
        for position, answer in enumerate(self.responses or ()):
            if not isinstance(answer, ScriptedResponse):
                continue
            unused = [name for name in _SCRIPT_STORE_FIELDS if getattr(answer, name) != getattr(_PLAIN, name)]
            if unused:
                raise ValueError(
                    f"responses[{position}] sets {', '.join(unused)}, which only the session's script "
                    "honours (ScriptedLlm() without responses, on Dex's test kit); a list of responses uses "
                    "text, tool_calls, turn_error, input_tokens and output_tokens"
                )
        return self

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        """Return the answer to one model call; override it for a model that decides from its input.

        Args:
            llm_request: The request ADK sends the model.

        Returns:
            The answer.

        Raises:
            RuntimeError: When the list of responses has none for this call, or, without a list, when
                the call runs outside a `RunModel` scope or the script fails it.
        """
        if self.responses is None:
            return await scripted_model_response(
                render_model_input(llm_request.contents), offered_tools=list(llm_request.tools_dict)
            )
        index = _model_responses_in(llm_request.contents)
        if index >= len(self.responses):
            raise RuntimeError(
                f"ScriptedLlm {self.model!r} has {len(self.responses)} scripted responses, and this model "
                f"call's input already holds {index} model responses: it has no answer for call {index + 1}"
            )
        return self.responses[index]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """Answer one model call (see the class docstring)."""
        answer = await self.choose_response(llm_request)
        for response in _llm_responses(answer, stream=stream, model=self.model):
            yield response
