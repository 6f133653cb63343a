"""The design's 11-item matrix and item 12 (an unknown tool) against the devserver,
with a real SDK agent loop and Worker children.
"""

import collections

from dex_agents.testing.matrix import AgentMatrixTests, MatrixHarness

from tests.matrix_spec import SPEC


class TestOpenAIAgentsMatrix(AgentMatrixTests):
    spec = SPEC

    async def test_13_every_model_call_attempt_is_logged_exactly_once(self, harness: MatrixHarness) -> None:
        """Across every matrix session so far, no Step attempt made a second, hidden model call."""
        calls = [call for call in harness.stack.invocations.read() if call.kind == "model"]
        # pytest runs the inherited matrix tests first, so the log holds all of their model calls.
        assert len(calls) >= 20, len(calls)
        assert all(call.step_execution_id for call in calls), calls
        # Dex hands an attempt to a replacement Worker under the same number when the first Worker died before
        # any output (test 6 kills one there), so the Worker process is part of what names one attempt's run:
        # a duplicate within one Worker process is still a hidden second model call.
        runs = collections.Counter(
            (call.session_id, call.step_execution_id, call.attempt, call.pid) for call in calls
        )
        assert {run: count for run, count in runs.items() if count > 1} == {}
        redelivered = collections.Counter((session, step, attempt) for session, step, attempt, _ in runs)
        assert all(count <= 2 for count in redelivered.values()), redelivered
