"""The Flows of `test_provider_faults.py`: the SDK's real OpenAI models against the scripted provider server.

- ``OpenAIAgentsProviderTimeout``: `OpenAIResponsesModel` over an `AsyncOpenAI` with a 1 s timeout and one
  retry of its own, so a first byte slower than that fails the request, and both requests of an attempt
  fail the `RunModel` attempt;
- ``OpenAIAgentsProviderByName``: a model name that the run configuration's `OpenAIProvider` resolves to
  `OpenAIChatCompletionsModel` (``use_responses=False``), the way an application configures the SDK for
  an OpenAI-compatible server.

The test process and the Worker child (`tests.provider_fault_worker`) both build them here.
"""

from __future__ import annotations

from agents import Agent, OpenAIProvider, RunConfig
from dex_agents import AgentSessionFlow, AgentSessionOptions
from dex_agents.testing import scripted_provider_server, with_model_call_scope

from dex_agents_openai_agents import OpenAIAgentsRunner
from tests.provider_matrix_spec import MODEL_NAME, provider_client, provider_model

CLIENT_TIMEOUT_SECONDS = 1.0
"""The timeout of the Timeout Flow's client; the tests' slow first byte comes later than this."""

_INSTRUCTIONS = "You answer questions about orders."


def _timeout_runner() -> OpenAIAgentsRunner[None]:
    client = provider_client(timeout=CLIENT_TIMEOUT_SECONDS, max_retries=1)
    agent = Agent[None](name="orders", instructions=_INSTRUCTIONS, model=provider_model("responses", client))
    return OpenAIAgentsRunner(agent)


def _by_name_runner() -> OpenAIAgentsRunner[None]:
    provider = OpenAIProvider(
        base_url=scripted_provider_server().openai_base_url, api_key="sk-scripted", use_responses=False
    )
    agent = Agent[None](name="orders", instructions=_INSTRUCTIONS, model=MODEL_NAME)
    return OpenAIAgentsRunner(agent, run_config=RunConfig(model_provider=provider))


def build_flows() -> list[AgentSessionFlow]:
    """The Timeout and ByName Flows, in that order."""
    return [
        AgentSessionFlow(
            with_model_call_scope(_timeout_runner()),
            flow_type="OpenAIAgentsProviderTimeout",
            options=AgentSessionOptions(),
        ),
        AgentSessionFlow(
            with_model_call_scope(_by_name_runner()),
            flow_type="OpenAIAgentsProviderByName",
            options=AgentSessionOptions(),
        ),
    ]
