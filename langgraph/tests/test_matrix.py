"""The design's 11-item matrix and item 12 (an unknown tool) against the devserver,
with a real `create_agent` agent and Worker children.
"""

import collections

from dex_agents.testing.matrix import AgentMatrixTests, MatrixHarness

from tests.matrix_spec import SPEC


class TestLangGraphMatrix(AgentMatrixTests):
    spec = SPEC

    async def test_13_every_model_call_attempt_is_logged_exactly_once(self, harness: MatrixHarness) -> None:
        """Across every matrix session so far, no Step attempt made a second, hidden model call."""
        calls = [call for call in harness.stack.invocations.read() if call.kind == "model"]
        # pytest runs the inherited matrix tests first, so the log holds all of their model calls.
        assert len(calls) >= 20, len(calls)
        pairs = collections.Counter((call.session_id, call.step_execution_id, call.attempt) for call in calls)
        assert all(step_execution_id for _, step_execution_id, _ in pairs), pairs
        assert {pair: count for pair, count in pairs.items() if count > 1} == {}
