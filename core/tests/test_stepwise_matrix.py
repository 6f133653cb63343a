"""The design's 11-item matrix and item 12 (an unknown tool) on Stepwise, through LiteLLM's real code path."""

from dex_agents.testing.matrix import AgentMatrixTests
from tests.stepwise_agents import SPEC


class TestStepwiseMatrix(AgentMatrixTests):
    spec = SPEC
