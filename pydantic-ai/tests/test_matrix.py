"""The design's 11-item matrix and the core's items 12 to 15 (unknown tool, one model call per attempt,
steering during an approval, cancelling a model call) against the devserver, with a real Pydantic AI
agent and Worker children.
"""

from dex_agents.testing.matrix import AgentMatrixTests

from tests.matrix_spec import SPEC


class TestPydanticAiMatrix(AgentMatrixTests):
    spec = SPEC
