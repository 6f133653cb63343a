"""Framework-level test helpers: a canned ADK model and its responses.

The framework tests drive `GoogleAdkRunner` the way the session does with `dex_agents.testing`'s
`SessionSide` (stored messages in, outcomes out, final tool call records on resume), without a server, so
each framework behaviour is checked on its own.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import cast

from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field


class CannedLlm(BaseLlm):
    """An ADK model that answers call ``n`` with ``responses[n]`` and keeps what every call saw.

    Text is streamed word by word when ADK asks for streaming, so tests can check the deltas. A response
    given as an `LlmResponse` (a provider error, say) is answered as it is, in one piece.
    """

    model: str = "canned"
    responses: list[types.Content | LlmResponse] = Field(default_factory=list[types.Content | LlmResponse])
    seen: list[list[types.Content]] = Field(default_factory=list[list[types.Content]])
    offered_tools: list[list[str]] = Field(default_factory=list[list[str]])
    instructions_seen: list[str] = Field(default_factory=list[str])

    @property
    def calls(self) -> int:
        return len(self.seen)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.seen.append([content.model_copy(deep=True) for content in llm_request.contents])
        self.offered_tools.append(sorted(llm_request.tools_dict))
        instruction = cast(object, llm_request.config.system_instruction)  # pyright: ignore[reportUnknownMemberType]
        self.instructions_seen.append(str(instruction or ""))
        if len(self.seen) > len(self.responses):
            raise AssertionError(f"unexpected model call #{len(self.seen)}")
        # ADK assigns IDs to function calls in place, so every call answers with a fresh copy.
        canned = self.responses[len(self.seen) - 1].model_copy(deep=True)
        if isinstance(canned, LlmResponse):
            yield canned
            return
        content = canned
        if stream:
            for part in content.parts or ():
                for word in (part.text or "").split(" ") if part.text else ():
                    yield LlmResponse(
                        content=types.Content(
                            role="model", parts=[types.Part(text=word + " ", thought=part.thought)]
                        ),
                        partial=True,
                    )
        yield LlmResponse(
            content=content,
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=50, candidates_token_count=20, total_token_count=70
            ),
            partial=False,
            turn_complete=True,
            finish_reason=types.FinishReason.STOP,
        )

    def function_responses_seen(self, call_number: int) -> dict[str, dict[str, object]]:
        """The function responses in the input of model call ``call_number`` (one-based), by call name."""
        return {
            f"{part.function_response.name}#{index}": dict(part.function_response.response or {})
            for index, part in enumerate(
                part
                for content in self.seen[call_number - 1]
                for part in content.parts or ()
                if part.function_response is not None
            )
            if part.function_response is not None
        }

    def responses_seen(self, call_number: int) -> list[dict[str, object]]:
        """The function responses in the input of model call ``call_number``, in order."""
        return [
            dict(part.function_response.response or {})
            for content in self.seen[call_number - 1]
            for part in content.parts or ()
            if part.function_response is not None
        ]

    def texts_seen(self, call_number: int) -> list[str]:
        return [
            part.text for content in self.seen[call_number - 1] for part in content.parts or () if part.text
        ]


def call(name: str, arguments: Mapping[str, object], tool_call_id: str | None = None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=dict(arguments), id=tool_call_id))


def respond(*parts: types.Part | str) -> types.Content:
    return types.Content(
        role="model", parts=[types.Part(text=part) if isinstance(part, str) else part for part in parts]
    )
