"""The matrix through the SDK's real OpenAI models and `AsyncOpenAI`, against the scripted provider server.

`OpenAIResponsesModel` (the Responses API) runs every item of `PROVIDER_MATRIX_ITEMS`: streaming, tool
calls, approvals, a kill during the model call, retries and the provider faults (items 3, 5 and 9, Worker
kills while no model call is in flight, only under `scripts/provider-matrix`). `OpenAIChatCompletionsModel`
(Chat Completions) runs a read turn and its history, and the three provider fault items, where its wire
format differs.
"""

from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests

from tests.provider_matrix_spec import CHAT_SPEC, SPEC


class TestResponsesProviderMatrix(AgentMatrixTests):
    spec = SPEC
    only_items = PROVIDER_MATRIX_ITEMS


class TestChatCompletionsProviderMatrix(AgentMatrixTests):
    spec = CHAT_SPEC
    only_items = (1, 19, 20, 21)
