"""A deliberately broken runner, to prove the matrix fails when an adapter gets policies wrong.

Not collected by default (the file name has no ``test_`` prefix); ``tests/test_matrix_catches_defects.py``
runs it in a nested pytest.
"""

from dataclasses import replace

from dex_agents import AgentTurnContext, AgentTurnOutcome, ToolCallsRequested, ToolEffect, ToolPolicy
from dex_agents.testing import MatrixSpec, ScriptedRunner
from dex_agents.testing.matrix import AgentMatrixTests
from tests.agents import CORE_DIR


class ReadOnlyPolicyRunner(ScriptedRunner):
    """Calls every tool a read, instead of asking the turn for its policy (a plausible adapter bug)."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            calls = [replace(call, policy=ToolPolicy(ToolEffect.READ)) for call in outcome.tool_calls]
            return replace(outcome, tool_calls=calls)
        return outcome


BROKEN_SPEC = MatrixSpec(
    build_runner=ReadOnlyPolicyRunner,
    worker_module="tests.broken_worker",
    flow_type_prefix="Broken",
    worker_cwd=CORE_DIR,
)


class TestBrokenMatrix(AgentMatrixTests):
    spec = BROKEN_SPEC
