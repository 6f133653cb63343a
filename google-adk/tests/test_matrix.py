"""The design's 11-item matrix and item 12 (an unknown tool) against the devserver,
with a real ADK application and Worker children.
"""

import collections

from dex_agents.testing.matrix import AgentMatrixTests, MatrixHarness

from tests.matrix_spec import SPEC


class TestGoogleAdkMatrix(AgentMatrixTests):
    spec = SPEC

    async def test_13_every_model_call_is_its_own_step_attempt(self, harness: MatrixHarness) -> None:
        """Across every session of the matrix, no Step attempt made a second, hidden model call."""
        # Item 6 kills the Worker inside a model call, and Dex may hand that same attempt to the replacement
        # Worker (the core matrix asserts that rerun itself), so its session is left out here.
        calls = [
            call
            for call in harness.stack.invocations.read()
            if call.kind == "model" and not call.session_id.startswith("m6-")
        ]
        assert len(calls) >= 11
        # Step execution IDs are unique within a session, so each session's pairs are counted apart.
        pairs = collections.Counter((call.session_id, call.step_execution_id, call.attempt) for call in calls)
        assert all(call.step_execution_id for call in calls)
        assert [pair for pair, count in pairs.items() if count > 1] == []
