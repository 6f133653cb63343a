"""The matrix's streaming, tool, approval, kill, retry and provider-fault items on Stepwise, through
LiteLLM's real OpenAI and Anthropic providers talking HTTP to the scripted provider server."""

from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests
from tests.stepwise_provider_agents import ANTHROPIC_SPEC, OPENAI_SPEC


class TestStepwiseOpenAIProviderMatrix(AgentMatrixTests):
    spec = OPENAI_SPEC
    only_items = PROVIDER_MATRIX_ITEMS


class TestStepwiseAnthropicProviderMatrix(AgentMatrixTests):
    spec = ANTHROPIC_SPEC
    # The kills and approvals do not depend on the provider; one class runs them, to keep CI short.
    only_items = (1, 19, 20, 21)
