"""The design's 11-item matrix and item 12 (an unknown tool) against the devserver,
with a real Pydantic AI agent and Worker children.
"""

import collections

from dex_agents.testing.matrix import AgentMatrixTests, MatrixHarness

from tests.matrix_spec import SPEC


class TestPydanticAiMatrix(AgentMatrixTests):
    spec = SPEC

    async def test_13_no_step_attempt_makes_a_hidden_second_model_call(self, harness: MatrixHarness) -> None:
        """Across every session of the matrix, each RunModel attempt made exactly one model call."""
        calls = [call for call in harness.stack.invocations.read() if call.kind == "model"]
        assert len(calls) >= 11
        assert all(call.step_execution_id for call in calls)
        # Step execution IDs are unique within a session. Dex hands an attempt to a replacement Worker under
        # the same number when the first Worker died before any output (test 6 kills one there), so the
        # Worker process is part of what names one attempt's run.
        runs = collections.Counter(
            (call.session_id, call.step_execution_id, call.attempt, call.pid) for call in calls
        )
        assert [run for run, count in runs.items() if count > 1] == []
        redelivered = collections.Counter((session, step, attempt) for session, step, attempt, _ in runs)
        assert all(count <= 2 for count in redelivered.values()), redelivered
