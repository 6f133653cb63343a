"""The matrix agent with the SDK's real OpenAI models, talking HTTP to the kit's scripted provider server.

Only the client's base URL and key differ from production: each spec's agent has an ordinary
`OpenAIResponsesModel` or `OpenAIChatCompletionsModel` over `AsyncOpenAI`, whose requests go to
`dex_agents.testing.scripted_provider_server()` in the Worker process; the server answers from the
session's script and injects its provider faults. The test process and the Worker child
(`tests.provider_matrix_worker`, which picks the spec named by `PROVIDER_API_ENV`) both build them here.
``SPEC`` (the Responses API) is the one `scripts/chaos` imports.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from agents import Agent, Model, OpenAIChatCompletionsModel, OpenAIResponsesModel, function_tool
from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, scripted_provider_server
from openai import AsyncOpenAI

from dex_agents_openai_agents import OpenAIAgentsRunner
from tests.matrix_spec import PACKAGE_DIR

PROVIDER_API_ENV = "DEX_OPENAI_AGENTS_PROVIDER_API"
"""Names the spec the provider matrix Worker serves: ``responses`` or ``chat_completions``."""

ProviderApi = Literal["responses", "chat_completions"]

MODEL_NAME = "gpt-4.1"

# A script's gate holds a response before its first byte; the client's read timeout must outlast any gate
# a matrix item holds. The client's own retries (2 by default, honouring Retry-After) stay as shipped.
_CLIENT_TIMEOUT_SECONDS = 60.0


def provider_client(*, timeout: float = _CLIENT_TIMEOUT_SECONDS, max_retries: int = 2) -> AsyncOpenAI:
    """An `AsyncOpenAI` client for the scripted provider server of this process (started on first use)."""
    server = scripted_provider_server()
    return AsyncOpenAI(
        base_url=server.openai_base_url, api_key="sk-scripted", timeout=timeout, max_retries=max_retries
    )


def provider_model(api: ProviderApi, client: AsyncOpenAI | None = None) -> Model:
    """The SDK's own OpenAI model for ``api``, over ``client`` (by default `provider_client()`)."""
    client = client if client is not None else provider_client()
    if api == "responses":
        return OpenAIResponsesModel(model=MODEL_NAME, openai_client=client)
    return OpenAIChatCompletionsModel(model=MODEL_NAME, openai_client=client)


def build_provider_runner(api: ProviderApi, client: AsyncOpenAI | None = None) -> OpenAIAgentsRunner[None]:
    """The matrix agent (its four tools as `@function_tool`s) with a real OpenAI model over HTTP."""
    agent = Agent[None](
        name="orders",
        instructions="You handle orders: look them up, send receipts, refund and cancel them.",
        model=provider_model(api, client),
        tools=[function_tool(tool) for tool in MATRIX_TOOLS],
    )
    return OpenAIAgentsRunner(agent)


def _spec(api: ProviderApi, prefix: str) -> MatrixSpec:
    return MatrixSpec(
        build_runner=lambda: build_provider_runner(api),
        worker_module="tests.provider_matrix_worker",
        flow_type_prefix=prefix,
        worker_cwd=PACKAGE_DIR,
        worker_env={PROVIDER_API_ENV: api},
        approval_deadline=timedelta(seconds=4),
        unknown_tool_message="Tool launch_rocket not found in agent orders",
        supports_turn_control=True,
        supports_built_in_tools=True,
        provider_backed=True,
    )


SPEC = _spec("responses", "OpenAIAgentsResponsesProvider")
"""`OpenAIResponsesModel` over `AsyncOpenAI`: the Responses API, streamed."""

CHAT_SPEC = _spec("chat_completions", "OpenAIAgentsChatProvider")
"""`OpenAIChatCompletionsModel` over `AsyncOpenAI`: the Chat Completions API, streamed."""

SPECS: dict[str, MatrixSpec] = {"responses": SPEC, "chat_completions": CHAT_SPEC}
