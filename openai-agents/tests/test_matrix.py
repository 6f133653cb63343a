"""The design's 11-item matrix against the devserver, with a real SDK agent loop and Worker children."""

from dex_agents.testing.matrix import AgentMatrixTests

from tests.matrix_spec import SPEC


class TestOpenAIAgentsMatrix(AgentMatrixTests):
    spec = SPEC
