"""The design's 11-item matrix against the devserver, with a real Pydantic AI agent and Worker children."""

from dex_agents.testing.matrix import AgentMatrixTests

from tests.matrix_spec import SPEC


class TestPydanticAiMatrix(AgentMatrixTests):
    spec = SPEC
