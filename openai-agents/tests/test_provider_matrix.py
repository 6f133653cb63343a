"""The matrix through the SDK's real OpenAI models and `AsyncOpenAI`, against the scripted provider server.

`OpenAIResponsesModel` (the Responses API) runs every item of `PROVIDER_MATRIX_ITEMS`: streaming, tool
calls, approvals, Worker kills, retries and the provider faults. `OpenAIChatCompletionsModel` (Chat
Completions) runs the items whose outcome depends on the client and its wire format: a read and its
history, parallel calls, a kill during the model call, one model call per attempt, and the three provider
fault items; the approval and write-kill items (3, 5, 9) exercise the session, not the client, and run once.
"""

from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests

from tests.provider_matrix_spec import CHAT_SPEC, SPEC


class TestResponsesProviderMatrix(AgentMatrixTests):
    spec = SPEC
    only_items = PROVIDER_MATRIX_ITEMS


class TestChatCompletionsProviderMatrix(AgentMatrixTests):
    spec = CHAT_SPEC
    only_items = (1, 2, 6, 13, 19, 20, 21)
