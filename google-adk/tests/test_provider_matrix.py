"""The matrix's streaming, tool, approval, kill, retry and provider-fault items through ADK's `LiteLlm`,
with LiteLLM's real OpenAI and Anthropic providers talking HTTP to the scripted provider server."""

import pytest
from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests, MatrixHarness

from tests.provider_matrix_spec import ANTHROPIC_SPEC, SPEC

# ADK's LiteLlm drops a tool call whose arguments do not parse as JSON and answers MALFORMED_FUNCTION_CALL
# with neither the call nor its text, so there is no call to record as failed for the model to read: the
# adapter retries the model call, and a model that writes malformed arguments on every attempt fails the
# turn (with the session's failure note) instead. The docs' Limits page says so
# (docs/pages/frameworks/google-adk/limits.md).
_MALFORMED_ARGUMENTS_DROPPED = pytest.mark.xfail(
    strict=True,
    reason="ADK's LiteLlm discards a tool call with malformed arguments (MALFORMED_FUNCTION_CALL); "
    "the adapter retries the model call instead of recording the call failed",
)


class TestLiteLlmOpenAIMatrix(AgentMatrixTests):
    spec = SPEC
    only_items = PROVIDER_MATRIX_ITEMS

    @_MALFORMED_ARGUMENTS_DROPPED
    async def test_20_malformed_tool_call_arguments_reach_the_model_as_an_error(
        self, harness: MatrixHarness
    ) -> None:
        await super().test_20_malformed_tool_call_arguments_reach_the_model_as_an_error(harness)


class TestLiteLlmAnthropicMatrix(AgentMatrixTests):
    spec = ANTHROPIC_SPEC
    # The kills and approvals do not depend on the provider; the OpenAI class runs them, to keep CI short.
    only_items = (1, 19, 20, 21)

    @_MALFORMED_ARGUMENTS_DROPPED
    async def test_20_malformed_tool_call_arguments_reach_the_model_as_an_error(
        self, harness: MatrixHarness
    ) -> None:
        await super().test_20_malformed_tool_call_arguments_reach_the_model_as_an_error(harness)
