"""The benchmark's application: two model calls around one read tool, with a deterministic model."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from dex_agents_google_adk import GoogleAdkRunner


async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped"}


class BenchLlm(BaseLlm):
    """Asks for the lookup, then answers once the lookup's result is in its input."""

    model: str = "bench"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = any(
            part.function_response is not None
            for content in llm_request.contents
            for part in content.parts or ()
        )
        chunks = ["Order A-1 ", "has shipped."] if answered else ["Let me ", "look that up."]
        if stream:
            for chunk in chunks:
                yield LlmResponse(
                    content=types.Content(role="model", parts=[types.Part(text=chunk)]), partial=True
                )
        parts = [types.Part(text="".join(chunks))]
        if not answered:
            call = types.FunctionCall(name="lookup_order", args={"order_id": "A-1"}, id="lookup-1")
            parts.append(types.Part(function_call=call))
        yield LlmResponse(
            content=types.Content(role="model", parts=parts),
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=20, candidates_token_count=8, total_token_count=28
            ),
            partial=False,
            turn_complete=True,
            finish_reason=types.FinishReason.STOP,
        )


def build_app() -> App:
    return App(
        name="bench",
        root_agent=LlmAgent(name="bench", model=BenchLlm(), instruction="Answer.", tools=[lookup_order]),
    )


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        GoogleAdkRunner(build_app()),
        flow_type="GoogleAdkBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
