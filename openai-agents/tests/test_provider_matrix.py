"""The matrix through the SDK's real OpenAI models and `AsyncOpenAI`, against the scripted provider server.

Each class runs the items that stream, call tools, wait for approvals and retry, plus the provider-fault
items, with one client: `OpenAIResponsesModel` (the Responses API) and `OpenAIChatCompletionsModel` (Chat
Completions).
"""

from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests

from tests.provider_matrix_spec import CHAT_SPEC, SPEC


class TestResponsesProviderMatrix(AgentMatrixTests):
    spec = SPEC
    only_items = PROVIDER_MATRIX_ITEMS


class TestChatCompletionsProviderMatrix(AgentMatrixTests):
    spec = CHAT_SPEC
    only_items = PROVIDER_MATRIX_ITEMS
