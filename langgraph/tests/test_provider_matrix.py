"""The matrix through LangChain's real provider clients over HTTP to the kit's scripted provider server.

ChatOpenAI on Chat Completions runs every provider matrix item; ChatOpenAI on the Responses API and
ChatAnthropic run a few (a read turn, a Worker killed in the model call, the provider faults), which is
where the clients differ, to keep the package's CI time.
"""

from dex_agents.testing.matrix import AgentMatrixTests

from tests.provider_matrix_spec import ANTHROPIC_SPEC, RESPONSES_SPEC, SPEC


class TestChatOpenAIMatrix(AgentMatrixTests):
    spec = SPEC


class TestChatOpenAIResponsesMatrix(AgentMatrixTests):
    spec = RESPONSES_SPEC


class TestChatAnthropicMatrix(AgentMatrixTests):
    spec = ANTHROPIC_SPEC
