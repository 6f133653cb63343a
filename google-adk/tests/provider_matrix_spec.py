"""The matrix through ADK's real LiteLLM client: `LiteLlm` against the kit's scripted provider server.

The same ordinary `LlmAgent` as ``tests/matrix_spec.py`` with the matrix tools, but its model is ADK's
`LiteLlm` (``openai/...`` through LiteLLM's OpenAI provider, ``anthropic/...`` through its Anthropic
provider) with only the base URL and a dummy key changed, so every model Step streams SSE over loopback
HTTP from `scripted_provider_server`, which answers from the session's script and injects its
`ProviderFault`s. `SPEC` (the OpenAI provider) is the one `scripts/chaos` imports.

The Worker child (``tests.provider_matrix_worker``) serves the spec that ``DEX_ADK_PROVIDER`` names.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Literal

from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, scripted_provider_server

from tests.matrix_spec import PACKAGE_DIR

# LiteLLM downloads its model cost map on import unless told otherwise: on a machine without network
# that is ten seconds of retries in every process that imports it.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.lite_llm import LiteLlm

from dex_agents_google_adk import GoogleAdkRunner

__all__ = ["ANTHROPIC_SPEC", "PROVIDER_ENV", "SPEC", "SPECS", "build_provider_runner"]

PROVIDER_ENV = "DEX_ADK_PROVIDER"
"""Which provider the Worker child serves: ``openai`` or ``anthropic``."""

Provider = Literal["openai", "anthropic"]

# Short enough that a test of a slow first byte does not wait long; far above what loopback needs.
_TIMEOUT_SECONDS = 10.0


def build_provider_runner(provider: Provider) -> GoogleAdkRunner:
    """The matrix's ADK application with ADK's `LiteLlm` on the scripted provider server."""
    server = scripted_provider_server()
    base_url = server.openai_base_url if provider == "openai" else server.anthropic_base_url
    model = LiteLlm(
        model=f"{provider}/scripted-model", api_base=base_url, api_key="sk-scripted", timeout=_TIMEOUT_SECONDS
    )
    agent = LlmAgent(
        name="orders",
        model=model,
        instruction="You handle orders: look them up, send receipts, refund and cancel them.",
        tools=list(MATRIX_TOOLS),
    )
    return GoogleAdkRunner(App(name="orders", root_agent=agent))


def _spec(provider: Provider, prefix: str) -> MatrixSpec:
    return MatrixSpec(
        build_runner=lambda: build_provider_runner(provider),
        worker_module="tests.provider_matrix_worker",
        flow_type_prefix=prefix,
        worker_cwd=PACKAGE_DIR,
        worker_env={PROVIDER_ENV: provider, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        approval_deadline=timedelta(seconds=4),
        unknown_tool_message="Tool 'launch_rocket' not found",
        supports_turn_control=True,
        provider_backed=True,
    )


SPEC = _spec("openai", "GoogleAdkLiteLlmOpenAI")
"""ADK's `LiteLlm` through LiteLLM's OpenAI provider (Chat Completions, streamed)."""
ANTHROPIC_SPEC = _spec("anthropic", "GoogleAdkLiteLlmAnthropic")
"""ADK's `LiteLlm` through LiteLLM's Anthropic provider (Messages, streamed)."""
SPECS: dict[str, MatrixSpec] = {"openai": SPEC, "anthropic": ANTHROPIC_SPEC}
