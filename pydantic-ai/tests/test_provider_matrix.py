"""The matrix through Pydantic AI's real provider clients against the kit's scripted provider server.

`OpenAIChatModel` runs every provider matrix item (items 3, 5 and 9, Worker kills while no model call is in
flight, only under `scripts/provider-matrix`); `OpenAIResponsesModel` and `AnthropicModel` run a read turn
and item 19's provider faults, which is where their wire formats differ.
"""

from typing import ClassVar

from dex_agents.testing.matrix import PROVIDER_MATRIX_ITEMS, AgentMatrixTests

from tests.provider_matrix_spec import ANTHROPIC_SPEC, RESPONSES_SPEC, SPEC


class TestOpenAIChatMatrix(AgentMatrixTests):
    spec = SPEC
    only_items: ClassVar[tuple[int, ...] | None] = PROVIDER_MATRIX_ITEMS


class TestOpenAIResponsesMatrix(AgentMatrixTests):
    spec = RESPONSES_SPEC
    only_items: ClassVar[tuple[int, ...] | None] = (1, 19)


class TestAnthropicMatrix(AgentMatrixTests):
    spec = ANTHROPIC_SPEC
    only_items: ClassVar[tuple[int, ...] | None] = (1, 19)
