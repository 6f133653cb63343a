"""The matrix agent on Pydantic AI's real provider models, talking HTTP to the kit's scripted provider server.

The agent is the one of `tests.matrix_spec`; only its model differs: `OpenAIChatModel`, `OpenAIResponsesModel`
or `AnthropicModel`, each with its ordinary provider pointed at `scripted_provider_server()` (its base URL
and a dummy key are all that change). The runner streams every model request, so these are the clients'
streaming paths. The test process and the Worker child (`tests.provider_matrix_worker`) both build the specs;
the Worker picks its client from `CLIENT_ENV`.

`SPEC` (the Chat Completions client) is also what ``scripts/chaos`` imports for provider faults.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, scripted_provider_server
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from dex_agents_pydantic_ai import PydanticAiRunner
from tests.matrix_spec import PACKAGE_DIR

CLIENT_ENV = "DEX_PYDANTIC_AI_PROVIDER_CLIENT"
"""Names the client a provider matrix Worker serves: a key of `CLIENTS`."""

MODEL_TIMEOUT_SECONDS = 5.0
"""The provider clients' timeout (`ModelSettings.timeout`): a first byte later than this fails the request."""

API_KEY = "sk-scripted"


def chat_model() -> Model:
    """`OpenAIChatModel` with its OpenAI provider pointed at the process's scripted provider server."""
    server = scripted_provider_server()
    return OpenAIChatModel(
        "gpt-scripted", provider=OpenAIProvider(base_url=server.openai_base_url, api_key=API_KEY)
    )


def _responses_model() -> Model:
    server = scripted_provider_server()
    return OpenAIResponsesModel(
        "gpt-scripted", provider=OpenAIProvider(base_url=server.openai_base_url, api_key=API_KEY)
    )


def _anthropic_model() -> Model:
    server = scripted_provider_server()
    return AnthropicModel(
        "claude-scripted", provider=AnthropicProvider(base_url=server.anthropic_base_url, api_key=API_KEY)
    )


CLIENTS: dict[str, Callable[[], Model]] = {
    "chat": chat_model,
    "responses": _responses_model,
    "anthropic": _anthropic_model,
}


def build_provider_runner(client: str) -> PydanticAiRunner[None]:
    """The matrix agent of `tests.matrix_spec` with the provider model ``client`` names."""
    agent = Agent(
        CLIENTS[client](),
        instructions="You handle orders: look them up, send receipts, refund and cancel them.",
        tools=list(MATRIX_TOOLS),
    )
    # The clients keep their own retries (two, honouring Retry-After); only the timeout is short.
    return PydanticAiRunner(agent, model_settings=ModelSettings(timeout=MODEL_TIMEOUT_SECONDS))


def provider_spec(client: str, prefix: str) -> MatrixSpec:
    """The matrix spec of one provider client."""
    return MatrixSpec(
        build_runner=lambda: build_provider_runner(client),
        worker_module="tests.provider_matrix_worker",
        flow_type_prefix=prefix,
        worker_cwd=PACKAGE_DIR,
        worker_env={CLIENT_ENV: client},
        approval_deadline=timedelta(seconds=4),
        unknown_tool_message="Unknown tool name: 'launch_rocket'",
        supports_turn_control=True,
        supports_built_in_tools=True,
        provider_backed=True,
    )


SPEC = provider_spec("chat", "PydanticAiOpenAIChat")
RESPONSES_SPEC = provider_spec("responses", "PydanticAiOpenAIResponses")
ANTHROPIC_SPEC = provider_spec("anthropic", "PydanticAiAnthropic")
SPECS = {"chat": SPEC, "responses": RESPONSES_SPEC, "anthropic": ANTHROPIC_SPEC}
