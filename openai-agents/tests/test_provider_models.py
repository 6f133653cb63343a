"""The finish check leaves the application's own model objects as they were.

The runner runs each Step with finish-checked copies of the SDK's OpenAI models; the agent, the run
configuration and the provider the application built keep their own objects, which behave as before when
the application uses them outside a session (`Runner.run` with its own agent).
"""

from __future__ import annotations

from agents import Agent, OpenAIChatCompletionsModel, OpenAIProvider, OpenAIResponsesModel, RunConfig
from openai import AsyncOpenAI

from dex_agents_openai_agents import OpenAIAgentsRunner


def _client() -> AsyncOpenAI:
    return AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-unused", max_retries=0)


def test_the_applications_models_and_provider_are_left_as_they_were() -> None:
    client = _client()
    chat = OpenAIChatCompletionsModel(model="gpt-4.1", openai_client=client)
    responses = OpenAIResponsesModel(model="gpt-4.1", openai_client=client)
    provider = OpenAIProvider(openai_client=client, use_responses=False)
    specialist = Agent[None](name="specialist", model=responses)
    agent = Agent[None](name="orders", model=chat, handoffs=[specialist])
    config = RunConfig(model=responses, model_provider=provider)

    runner = OpenAIAgentsRunner(agent, run_config=config)

    assert runner.agent is agent
    assert agent.model is chat and specialist.model is responses
    assert config.model is responses and config.model_provider is provider
    for model in (chat, responses):
        # No instance attribute shadows the SDK's own methods on the application's objects.
        assert not {"stream_response", "_fetch_response"} & set(vars(model)), vars(model)
    assert isinstance(provider.get_model("gpt-4.1"), OpenAIChatCompletionsModel)
