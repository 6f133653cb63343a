"""The design's 11-item matrix, run through the reusable harness with the core's ScriptedRunner."""

from dex_agents.testing.matrix import AgentMatrixTests
from tests.agents import SPEC


class TestCoreMatrix(AgentMatrixTests):
    spec = SPEC
