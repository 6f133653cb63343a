"""The matrix agent through LangChain's real provider clients, against the kit's scripted provider server.

The agent is the matrix's `create_agent` agent (`tests.matrix_spec`) with its model slot holding
`ChatOpenAI` (Chat Completions, or the Responses API) or `ChatAnthropic`, each built as an application
builds it with only its base URL and a dummy key changed: the client streams over loopback HTTP to
`scripted_provider_server()`, which answers from the session's script and injects the script's provider
faults. `SPEC` (ChatOpenAI, Chat Completions) is the one `scripts/chaos` imports.

The clients keep their own retries (two, honouring ``Retry-After``), with short timeouts so a first byte
slower than the timeout fails in seconds, not the default ten minutes.

The test process and the Worker child (`tests.provider_matrix_worker`, which reads the client's name from
`CLIENT_ENV`) both build them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, scripted_provider_server
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models import BaseChatModel
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner
from tests.matrix_spec import SPEC as SCRIPTED_SPEC

CLIENT_ENV = "DEX_LANGGRAPH_PROVIDER_CLIENT"
"""The environment variable that names the Worker child's provider client."""
PROVIDER_KEY = "sk-scripted"
"""The dummy key every client is given; the scripted server accepts any."""
PROVIDER_TIMEOUT_SECONDS = 3.0
"""Each client's request timeout: a first byte later than this is a failed request (the client retries)."""


def chat_openai() -> BaseChatModel:
    """`ChatOpenAI` on the Chat Completions API, as an application would build it."""
    return ChatOpenAI(
        model="gpt-4.1",
        base_url=scripted_provider_server().openai_base_url,
        api_key=SecretStr(PROVIDER_KEY),
        timeout=PROVIDER_TIMEOUT_SECONDS,
    )


def chat_openai_responses() -> BaseChatModel:
    """`ChatOpenAI` on the Responses API."""
    return ChatOpenAI(
        model="gpt-4.1",
        base_url=scripted_provider_server().openai_base_url,
        api_key=SecretStr(PROVIDER_KEY),
        timeout=PROVIDER_TIMEOUT_SECONDS,
        use_responses_api=True,
    )


def chat_anthropic() -> BaseChatModel:
    """`ChatAnthropic` on the Messages API."""
    return ChatAnthropic(
        model_name="claude-sonnet-4-5",
        base_url=scripted_provider_server().anthropic_base_url,
        api_key=SecretStr(PROVIDER_KEY),
        timeout=PROVIDER_TIMEOUT_SECONDS,
        stop=None,
    )


CLIENTS: dict[str, Callable[[], BaseChatModel]] = {
    "chat_openai": chat_openai,
    "chat_openai_responses": chat_openai_responses,
    "chat_anthropic": chat_anthropic,
}
"""The provider clients by the name the Worker module takes."""


def build_provider_runner(client: str) -> LangGraphRunner:
    """The matrix's `create_agent` agent with the named provider client in its model slot."""
    build_model = CLIENTS[client]

    def build_agent(checkpointer: DexCheckpointSaver):
        return create_agent(
            build_model(),
            tools=list(MATRIX_TOOLS),
            system_prompt="You handle orders: look them up, send receipts, refund and cancel them.",
            middleware=[DexToolGate()],
            checkpointer=checkpointer,
        )

    return LangGraphRunner(build_agent)


def provider_spec(client: str, flow_type_prefix: str) -> MatrixSpec:
    """The matrix spec of one provider client: its Worker child and Flow types of its own."""
    return replace(
        SCRIPTED_SPEC,
        build_runner=lambda: build_provider_runner(client),
        worker_module="tests.provider_matrix_worker",
        worker_env={CLIENT_ENV: client},
        flow_type_prefix=flow_type_prefix,
        provider_backed=True,
    )


SPEC = provider_spec("chat_openai", "LangGraphChatOpenAI")
RESPONSES_SPEC = provider_spec("chat_openai_responses", "LangGraphChatOpenAIResponses")
ANTHROPIC_SPEC = provider_spec("chat_anthropic", "LangGraphChatAnthropic")
SPECS = {"chat_openai": SPEC, "chat_openai_responses": RESPONSES_SPEC, "chat_anthropic": ANTHROPIC_SPEC}
"""The specs by provider client."""
