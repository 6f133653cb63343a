"""A deliberately broken runner: the runner contract kit must fail for it.

Not collected by default (the file name has no ``test_`` prefix); ``tests/test_runner_contract.py`` runs it
in a nested pytest.
"""

from dataclasses import replace

from dex_agents import (
    AgentTurnContext,
    AgentTurnOutcome,
    FrameworkMessage,
    MessageRole,
    RunStateFormatError,
    ToolCallsRequested,
    ToolCallStatus,
)
from dex_agents.testing import RunnerContractSpec, ScriptedRunner
from dex_agents.testing._scripted_runner import _RUN_STATE  # pyright: ignore[reportPrivateUsage]
from dex_agents.testing.runner_contract import RunnerContractTests


class CarelessRunner(ScriptedRunner):
    """Defers calls in reverse order, starts the turn afresh from a run state it cannot read, and forgets the
    results of calls that never ran when a turn ends early."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        if turn.framework_run_state is not None:
            try:
                _RUN_STATE.unwrap(turn.framework_run_state)
            except RunStateFormatError:
                turn = replace(turn, framework_run_state=None)
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            return replace(outcome, tool_calls=list(reversed(outcome.tool_calls)))
        return outcome

    async def build_unfinished_turn_messages(self, turn: AgentTurnContext) -> list[FrameworkMessage]:
        items = await super().build_unfinished_turn_messages(turn)
        return [
            item
            for item in items
            if item.role is not MessageRole.TOOL
            or turn.recorded_tool_call(item.tool_call_id or "").status is not ToolCallStatus.REJECTED
        ]


class TestCarelessRunnerContract(RunnerContractTests):
    spec = RunnerContractSpec(
        build_runner=CarelessRunner,
        foreign_run_state_error="not written by ScriptedRunner",
        unknown_tool_message="unknown tool 'launch_rocket'",
    )
