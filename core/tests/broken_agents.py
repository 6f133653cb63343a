"""Deliberately broken runners: the matrix must fail when an adapter gets policies, unknown tools or the
number of model calls per attempt wrong.

Not collected by default (the file name has no ``test_`` prefix); ``tests/test_matrix_catches_defects.py``
runs it in a nested pytest.
"""

from dataclasses import replace

from dex_agents import (
    AgentTurnContext,
    AgentTurnOutcome,
    DeferredToolExecution,
    DeferredToolOutcome,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
)
from dex_agents.testing import MATRIX_TOOLS, MatrixSpec, ScriptedRunner
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


class SilentUnknownToolRunner(ReadOnlyPolicyRunner):
    """Also answers a call to a tool it does not have with an empty success (a plausible adapter bug)."""

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        if call.tool_call.tool_name not in {tool.__name__ for tool in MATRIX_TOOLS}:
            return ToolExecutionResult("")
        return await super().execute_deferred_tool_call(call)


class HiddenModelCallRunner(SilentUnknownToolRunner):
    """Also calls the model twice when a turn resumes after its own tools ran, keeping the second answer.

    A plausible adapter bug: a framework that retries a model call inside one RunModel attempt. (Item 12's
    unknown tool is left alone, so that item fails for its own defect.)
    """

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        known = {tool.__name__ for tool in MATRIX_TOOLS}
        if turn.is_resuming and all(record.tool_name in known for record in turn.tool_calls.values()):
            await super().run_model_step(turn)
        return await super().run_model_step(turn)


BROKEN_SPEC = MatrixSpec(
    build_runner=HiddenModelCallRunner,
    worker_module="tests.broken_worker",
    flow_type_prefix="Broken",
    worker_cwd=CORE_DIR,
    # What ScriptedRunner's error says; this runner never lets the model see it.
    unknown_tool_message="unknown tool 'launch_rocket'",
)


class TestBrokenMatrix(AgentMatrixTests):
    spec = BROKEN_SPEC
