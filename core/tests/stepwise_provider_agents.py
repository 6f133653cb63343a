"""Stepwise agents whose model is LiteLLM's real OpenAI and Anthropic providers, over HTTP.

Each talks to `dex_agents.testing.scripted_provider_server` in the Worker process: only the base URL and a
dummy key differ from a production agent's, so LiteLLM's own provider code, its HTTP client and its
stream parsing all run.
"""

from datetime import timedelta
from pathlib import Path

from dex_agents import AgentSessionFlow, AgentSessionOptions, CompactionPolicy
from dex_agents.stepwise import AgentDefinition, LiteLLMModelClient, StepwiseRunner
from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, scripted_provider_server, with_model_call_scope

CORE_DIR = Path(__file__).resolve().parents[1]
DUMMY_KEY = "sk-scripted-offline"


def _runner(model: LiteLLMModelClient) -> StepwiseRunner:
    return StepwiseRunner(
        AgentDefinition(
            name="order-desk",
            model=model,
            instructions="You handle orders: look them up, send receipts, refund and cancel them.",
            tools=list(MATRIX_TOOLS),
        )
    )


def build_openai_runner() -> StepwiseRunner:
    """The matrix agent on LiteLLM's OpenAI provider (Chat Completions, streaming)."""
    server = scripted_provider_server()
    return _runner(
        LiteLLMModelClient(
            "openai/gpt-4.1-mini", forced_tool_choice=True, api_base=server.openai_base_url, api_key=DUMMY_KEY
        )
    )


def build_anthropic_runner() -> StepwiseRunner:
    """The matrix agent on LiteLLM's Anthropic provider (Messages, streaming)."""
    server = scripted_provider_server()
    return _runner(
        LiteLLMModelClient(
            "anthropic/claude-sonnet-4-5",
            forced_tool_choice=True,
            api_base=server.anthropic_base_url,
            api_key=DUMMY_KEY,
        )
    )


def _spec(build_runner: object, prefix: str, module: str) -> MatrixSpec:
    return MatrixSpec(
        build_runner=build_runner,  # type: ignore[arg-type]
        worker_module=module,
        flow_type_prefix=prefix,
        worker_cwd=CORE_DIR,
        approval_deadline=timedelta(seconds=4),
        unknown_tool_message="unknown tool 'launch_rocket'",
        supports_turn_control=True,
        provider_backed=True,
    )


OPENAI_SPEC = _spec(build_openai_runner, "StepwiseOpenAI", "tests.stepwise_provider_worker")
ANTHROPIC_SPEC = _spec(build_anthropic_runner, "StepwiseAnthropic", "tests.stepwise_provider_worker")
SPEC = OPENAI_SPEC
"""What scripts/chaos runs for core-stepwise: LiteLLM's OpenAI provider against the scripted server."""


def build_compacting_flow() -> AgentSessionFlow:
    """The OpenAI-provider agent with compaction whose window the runner never reaches by its own count,
    so only the provider's context-length refusal makes it compact."""
    options = AgentSessionOptions(compaction=CompactionPolicy(context_window_tokens=1_000_000))
    return AgentSessionFlow(
        with_model_call_scope(build_openai_runner()), flow_type="StepwiseOpenAICompacting", options=options
    )
