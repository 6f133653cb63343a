"""The benchmark's application: two model calls around one read tool, with a deterministic model."""

from __future__ import annotations

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.llm_request import LlmRequest

from dex_agents_google_adk import GoogleAdkRunner
from dex_agents_google_adk.testing import ScriptedAnswer, ScriptedLlm, ScriptedResponse, ScriptedToolCall


async def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order."""
    return {"order_id": order_id, "status": "shipped"}


class BenchLlm(ScriptedLlm):
    """Asks for the lookup, then answers once the lookup's result is in its input."""

    model: str = "bench"

    async def choose_response(self, llm_request: LlmRequest) -> ScriptedAnswer:
        """Answer at once, from whether the lookup's result is in the input."""
        answered = any(
            part.function_response is not None
            for content in llm_request.contents
            for part in content.parts or ()
        )
        if answered:
            return ScriptedResponse(text="Order A-1 has shipped.", input_tokens=20, output_tokens=8)
        call = ScriptedToolCall("lookup_order", {"order_id": "A-1"}, "lookup-1")
        return ScriptedResponse(
            text="Let me look that up.", tool_calls=(call,), input_tokens=20, output_tokens=8
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
