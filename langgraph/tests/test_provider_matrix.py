"""The matrix through LangChain's real provider clients over HTTP to the kit's scripted provider server.

ChatOpenAI on Chat Completions runs every provider matrix item (streaming, tool calls, approvals, kills,
retries and the provider faults); ChatAnthropic runs a read turn and the provider faults, which is where
the clients differ: the kills and approvals do not depend on the client, and CI time is short. ChatOpenAI
on the Responses API meets each fault in `test_provider_faults.py`, one attempt at a time.
"""

from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests

from tests.provider_matrix_spec import ANTHROPIC_SPEC, SPEC


class TestChatOpenAIMatrix(AgentMatrixTests):
    spec = SPEC
    only_items = PROVIDER_MATRIX_ITEMS


class TestChatAnthropicMatrix(AgentMatrixTests):
    spec = ANTHROPIC_SPEC
    only_items = (1, 19, 20, 21)
