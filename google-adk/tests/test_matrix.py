"""The design's 11-item matrix and the core's items 12 to 15 against the devserver, with a real ADK
application and Worker children.
"""

from dex_agents.testing.matrix import AgentMatrixTests

from tests.matrix_spec import SPEC


class TestGoogleAdkMatrix(AgentMatrixTests):
    spec = SPEC
