"""The design's 11-item matrix and items 12 to 15 beyond it (an unknown tool, one model call per attempt,
a steered and a cancelled turn) against the devserver, with a real SDK agent loop and Worker children.
"""

from dex_agents.testing.matrix import AgentMatrixTests

from tests.matrix_spec import SPEC


class TestOpenAIAgentsMatrix(AgentMatrixTests):
    spec = SPEC
